/** The contract of `POST /users/{id}`, the validation showcase. */
import { Type } from 'typebox'
import { refTo } from '../http/schemas.js'
import { badPath, Limit, Offset, pathTooLong, tooLarge, unsupported, UserToValidate, ValidatedUser } from './user.schemas.js'

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
    414: pathTooLong,
    415: unsupported
  }
}
