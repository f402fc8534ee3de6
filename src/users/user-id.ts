/**
 * How a user is named in a URL, and how its version is named in an ETag: `"<id>.<version>"`, a
 * strong tag that every change to the stored user, shown or not, replaces (RFC 9110 §8.8.3).
 */
import { MAX_USER_ID, type ExpectedVersions } from './repository.js'

/** Only the canonical decimal form names a user, so each user has exactly one URL. */
const CANONICAL_ID = /^[1-9][0-9]{0,9}$/

/** The user id a path names, or nothing when it names none. */
export function toUserId (pathValue: string): number | undefined {
  const id = Number(pathValue)
  return CANONICAL_ID.test(pathValue) && id <= MAX_USER_ID ? id : undefined
}

export const userTag = (id: number, version: number): string => `"${id}.${version}"`

/**
 * The versions of user `id` that `If-Match` names: any, for `*` or no header; else those of its
 * strong tags that are this user's (a weak tag never matches, RFC 9110 §13.1.1).
 */
export function expectedVersions (ifMatch: string | undefined, id: number): ExpectedVersions {
  if (ifMatch === undefined || ifMatch.trim() === '*') return 'any'
  const versions: number[] = []
  for (const candidate of ifMatch.split(',')) {
    const [, tagged, version] = /^"([0-9]+)\.([0-9]+)"$/.exec(candidate.trim()) ?? []
    if (Number(tagged) === id && version !== undefined) versions.push(Number(version))
  }
  return versions
}
