/**
 * The contract of `GET /users`, and the one declaration of its parameters: their types come from
 * it, `Link` repeats them in its order, and a cursor's fingerprint covers its filters.
 */
import { type Static, Type } from 'typebox'
import { errorResponse, type HeaderSchema, refTo } from '../http/schemas.js'
import { databaseUnavailable, Email, ETAG, IfNoneMatch, Limit, MAX_OFFSET, Name, notModified, Offset, UserSummary } from './user.schemas.js'

const LINK: HeaderSchema = {
  type: 'string',
  description: 'RFC 8288 links: `rel="first"`, and `rel="next"` (the users after this page, by `after`) when the page is full. ' +
    'Both repeat the request\'s `sort`, filters, `fields` and `count`.'
}
const TOTAL_COUNT: HeaderSchema = {
  type: 'integer',
  description: 'How many users are stored in all, kept as users come and go. With a filter, how many it matches, and only with `count=exact`.',
  required: false
}

export const SORTS = ['id', '-id', 'name', '-name', 'created_at', '-created_at'] as const
export const LISTED_FIELDS = ['id', 'name', 'email', 'created_at'] as const

const FIELD_LIST = `(${LISTED_FIELDS.join('|')})`

/** The filters: each narrows the page through an index (repository.ts's `matching` says how). */
const FILTERS = {
  email: Type.Optional(Type.Unsafe<string>({
    ...Email,
    description: 'Only the users with this address, whatever the case of its letters (`Ada@Example.COM` finds `ada@example.com`). ' +
      'Under `AUTH=writes` this needs a token, as under `AUTH=all`; under `AUTH_SCOPES=on`, one with `users:read`.'
  })),
  name: Type.Optional(Type.Unsafe<string>({ ...Name, description: 'Only the users with exactly this name (case and all).' })),
  name_prefix: Type.Optional(Type.Unsafe<string>({
    ...Name,
    description: 'Only the users whose name starts with this text (case and all). With `name` as well, a user must match both.',
    examples: ['Ad']
  })),
  created_after: Type.Optional(Type.String({ format: 'date-time', description: 'Only the users stored after this time (RFC 3339; to the millisecond).', examples: ['2026-12-01T00:00:00Z'] })),
  created_before: Type.Optional(Type.String({ format: 'date-time', description: 'Only the users stored before this time (RFC 3339; to the millisecond).', examples: ['2026-12-02T00:00:00Z'] }))
}
export type FilterParameter = keyof typeof FILTERS
export const FILTER_PARAMETERS = Object.keys(FILTERS) as FilterParameter[]

const ListParametersSchema = Type.Object({
  limit: Limit(100),
  offset: Offset,
  after: Type.Optional(Type.String({
    pattern: '^[A-Za-z0-9_-]+$',
    maxLength: 4096,
    description: 'Where the page starts (keyset pagination: every page costs the same, however deep): sorted by id, after the user with this id; ' +
      'sorted otherwise, after the cursor `Link` gives, which holds its sort and search and is refused (400) with any other. ' +
      'With `offset`, that many more are skipped after it.',
    examples: ['100']
  })),
  sort: Type.Enum(SORTS, {
    default: 'id',
    description: 'The order: by `id`, `name` (by Unicode code point, so `Zoe` before `ada`) or `created_at`, ascending, or descending with `-`. ' +
      'Users with the same name or time come in id order (descending with `-`).'
  }),
  ...FILTERS,
  fields: Type.Optional(Type.String({
    pattern: `^${FIELD_LIST}(,${FIELD_LIST})*$`,
    description: `The members of each user, comma-separated, from ${LISTED_FIELDS.map((field) => `\`${field}\``).join(', ')}; by default \`id,name\`. ` +
      '`email` needs a token under `AUTH=writes`, as the `email` filter does.',
    examples: ['id,name,email']
  })),
  count: Type.Optional(Type.Enum(['exact'], {
    description: '`exact`: with a filter, `X-Total-Count` counts the users it matches, which costs a read of each of them. ' +
      'Without a filter the total is always sent, and costs the same at any size.'
  }))
})

/** The query string as the schema lets it through. */
export type ListParameters = Static<typeof ListParametersSchema>
/** The parameters `Link` repeats, in the schema's order: all but where the page starts. */
export const REPEATED = Object.keys(ListParametersSchema.properties).filter((name) => name !== 'offset' && name !== 'after') as Array<Exclude<keyof ListParameters, 'offset' | 'after'>>

export const ListUsersSchema = {
  summary: 'List, find and sort stored users',
  description: 'Users in ascending `id` order, or by `sort`, one page at a time: by `after` (every page costs the ' +
    `same) or by \`offset\` (at most ${MAX_OFFSET}; deeper pages are reached by \`after\`). Filters narrow the list: ` +
    '`email`, `name`, `name_prefix`, `created_after` and `created_before`, each served by an index. `Link` gives ' +
    'the next page and the first; `X-Total-Count` holds how many users there are in all, or, with `count=exact`, how many the filters match.',
  operationId: 'listUsers',
  tags: ['users'],
  querystring: ListParametersSchema,
  headers: IfNoneMatch,
  response: {
    200: Type.Array(refTo(UserSummary), {
      description: 'One page of users.',
      examples: [[{ id: 1, name: 'Ada' }, { id: 2, name: 'Grace' }]],
      headers: { 'X-Total-Count': TOTAL_COUNT, Link: LINK, ETag: ETAG }
    }),
    304: notModified,
    400: errorResponse(['validation_failed', 'invalid_url'], 'The request fails its schema, or `after` is no id or cursor of this sort and search; ' +
      'the message names the parameter, and `details` lists each failure.'),
    503: databaseUnavailable
  }
}
