/** Storage of user records: plain functions over `db`, the only module that writes SQL for them. */
import { sql, type CompiledQuery, type Expression, type ExpressionBuilder, type Kysely, type SqlBool } from 'kysely'
import { DEFAULT_FIELDS, hasFilters, type ListedField, sortKey, type UserFilters, type UserQuery } from './list-query.js'
import type { Database, NewUser, UserOwner, UserRow } from '../storage/schema.js'

export type UserSummary = Pick<UserRow, 'id' | 'name'>
/** A user as looked up, with the version its ETag is made of. */
export type StoredUser = Pick<UserRow, 'id' | 'name' | 'version'>
/** The fields a change sets; those left out keep their values. */
export type UserChanges = Partial<NewUser>

/** The versions a change or an erasure applies to: any, or only those named (by `If-Match`). */
export type ExpectedVersions = 'any' | number[]

/** Whom a change or an erasure is allowed: anyone, or only the user's owner. */
export type AllowedWriter = 'anyone' | UserOwner

/** What a change or an erasure found: the user as it is now, no such user, another version of it, or another's user. */
export type WriteOutcome<Done> = Done | 'missing' | 'stale' | 'not-owner'

/**
 * The most frequent queries, built and compiled once for each database and run with each call's
 * values, in the order of their placeholders (docs/decisions/0020-frequent-queries-compiled-once.md).
 */
function compiledOnce<Row> (build: (db: Kysely<Database>) => CompiledQuery<Row>) {
  const compiled = new WeakMap<Kysely<Database>, CompiledQuery<Row>>()
  return async (db: Kysely<Database>, ...parameters: unknown[]): Promise<Row[]> => {
    let query = compiled.get(db)
    if (query === undefined) {
      query = build(db)
      compiled.set(db, query)
    }
    return (await db.executeQuery<Row>({ ...query, parameters })).rows
  }
}

/** name, email, owner_issuer, owner_subject */
const insertUser = compiledOnce((db) => db.insertInto('users').values({ name: '', email: '', owner_issuer: '', owner_subject: '' }).returning('id').compile())
/** id */
const userById = compiledOnce((db) => db.selectFrom('users').select(['id', 'name', 'version']).where('id', '=', 0).compile())

/** Stores a user, owned by `owner` if given; resolves once it is committed to the disk, with its new id. */
export async function createUser (db: Kysely<Database>, { name, email }: NewUser, owner?: UserOwner): Promise<number> {
  const [row] = await insertUser(db, name, email, owner?.issuer ?? null, owner?.subject ?? null)
  return row!.id
}

export async function findUser (db: Kysely<Database>, id: number): Promise<StoredUser | undefined> {
  const [user] = await userById(db, id)
  return user
}

const ownedBy = (row: { owner_issuer: string | null, owner_subject: string | null }, owner: UserOwner) =>
  row.owner_issuer === owner.issuer && row.owner_subject === owner.subject

/** Why a conditional write changed nothing: the user is gone, it is another's, or it is at another version. */
async function whyUnwritten (db: Kysely<Database>, id: number, writer: AllowedWriter): Promise<'missing' | 'stale' | 'not-owner'> {
  const row = await db.selectFrom('users').select(['owner_issuer', 'owner_subject']).where('id', '=', id).executeTakeFirst()
  if (row === undefined) return 'missing'
  return writer !== 'anyone' && !ownedBy(row, writer) ? 'not-owner' : 'stale'
}

type Narrowable<Query> = { where: (column: 'version' | 'owner_issuer' | 'owner_subject', operator: 'in' | '=', value: number[] | string) => Query }

/**
 * Narrows a write of user `id` to the expected versions and the allowed writer, checked by the
 * statement that writes, so that no change between a check and the write can slip through.
 */
function narrowed<Query extends Narrowable<Query>> (query: Query, expected: ExpectedVersions, writer: AllowedWriter): Query {
  const atVersion = expected === 'any' ? query : query.where('version', 'in', expected)
  return writer === 'anyone' ? atVersion : atVersion.where('owner_issuer', '=', writer.issuer).where('owner_subject', '=', writer.subject)
}

/**
 * Sets the given fields and raises the version, in one statement that also checks the version, so
 * that of two writers who read the same version only the first succeeds. No fields: nothing is
 * written, and the user is answered as it is.
 */
export async function updateUser (db: Kysely<Database>, id: number, changes: UserChanges, expected: ExpectedVersions, writer: AllowedWriter): Promise<WriteOutcome<StoredUser>> {
  if (changes.name === undefined && changes.email === undefined) {
    const user = await narrowed(db.selectFrom('users').select(['id', 'name', 'version']).where('id', '=', id), expected, writer).executeTakeFirst()
    return user ?? await whyUnwritten(db, id, writer)
  }
  if (expected !== 'any' && expected.length === 0) return await whyUnwritten(db, id, writer)
  const update = db.updateTable('users').set((eb) => ({ ...changes, version: eb('version', '+', 1) })).where('id', '=', id)
  const user = await narrowed(update, expected, writer).returning(['id', 'name', 'version']).executeTakeFirst()
  return user ?? await whyUnwritten(db, id, writer)
}

/**
 * Deletes the user, if at an expected version. Triggers take it off the count and keep its
 * `Idempotency-Key` (migrations/2026-11-29-changing-users.ts); nothing else of it stays.
 */
export async function deleteUser (db: Kysely<Database>, id: number, expected: ExpectedVersions, writer: AllowedWriter): Promise<WriteOutcome<'deleted'>> {
  if (expected !== 'any' && expected.length === 0) return await whyUnwritten(db, id, writer)
  const deleted = await narrowed(db.deleteFrom('users').where('id', '=', id), expected, writer).returning('id').executeTakeFirst()
  return deleted === undefined ? await whyUnwritten(db, id, writer) : 'deleted'
}

/** How many users there are: the sum of the counter rows a trigger keeps. */
const userTotal = compiledOnce((db) => db.selectFrom('user_counts').select(sql<number | string>`coalesce(sum(total), 0)`.as('total')).compile())

/** A listed user: the members asked for, and those its page's order needs. */
export type ListedUser = Partial<Pick<UserRow, ListedField>> & { id: number }

/** The conditions of the filters, each one that an index serves. */
function matching (eb: ExpressionBuilder<Database, 'users'>, filters: UserFilters): Expression<SqlBool> {
  const conditions: Array<Expression<SqlBool>> = []
  if (filters.email !== undefined) conditions.push(eb(eb.fn<string>('lower', ['email']), '=', filters.email))
  if (filters.name !== undefined) conditions.push(eb('name', '=', filters.name))
  if (filters.name_prefix !== undefined) {
    conditions.push(eb('name', '>=', filters.name_prefix))
    const end = prefixEnd(filters.name_prefix)
    if (end !== undefined) conditions.push(eb('name', '<', end))
  }
  if (filters.created_after !== undefined) conditions.push(eb('created_at', '>', filters.created_after))
  if (filters.created_before !== undefined) conditions.push(eb('created_at', '<', filters.created_before))
  return eb.and(conditions)
}

/**
 * The least text after every text that starts with `prefix`, by code point (the order of both
 * databases' names), or undefined when there is none: the prefix with its last character raised.
 */
export function prefixEnd (prefix: string): string | undefined {
  const points = Array.from(prefix, (character) => character.codePointAt(0)!)
  while (points.length > 0) {
    const raised = points.pop()! + 1
    if (raised <= 0x10FFFF) return String.fromCodePoint(...points, raised === 0xD800 ? 0xE000 : raised)
  }
  return undefined
}

/**
 * A page of the query: its filters, then after its position in its order (sort key, then id), so
 * that each page is one range of one index however deep it is (migrations/2026-12-02-searchable-users.ts).
 */
export function pageQuery (db: Kysely<Database>, { filters, sort, limit, offset, after, fields }: UserQuery) {
  const key = sortKey(sort)
  const direction = sort.startsWith('-') ? 'desc' : 'asc'
  const beyond = direction === 'asc' ? '>' : '<'
  const columns = [...new Set<ListedField>(['id', ...fields, ...(key === 'id' ? [] : [key])])]
  return db.selectFrom('users').select(columns)
    .$if(hasFilters(filters), (query) => query.where((eb) => matching(eb, filters)))
    .$if(after !== undefined, (query) => query.where((eb) => key === 'id'
      ? eb('id', beyond, after!.id)
      : eb(eb.refTuple(key, 'id'), beyond, eb.tuple(String(after!.key), after!.id))))
    .$if(key !== 'id', (query) => query.orderBy(key, direction))
    .orderBy('id', direction)
    .limit(limit)
    .offset(offset)
}

/** How many users the filters match: a count of what the filter's index finds. */
async function countMatching (db: Kysely<Database>, filters: UserFilters): Promise<number> {
  const { total } = await db.selectFrom('users').select((eb) => eb.fn.countAll<number | string>().as('total'))
    .where((eb) => matching(eb, filters)).executeTakeFirstOrThrow()
  return Number(total)
}

/** The plain page, as docs/api.md shows it: by id, unfiltered, `id` and `name`. */
const PLAIN_PAGE: UserQuery = { filters: {}, sort: 'id', limit: 0, offset: 0, fields: DEFAULT_FIELDS, countFiltered: false }
const isPlainPage = ({ filters, sort, fields }: UserQuery) =>
  sort === PLAIN_PAGE.sort && !hasFilters(filters) && fields.length === DEFAULT_FIELDS.length && fields.every((field, index) => field === DEFAULT_FIELDS[index])
/** The plain page, built by pageQuery and compiled once: limit, offset; and after an id: after, limit, offset. */
const pageAt = compiledOnce((db) => pageQuery(db, PLAIN_PAGE).compile())
const pageAfter = compiledOnce((db) => pageQuery(db, { ...PLAIN_PAGE, after: { key: 0, id: 0 } }).compile())

/**
 * One page, and the total: all users, kept by triggers; the filtered ones when asked (a count of
 * the matches); else none. Asked for together: on SQLite they go in one batch, and so one snapshot,
 * unless more reads wait than a batch carries.
 */
export async function listUsers (db: Kysely<Database>, query: UserQuery): Promise<{ users: ListedUser[], total: number | undefined }> {
  const { limit, offset, after } = query
  const filtered = hasFilters(query.filters)
  const [users, total] = await Promise.all([
    !isPlainPage(query) ? pageQuery(db, query).execute() : after === undefined ? pageAt(db, limit, offset) : pageAfter(db, after.id, limit, offset),
    // PostgreSQL returns a sum of integers as a bigint, in a string.
    !filtered ? userTotal(db).then(([count]) => Number(count!.total)) : query.countFiltered ? countMatching(db, query.filters) : undefined
  ])
  return { users, total }
}
