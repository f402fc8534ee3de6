/**
 * How a user is named in a URL, and how its version is named in an ETag: `"<id>.<version>"`, a
 * strong tag that every change to the stored user, shown or not, replaces (RFC 9110 §8.8.3).
 */
import { MAX_USER_ID } from '../storage/schema.js'
import type { ExpectedVersions } from './repository.js'

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
 * tags that are, byte for byte, a tag this user has had (strong comparison, RFC 9110 §8.8.3.2: a
 * weak tag, or `"0122.1"` for `"122.1"`, never matches).
 */
export function expectedVersions (ifMatch: string | undefined, id: number): ExpectedVersions {
  if (ifMatch === undefined || ifMatch.trim() === '*') return 'any'
  const versions: number[] = []
  for (const candidate of ifMatch.split(',')) {
    const tag = candidate.trim()
    const version = Number(/^"[0-9]+\.([0-9]+)"$/.exec(tag)?.[1])
    if (Number.isSafeInteger(version) && tag === userTag(id, version)) versions.push(version)
  }
  return versions
}
