/**
 * The contract of the user routes: request and every response, errors included. Validation,
 * serialization, handler types and the OpenAPI document all come from these schemas.
 */
import { Type } from 'typebox'
import { MAX_USER_ID } from '../db/users.js'
import { errorResponse } from '../errors.js'
import { NO_NUL } from '../validation.js'

const Limit = (defaultValue: number) => Type.Integer({ minimum: 1, maximum: 1000, default: defaultValue, description: 'Users per page.' })
const Offset = Type.Integer({ minimum: 0, maximum: MAX_USER_ID, default: 0, description: 'Users to skip.' })

const Name = Type.String({ minLength: 1, maxLength: 200, pattern: NO_NUL, examples: ['Ada'] })
const Email = Type.String({ format: 'email', maxLength: 254, examples: ['ada@example.com'] })

const UserSummary = Type.Object({
  id: Type.Integer({ minimum: 1, maximum: MAX_USER_ID, examples: [1] }),
  name: Name
})

const NewUser = Type.Object({ name: Name, email: Email }, {
  description: 'Other properties are allowed and echoed back, but only `name` and `email` are stored.'
})

const invalid = errorResponse('The request fails its schema; the message names the field.')
const tooLarge = errorResponse('The body is larger than `BODY_LIMIT`.')
const unsupported = errorResponse('The body is not `application/json`.')
const internal = errorResponse('Unexpected failure; details are in the server log, under the request id.')

export const ListUsersSchema = {
  summary: 'List stored users',
  description: 'Users in ascending `id` order, one page at a time. `X-Total-Count` holds how many there are in all.',
  operationId: 'listUsers',
  tags: ['users'],
  querystring: Type.Object({ limit: Limit(100), offset: Offset }),
  response: {
    200: Type.Array(UserSummary, { description: 'One page of users.' }),
    400: invalid,
    500: internal
  }
}

export const GetUserSchema = {
  summary: 'Look up a stored user',
  operationId: 'getUser',
  tags: ['users'],
  params: Type.Object({
    id: Type.String({ description: 'The user\'s integer id, in decimal.', examples: ['1'] })
  }),
  response: {
    200: Type.Object({
      id: Type.String({ description: 'The id exactly as given in the path.', examples: ['1'] }),
      name: Name
    }, { description: 'The user.' }),
    404: errorResponse('No user has this id: `{"error": "User not found"}`.'),
    500: internal
  }
}

export const CreateUserSchema = {
  summary: 'Store a new user',
  description: 'Stores `name` and `email` under the next integer id and answers with the body exactly as sent. ' +
    '`Location` points at the new user. A 201 means the user is committed.',
  operationId: 'createUser',
  tags: ['users'],
  body: NewUser,
  response: {
    201: Type.Object({ name: Name, email: Email }, {
      additionalProperties: true,
      description: 'The body exactly as sent.'
    }),
    400: invalid,
    413: tooLarge,
    415: unsupported,
    500: internal
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
  body: Type.Object({
    name: Name,
    email: Email,
    age: Type.Optional(Type.Integer({ minimum: 0 }))
  }, { additionalProperties: false }),
  response: {
    200: Type.Object({
      id: Type.String(),
      name: Type.String(),
      email: Type.String()
    }, { description: 'The path id with the body\'s name and email.' }),
    400: invalid,
    413: tooLarge,
    415: unsupported,
    500: internal
  }
}
