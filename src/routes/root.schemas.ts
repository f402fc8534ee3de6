/** The contract of the greeting routes. */
import { Type } from 'typebox'
import { errorResponse, refTo } from '../http/schemas.js'

const Greeting = Type.Object({
  hello: Type.String({ examples: ['world'] })
}, { $id: 'Greeting', additionalProperties: false, description: 'A greeting.', examples: [{ hello: 'world' }] })

export const greetingSchemas = [Greeting]

export const HelloSchema = {
  summary: 'Say hello',
  description: 'Answers `{"hello": "world"}`: the smallest call that shows the service is up and reachable.',
  operationId: 'hello',
  tags: ['greeting'],
  response: { 200: refTo(Greeting, { description: 'Hello, world.' }) }
}

export const CustomSchema = {
  summary: 'Say hello to a name given in the query string',
  description: 'Demonstrates a query-string schema: `age` must be an integer when given; `hello` is `name`, or `world` without one.',
  operationId: 'customHello',
  tags: ['greeting'],
  querystring: Type.Object({
    name: Type.Optional(Type.String({ maxLength: 200, examples: ['Ada'] })),
    age: Type.Optional(Type.Integer({ examples: [36] }))
  }),
  response: {
    200: refTo(Greeting, { description: 'Hello to `name`, or to the world.' }),
    400: errorResponse(['validation_failed'], 'A query parameter has the wrong type, e.g. `age=abc`.')
  }
}
