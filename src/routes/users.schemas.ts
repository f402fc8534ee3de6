/**
 * The contract of the user routes: request and every response. Validation, serialization, handler
 * types and the OpenAPI document all come from these schemas.
 */
import { Type } from 'typebox'
import { MAX_USER_ID } from '../db/users.js'
import { errorResponse, RETRY_AFTER } from '../errors.js'
import { refTo, type HeaderSchema } from '../route-schemas.js'
import { STORABLE_TEXT } from '../validation.js'

const Limit = (defaultValue: number) => Type.Integer({ minimum: 1, maximum: 1000, default: defaultValue, description: 'Users per page.' })
/** The database reads every user it skips, so an offset is bounded as a page is. */
const MAX_OFFSET = 10_000
const Offset = Type.Integer({ minimum: 0, maximum: MAX_OFFSET, default: 0, description: `Users to skip, at most ${MAX_OFFSET}.` })
const After = Type.Integer({
  minimum: 0,
  maximum: MAX_USER_ID,
  description: 'Start after the user with this id (keyset pagination: every page costs the same, however deep). Not with `offset`.',
  examples: [100]
})
const IdempotencyKey = Type.Object({
  'idempotency-key': Type.Optional(Type.String({
    minLength: 1,
    maxLength: 255,
    pattern: '^[\\x21-\\x7e]+$',
    description: 'Makes the request safe to retry (IETF draft `Idempotency-Key`): a retry with the same key and the same body is answered ' +
      'as the first was, and stores nothing new. Use a new random value, a UUID say, for each user to create; keys are kept 24 hours ' +
      '(`IDEMPOTENCY_KEY_TTL`).',
    examples: ['8e03978e-40d5-43e8-bc93-6894a57f9324']
  }))
})
const IfNoneMatch = Type.Object({
  'if-none-match': Type.Optional(Type.String({ description: 'ETags from earlier answers; if one is current, the answer is 304 with no body.' }))
})

const Name = Type.String({
  minLength: 1,
  maxLength: 200,
  pattern: STORABLE_TEXT,
  description: 'Any Unicode text without the NUL character (U+0000). An unpaired surrogate (`\\ud800` with no partner) is not Unicode text and is refused.',
  examples: ['Ada']
})
const Email = Type.String({
  format: 'email',
  maxLength: 254,
  description: 'An RFC 5321 mailbox, as JSON Schema defines `format: email`: `q@test`, `"q"@example.com` and `a@[127.0.0.1]` are accepted; ' +
    'non-ASCII addresses (RFC 6531, `idn-email`) are not.',
  examples: ['ada@example.com']
})

/** Said of every JSON body the user routes take. */
const PROTOTYPE_KEYS = 'A `__proto__` key, or a `constructor` key holding `prototype`, anywhere in the body is refused (400), as a guard against prototype poisoning.'

const UserSummary = Type.Object({
  id: Type.Integer({ minimum: 1, maximum: MAX_USER_ID, examples: [1] }),
  name: Name
}, { $id: 'UserSummary', additionalProperties: false, description: 'A stored user as lists show it.', examples: [{ id: 1, name: 'Ada' }] })

const User = Type.Object({
  id: Type.String({ description: 'The id exactly as given in the path.', examples: ['1'] }),
  name: Name
}, { $id: 'User', additionalProperties: false, description: 'A stored user, looked up by id.', examples: [{ id: '1', name: 'Ada' }] })

const NewUser = Type.Object({ name: Name, email: Email }, {
  $id: 'NewUser',
  examples: [{ name: 'Ada', email: 'ada@example.com' }],
  description: `A user to store. Other properties are allowed and echoed back, but only \`name\` and \`email\` are stored. ${PROTOTYPE_KEYS}`
})

const UserToValidate = Type.Object({
  name: Name,
  email: Email,
  age: Type.Optional(Type.Integer({ minimum: 0, examples: [36] }))
}, { $id: 'UserToValidate', additionalProperties: false, examples: [{ name: 'Ada', email: 'ada@example.com', age: 36 }], description: `The validation showcase's body: no other property is allowed. ${PROTOTYPE_KEYS}` })

const ValidatedUser = Type.Object({
  id: Type.String({ description: 'The path id.', examples: ['507f1f77bcf86cd799439011'] }),
  name: Type.String({ examples: ['Ada'] }),
  email: Type.String({ examples: ['ada@example.com'] })
}, {
  $id: 'ValidatedUser',
  additionalProperties: false,
  description: 'The path id with the body\'s name and email, and nothing else.',
  examples: [{ id: '507f1f77bcf86cd799439011', name: 'Ada', email: 'ada@example.com' }]
})

export const userSchemas = [UserSummary, User, NewUser, UserToValidate, ValidatedUser]

const LOCATION: HeaderSchema = { type: 'string', description: 'The new user\'s URL, `/users/{id}`.' }
const REPLAYED: HeaderSchema = {
  type: 'string',
  description: '`true` when the answer is the one given to an earlier request with the same `Idempotency-Key`; nothing new was stored.',
  required: false
}
const ETAG: HeaderSchema = { type: 'string', description: 'A strong entity tag of this answer, for `If-None-Match`.' }
const LINK: HeaderSchema = {
  type: 'string',
  description: 'RFC 8288 links: `rel="first"`, and `rel="next"` (the users after this page, by `after`) when the page is full.'
}
const notModified = Type.Null({ description: 'Not modified: `If-None-Match` names the current ETag. No body.', headers: { ETag: ETAG } })
const TOTAL_COUNT: HeaderSchema = { type: 'integer', description: 'How many users are stored in all.' }

const invalid = errorResponse('The request fails its schema; the message names the field.')
const badPath = errorResponse('The request fails its schema, or its path cannot be decoded (`/users/%zz`); the message says which.')
const tooLarge = errorResponse('The body is larger than `BODY_LIMIT`.')
const ACCEPT_ENCODING: HeaderSchema = { type: 'string', description: '`identity`, when the body was refused for its `Content-Encoding`: bodies are taken only uncompressed.', required: false }
const unsupported = errorResponse('The body is not `application/json`, or it has a `Content-Encoding` (bodies are taken only uncompressed).',
  { 'Accept-Encoding': ACCEPT_ENCODING })
const databaseUnavailable = errorResponse('The database cannot do its work now, or the service is overloaded; retry after `Retry-After` seconds.',
  { 'Retry-After': RETRY_AFTER })

export const ListUsersSchema = {
  summary: 'List stored users',
  description: 'Users in ascending `id` order, one page at a time: by `after` (the last id of the page before; every page costs the ' +
    `same) or by \`offset\` (at most ${MAX_OFFSET}; deeper pages are reached by \`after\`). \`Link\` gives ` +
    'the next page and the first; `X-Total-Count` holds how many users there are in all.',
  operationId: 'listUsers',
  tags: ['users'],
  querystring: Type.Object({ limit: Limit(100), offset: Offset, after: Type.Optional(After) }),
  headers: IfNoneMatch,
  response: {
    200: Type.Array(refTo(UserSummary), {
      description: 'One page of users.',
      examples: [[{ id: 1, name: 'Ada' }, { id: 2, name: 'Grace' }]],
      headers: { 'X-Total-Count': TOTAL_COUNT, Link: LINK, ETag: ETAG }
    }),
    304: notModified,
    400: invalid,
    503: databaseUnavailable
  }
}

export const GetUserSchema = {
  summary: 'Look up a stored user',
  description: 'The user with this id: `id` as given in the path, and `name`. Only the canonical decimal form names a user ' +
    '(`1`, not `01` or `1.0`); any other is a 404.',
  operationId: 'getUser',
  tags: ['users'],
  params: Type.Object({
    id: Type.String({ description: 'The user\'s integer id, in decimal.', examples: ['1'] })
  }),
  headers: IfNoneMatch,
  response: {
    200: refTo(User, { description: 'The user.', headers: { ETag: ETAG } }),
    304: notModified,
    400: errorResponse('The path cannot be decoded, e.g. `/users/%zz`.'),
    404: errorResponse('No user has this id.'),
    503: databaseUnavailable
  }
}

export const CreateUserSchema = {
  summary: 'Store a new user',
  description: 'Stores `name` and `email` under the next integer id and answers with the body exactly as sent. ' +
    '`Location` points at the new user. A 201 means the user is committed.',
  operationId: 'createUser',
  tags: ['users'],
  headers: IdempotencyKey,
  body: refTo(NewUser),
  response: {
    201: refTo(NewUser, {
      description: 'Stored: the body exactly as sent, byte for byte; on a retry with the same `Idempotency-Key`, the first answer again.',
      headers: { Location: LOCATION, 'Idempotent-Replayed': REPLAYED }
    }),
    400: invalid,
    409: errorResponse('A request with this `Idempotency-Key` is still being answered by this instance; retry shortly.'),
    422: errorResponse('This `Idempotency-Key` was used with a different body.'),
    413: tooLarge,
    415: unsupported,
    503: databaseUnavailable,
    507: errorResponse('Every user id, 1 to 2,147,483,647, is taken: no more users can be stored.')
  }
}

/** The 201's `Location` is the new user's `GET /users/{id}`. */
export const createUserLinks = {
  201: {
    GetCreatedUser: {
      operationId: 'getUser',
      description: 'The `Location` header of the answer, `/users/{id}`, is this operation\'s URL for the new user.'
    }
  }
}

export const ValidateUserSchema = {
  summary: 'Validate a user against path, query and body schemas together',
  description: 'The specification\'s validation showcase: stores nothing, answers the path `id` with the body\'s `name` and `email`. ' +
    'Properties other than `name`, `email` and `age` are rejected, not dropped.',
  operationId: 'validateUser',
  tags: ['users'],
  params: Type.Object({
    id: Type.String({ pattern: '^[0-9a-fA-F]{24}$', description: '24 hexadecimal characters.', examples: ['507f1f77bcf86cd799439011'] })
  }),
  querystring: Type.Object({ limit: Limit(10), offset: Offset }),
  body: refTo(UserToValidate),
  response: {
    200: refTo(ValidatedUser, { description: 'The path id with the body\'s name and email.' }),
    400: badPath,
    413: tooLarge,
    415: unsupported
  }
}
