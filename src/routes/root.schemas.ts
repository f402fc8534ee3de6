/** The contract of the greeting routes (seed §4.1 and §4.5). */
import { Type } from 'typebox'
import { errorResponse } from '../errors.js'

const Greeting = Type.Object({ hello: Type.String({ examples: ['world'] }) }, { description: 'A greeting.' })

export const HelloSchema = {
  summary: 'Say hello',
  operationId: 'hello',
  tags: ['greeting'],
  response: { 200: Greeting }
}

export const CustomSchema = {
  summary: 'Say hello to a name given in the query string',
  description: 'Demonstrates a query-string schema: `age` must be an integer when given; `hello` is `name`, or `world` without one.',
  operationId: 'customHello',
  tags: ['greeting'],
  querystring: Type.Object({
    name: Type.Optional(Type.String({ maxLength: 200 })),
    age: Type.Optional(Type.Integer())
  }),
  response: {
    200: Greeting,
    400: errorResponse('A query parameter has the wrong type, e.g. `age=abc`.')
  }
}
