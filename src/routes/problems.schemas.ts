/** The contract of the problem types: what each code of the catalogue means. */
import { Type } from 'typebox'
import { errorResponse, refTo } from '../http/schemas.js'

const ProblemType = Type.Object({
  code: Type.String({ description: 'The code, as error answers carry it.' }),
  status: Type.Integer({ description: 'The status every answer with this code has.' }),
  title: Type.String({ description: 'What went wrong, as problem details give it in `title`.' }),
  retryable: Type.Boolean({ description: 'Whether the same request, sent again unchanged, may succeed later.' }),
  retry_after: Type.Optional(Type.Integer({ description: 'The seconds `Retry-After` asks a client to wait, when answers with this code carry it.' }))
}, {
  $id: 'ProblemType',
  additionalProperties: false,
  description: 'A code of the error catalogue, where the `type` of problem details leads.',
  examples: [{ code: 'database_unavailable', status: 503, title: 'Database unavailable', retryable: true, retry_after: 1 }]
})

export const problemSchemas = [ProblemType]

export const ProblemTypeSchema = {
  summary: 'Describe an error code',
  description: 'What the `type` of problem details (`/problems/<code>`) leads to: the code\'s status, title, and whether a retry may succeed.',
  operationId: 'getProblemType',
  tags: ['errors'],
  params: Type.Object({ code: Type.String({ pattern: '^[a-z0-9_]{1,64}$', examples: ['user_not_found'] }) }),
  response: {
    200: refTo(ProblemType, { description: 'The code\'s entry in the catalogue.' }),
    400: errorResponse(['validation_failed', 'invalid_url'], 'The code is not lower-case letters, digits and underscores.'),
    404: errorResponse(['route_not_found'], 'No code has this name.'),
    414: errorResponse(['uri_too_long'], 'The code in the path is longer than any code: over 100 characters.')
  }
}
