/**
 * What the user routes share: their fields, the named schemas of a user, and the answers several
 * of them give. Each route's own schema is beside it.
 */
import { Type } from 'typebox'
import { MAX_USER_ID } from '../storage/schema.js'
import { STORABLE_TEXT } from '../http/request-validation.js'
import { errorResponse, type HeaderSchema, RETRY_AFTER } from '../http/schemas.js'

export const Limit = (defaultValue: number) => Type.Integer({ minimum: 1, maximum: 1000, default: defaultValue, description: 'Users per page.' })
/** The database reads every user it skips, so an offset is bounded as a page is. */
export const MAX_OFFSET = 10_000
export const Offset = Type.Integer({ minimum: 0, maximum: MAX_OFFSET, default: 0, description: `Users to skip, at most ${MAX_OFFSET}.` })
export const UserPath = Type.Object({
  id: Type.String({ description: 'The user\'s integer id, in plain decimal (`1` to `2147483647`, no leading zero); any other value names no user, and is 404.', examples: ['1'] })
})
export const IfNoneMatch = Type.Object({
  'if-none-match': Type.Optional(Type.String({ description: 'ETags from earlier answers; if one is current, the answer is 304 with no body.' }))
})

export const Name = Type.String({
  minLength: 1,
  maxLength: 200,
  pattern: STORABLE_TEXT,
  description: 'Any Unicode text without the NUL character (U+0000). An unpaired surrogate (`\\ud800` with no partner) is not Unicode text and is refused.',
  examples: ['Ada']
})
export const Email = Type.String({
  format: 'email',
  maxLength: 254,
  description: 'An RFC 5321 mailbox, as JSON Schema defines `format: email`: `q@test`, `"q"@example.com` and `a@[127.0.0.1]` are accepted; ' +
    'non-ASCII addresses (RFC 6531, `idn-email`) are not.',
  examples: ['ada@example.com']
})

/** Said of every JSON body the user routes take. */
const PROTOTYPE_KEYS = 'A `__proto__` key, or a `constructor` key holding `prototype`, anywhere in the body is refused (400), as a guard against prototype poisoning.'

export const UserSummary = Type.Object({
  id: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_USER_ID, examples: [1] })),
  name: Type.Optional(Name),
  email: Type.Optional(Type.String({ description: 'The address as stored.', examples: ['ada@example.com'] })),
  created_at: Type.Optional(Type.String({ format: 'date-time', description: 'When the user was stored: UTC, to the millisecond.', examples: ['2026-12-02T13:21:41.118Z'] }))
}, {
  $id: 'UserSummary',
  additionalProperties: false,
  description: 'A stored user as lists show it: `id` and `name`, or the members `fields` names.',
  examples: [{ id: 1, name: 'Ada' }]
})

export const User = Type.Object({
  id: Type.String({ description: 'The id exactly as given in the path.', examples: ['1'] }),
  name: Name
}, { $id: 'User', additionalProperties: false, description: 'A stored user, looked up by id.', examples: [{ id: '1', name: 'Ada' }] })

export const NewUser = Type.Object({ name: Name, email: Email }, {
  $id: 'NewUser',
  examples: [{ name: 'Ada', email: 'ada@example.com' }],
  description: `A user to store. Other properties are allowed and echoed back, but only \`name\` and \`email\` are stored. ${PROTOTYPE_KEYS}`
})

export const UserPatch = Type.Object({ name: Type.Optional(Name), email: Type.Optional(Email) }, {
  $id: 'UserPatch',
  additionalProperties: false,
  examples: [{ email: 'ada@example.org' }],
  description: 'A JSON Merge Patch (RFC 7396) of a user: the fields it holds are set, the others kept; `{}` changes nothing. ' +
    `\`null\` would remove a field, and a user cannot be without either, so it is refused (400), as is any other property. ${PROTOTYPE_KEYS}`
})

export const UserToValidate = Type.Object({
  name: Name,
  email: Email,
  age: Type.Optional(Type.Integer({ minimum: 0, examples: [36] }))
}, { $id: 'UserToValidate', additionalProperties: false, examples: [{ name: 'Ada', email: 'ada@example.com', age: 36 }], description: `The validation showcase's body: no other property is allowed. ${PROTOTYPE_KEYS}` })

export const ValidatedUser = Type.Object({
  id: Type.String({ description: 'The path id.', examples: ['507f1f77bcf86cd799439011'] }),
  name: Type.String({ examples: ['Ada'] }),
  email: Type.String({ examples: ['ada@example.com'] })
}, {
  $id: 'ValidatedUser',
  additionalProperties: false,
  description: 'The path id with the body\'s name and email, and nothing else.',
  examples: [{ id: '507f1f77bcf86cd799439011', name: 'Ada', email: 'ada@example.com' }]
})

export const userSchemas = [UserSummary, User, NewUser, UserPatch, UserToValidate, ValidatedUser]

export const ETAG: HeaderSchema = { type: 'string', description: 'A strong entity tag of this answer, for `If-None-Match`.' }
export const USER_ETAG: HeaderSchema = {
  type: 'string',
  description: 'The user\'s strong entity tag, `"<id>.<version>"`: for `If-None-Match` on `GET`, and `If-Match` on `PATCH` and `DELETE`. ' +
    'Any change to the stored user, shown here or not (its email), gives it a new one.'
}
const IF_MATCH = Type.String({
  description: 'The user\'s ETag as last seen (or `*`, any): if the user has changed since, the answer is 412 and nothing is written. ' +
    'Required when the service runs with `REQUIRE_IF_MATCH=on` (without it, 428); otherwise a write without it applies whatever the user\'s version.',
  examples: ['"1.1"']
})
/** `If-Match`, required under `REQUIRE_IF_MATCH=on`, so that a client made from the document sends it. */
export const ifMatchHeaders = (required: boolean) => Type.Object({ 'if-match': required ? IF_MATCH : Type.Optional(IF_MATCH) })
export const notFound = errorResponse(['user_not_found'], 'No user has this id.')
export const preconditionFailed = errorResponse(['precondition_failed', 'etag_not_of_user'], '`If-Match` names no current ETag of this user: it has changed since it was read. Nothing was written.')
export const preconditionRequired = errorResponse(['precondition_required'], '`If-Match` is missing, and the service requires it (`REQUIRE_IF_MATCH=on`). Nothing was written.')
export const notModified = Type.Null({ description: 'Not modified: `If-None-Match` names the current ETag. No body.', headers: { ETag: ETAG } })
/** The codes of a 400 for a JSON body. */
const BODY_REFUSALS = ['validation_failed', 'invalid_json', 'empty_json', 'json_not_utf8', 'forbidden_json_key', 'duplicate_json_member', 'json_too_deep',
  'body_incomplete'] as const
export const invalid = errorResponse(BODY_REFUSALS, 'The request fails its schema; the message names the field.')
export const badPath = errorResponse([...BODY_REFUSALS, 'invalid_url'], 'The request fails its schema, or its path cannot be decoded (`/users/%zz`); the message says which.')
export const pathTooLong = errorResponse(['uri_too_long'], 'The id in the path is longer than any id: over 100 characters.')
export const tooLarge = errorResponse(['body_too_large'], 'The body is larger than `BODY_LIMIT`.')
const ACCEPT_ENCODING: HeaderSchema = { type: 'string', description: '`identity`, when the body was refused for its `Content-Encoding`: bodies are taken only uncompressed.', required: false }
export const unsupported = errorResponse(['unsupported_media_type', 'unsupported_content_encoding'], 'The body is not `application/json`, or it has a `Content-Encoding` (bodies are taken only uncompressed).',
  { 'Accept-Encoding': ACCEPT_ENCODING })
export const databaseUnavailable = errorResponse(['database_unavailable', 'too_many_bodies'], 'The database cannot do its work now, or the service is overloaded; retry after `Retry-After` seconds.',
  { 'Retry-After': RETRY_AFTER })

/** Under `USER_OWNERSHIP=on`: the token is neither the user's owner nor an admin. */
export const notOwner = errorResponse(['not_owner', 'insufficient_scope'], '`USER_OWNERSHIP=on`: the user was stored by another token (or by none), and this token does not grant ' +
  '`users:admin`; or, with `AUTH_SCOPES=on`, it does not grant `users:write`.', { 'WWW-Authenticate': { type: 'string', description: 'The bearer challenge: `error="insufficient_scope"` and the scope that would do.' } })
