/**
 * What a `GET /users` asks for, as the repository takes it: its filters, its order, where its page
 * starts, and the members of each user. A page sorted by id starts after an id; any other sort
 * starts after a cursor that carries the sort key and id of the last user shown, its sort, and a
 * fingerprint of its filters, so that a cursor used with another sort or search is refused.
 */
import { createHash } from 'node:crypto'
import { ValidationError } from '../http/errors.js'
import { STORABLE_TEXT } from '../http/request-validation.js'
import { MAX_USER_ID } from '../storage/schema.js'
import { FILTER_PARAMETERS, type FilterParameter, LISTED_FIELDS, type ListParameters, SORTS } from './list.schemas.js'

export type Sort = typeof SORTS[number]
export type SortKey = 'id' | 'name' | 'created_at'

export type ListedField = typeof LISTED_FIELDS[number]
export const DEFAULT_FIELDS: ListedField[] = ['id', 'name']

/** The filters by parameter, as stored values compare: the address in lower case, times as `created_at` holds them. */
export type UserFilters = Partial<Record<FilterParameter, string>>

/** A page starts after this user in the sort's order: its sort key (its id for an id sort) and id. */
export interface Position {
  key: string | number
  id: number
}

export interface UserQuery {
  filters: UserFilters
  sort: Sort
  limit: number
  offset: number
  after?: Position | undefined
  fields: ListedField[]
  /** Whether the total counts the filtered users (`count=exact`); unfiltered, it always does. */
  countFiltered: boolean
}

export const sortKey = (sort: Sort): SortKey => (sort.startsWith('-') ? sort.slice(1) : sort) as SortKey
export const hasFilters = (filters: UserFilters): boolean => Object.values(filters).some((value) => value !== undefined)

/** A rule of the query its schema cannot say, named as JSON Schema would name it where it can. */
const invalidQuery = (path: string, message: string, keyword: string, params: Record<string, unknown>) =>
  new ValidationError(`querystring${path}`, message, [{ in: 'query', path, message, keyword, params }])

/** The instants `created_at` holds: UTC, to the millisecond, in a form that sorts as text. */
const STORED_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
/** RFC 3339 as Ajv's `date-time` lets it through: `T`, `t` or a space, and an offset with or without its colon or minutes. */
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt\s](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:[Zz]|([+-])(\d{2})(?::?(\d{2}))?)$/
const EARLIEST = '0000-01-01T00:00:00.000Z'
const LATEST = '9999-12-31T23:59:59.999Z'

/**
 * A time as `created_at` compares, to the millisecond: rounded down for a lower bound and up for
 * an upper one, so that a finer time keeps its place between stored ones.
 */
function storedInstant (parameter: string, text: string, rounding: 'down' | 'up'): string {
  const parts = DATE_TIME.exec(text)
  if (parts === null) throw invalidQuery(`/${parameter}`, 'must match format "date-time"', 'format', { format: 'date-time' })
  const [year, month, day, hour, minute, second] = parts.slice(1, 7).map(Number) as [number, number, number, number, number, number]
  const fraction = parts[7] ?? ''
  const milliseconds = Number(fraction.padEnd(3, '0').slice(0, 3)) + (rounding === 'up' && /[1-9]/.test(fraction.slice(3)) ? 1 : 0)
  const offsetMinutes = parts[8] === undefined ? 0 : (parts[8] === '-' ? -1 : 1) * (Number(parts[9]) * 60 + Number(parts[10] ?? 0))
  // setUTCFullYear, unlike Date.UTC, takes years 0 to 99 as they are.
  const instant = new Date(0)
  instant.setUTCFullYear(year, month - 1, day)
  instant.setUTCHours(hour, minute - offsetMinutes, second, milliseconds)
  const shifted = instant.getUTCFullYear()
  return shifted < 0 ? EARLIEST : shifted > 9999 ? LATEST : instant.toISOString()
}

/** A filter's value as stored values compare, where it differs from the text sent. */
const STORED_FORM: Partial<Record<FilterParameter, (text: string) => string>> = {
  email: (text) => text.toLowerCase(),
  created_after: (text) => storedInstant('created_after', text, 'down'),
  created_before: (text) => storedInstant('created_before', text, 'up')
}

/** The filters' fingerprint, carried by a cursor: short, and showing none of their values. */
function fingerprint (filters: UserFilters): string {
  if (!hasFilters(filters)) return ''
  const values = FILTER_PARAMETERS.map((name) => filters[name])
  return createHash('sha256').update(JSON.stringify(values)).digest('base64url').slice(0, 12)
}

/** Where the next page starts, as `after` says it: the id for an id sort, else a cursor. */
export function nextAfter (query: Pick<UserQuery, 'sort' | 'filters'>, last: { id: number, name?: string, created_at?: string }): string {
  const key = sortKey(query.sort)
  if (key === 'id') return String(last.id)
  return Buffer.from(JSON.stringify([query.sort, last[key], last.id, fingerprint(query.filters)])).toString('base64url')
}

/** A name as stored: text both databases keep as sent, of one to 200 characters. */
const storable = new RegExp(STORABLE_TEXT, 'u')
const isName = (text: string) => storable.test(text) && text.length > 0 && Array.from(text).length <= 200

/** A cursor's sort, key, id and filters' fingerprint; undefined when it is not one this service gave. */
function readCursor (text: string): [Sort, string, number, string] | undefined {
  let content: unknown
  try {
    content = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'))
  } catch {
    return undefined
  }
  if (!Array.isArray(content) || content.length !== 4) return undefined
  const [sort, key, id, search] = content as unknown[]
  if (!SORTS.includes(sort as Sort) || typeof key !== 'string' || typeof search !== 'string') return undefined
  if (!Number.isInteger(id) || (id as number) < 1 || (id as number) > MAX_USER_ID) return undefined
  const shaped = sortKey(sort as Sort) === 'name' ? isName(key) : sortKey(sort as Sort) === 'created_at' && STORED_INSTANT.test(key)
  return shaped ? [sort as Sort, key, id as number, search] : undefined
}

/** Where the page starts: after an id for an id sort, after a cursor of the same sort and search for any other. */
function position (after: string, sort: Sort, filters: UserFilters): Position {
  const key = sortKey(sort)
  if (/^[0-9]+$/.test(after)) {
    if (key !== 'id') {
      throw invalidQuery('/after', `is a user id, which places pages sorted by id; pages sorted by ${sort} go on from the cursor in their Link header`, 'cursor', { sort })
    }
    const id = Number(after)
    if (id > MAX_USER_ID) throw invalidQuery('/after', `must be <= ${MAX_USER_ID}`, 'maximum', { comparison: '<=', limit: MAX_USER_ID })
    return { key: id, id }
  }
  const cursor = readCursor(after)
  if (cursor === undefined) throw invalidQuery('/after', 'must be a user id or a cursor from a Link header of this service', 'cursor', { sort })
  const [cursorSort, cursorKey, id, search] = cursor
  if (cursorSort !== sort) throw invalidQuery('/after', `is a cursor of pages sorted by ${cursorSort}, not by ${sort}`, 'cursor', { sort, cursorSort })
  if (search !== fingerprint(filters)) {
    throw invalidQuery('/after', `is a cursor of another search: send the filters (${FILTER_PARAMETERS.join(', ')}) of the page it came from`, 'cursor', { sort, filters: FILTER_PARAMETERS })
  }
  return { key: cursorKey, id }
}

/** The request's query as the repository takes it; a 400 with `details` for what its schema cannot say. */
export function userQuery (parameters: ListParameters): UserQuery {
  const filters: UserFilters = {}
  for (const name of FILTER_PARAMETERS) {
    const value = parameters[name]
    if (value !== undefined) filters[name] = STORED_FORM[name]?.(value) ?? value
  }
  const sort = parameters.sort
  const fields = parameters.fields === undefined ? DEFAULT_FIELDS : LISTED_FIELDS.filter((field) => parameters.fields!.split(',').includes(field))
  return {
    filters,
    sort,
    limit: parameters.limit,
    offset: parameters.offset,
    after: parameters.after === undefined ? undefined : position(parameters.after, sort, filters),
    fields,
    countFiltered: parameters.count === 'exact'
  }
}

/** Whether a request reads addresses, by filter or by field: under `AUTH=writes` that needs a token too. */
export function readsEmail (query: { email?: unknown, fields?: unknown }): boolean {
  return query.email !== undefined || /(^|,)email(,|$)/.test(String(query.fields ?? ''))
}
