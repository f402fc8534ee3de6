/** The contract of `POST /users`. */
import { Type } from 'typebox'
import { errorResponse, type HeaderSchema, refTo } from '../http/schemas.js'
import { databaseUnavailable, invalid, NewUser, tooLarge, unsupported } from './user.schemas.js'

const IdempotencyKey = Type.Object({
  'idempotency-key': Type.Optional(Type.String({
    minLength: 1,
    maxLength: 255,
    pattern: '^[\\x21-\\x7e]+$',
    description: 'Makes the request safe to retry (IETF draft `Idempotency-Key`): a retry with the same key and the same body is answered ' +
      'as the first was, and stores nothing new. Use a new random value, a UUID say, for each user to create; keys are kept 24 hours ' +
      '(`IDEMPOTENCY_KEY_TTL`). With tokens on, a key is the caller\'s own: the same key from another `sub` is another key.'
  }))
})
const LOCATION: HeaderSchema = { type: 'string', description: 'The new user\'s URL, `/users/{id}`.' }
const CREATED_ETAG: HeaderSchema = {
  type: 'string',
  description: 'The new user\'s ETag, as `GET /users/{id}` gives it, for `If-Match` on a change right after. A retry answers the first tag again.'
}
const REPLAYED: HeaderSchema = {
  type: 'string',
  description: '`true` when the answer is the one given to an earlier request with the same `Idempotency-Key`; nothing new was stored.',
  required: false
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
      headers: { Location: LOCATION, ETag: CREATED_ETAG, 'Idempotent-Replayed': REPLAYED }
    }),
    400: invalid,
    409: errorResponse(['idempotency_key_in_use'], 'A request with this `Idempotency-Key` is still being answered by this instance; retry shortly.'),
    422: errorResponse(['idempotency_key_reused'], 'This `Idempotency-Key` was used with a different body.'),
    413: tooLarge,
    415: unsupported,
    503: databaseUnavailable,
    507: errorResponse(['user_ids_exhausted'], 'Every user id, 1 to 2,147,483,647, is taken: no more users can be stored.')
  }
}

/** The 201's `Location` is the new user's URL, for `GET`, `PATCH` and `DELETE /users/{id}`. */
const atLocation = (operationId: string) => ({
  operationId,
  description: 'The `Location` header of the answer, `/users/{id}`, is this operation\'s URL for the new user.'
})
export const createUserLinks = {
  201: { GetCreatedUser: atLocation('getUser'), UpdateCreatedUser: atLocation('updateUser'), DeleteCreatedUser: atLocation('deleteUser') }
}
