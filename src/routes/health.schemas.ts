/** The contract of the operational routes: liveness and readiness. */
import { Type } from 'typebox'
import { errorResponse, refTo } from '../http/schemas.js'

const Status = Type.Object({ status: Type.Literal('ok') }, { $id: 'Status', additionalProperties: false, description: 'All is well.', examples: [{ status: 'ok' }] })

export const statusSchemas = [Status]

export const HealthSchema = {
  summary: 'Liveness: the process answers',
  description: 'Touches no database, so an orchestrator does not restart the service for a database outage.',
  operationId: 'health',
  tags: ['operations'],
  response: { 200: refTo(Status, { description: 'The process answers.' }) }
}

export const ReadySchema = {
  summary: 'Readiness: the service can reach its database',
  description: 'On SQLite, checks that the file is still the one opened and that a write could begin; on PostgreSQL, runs a query. ' +
    'Answers within about a second.',
  operationId: 'ready',
  tags: ['operations'],
  response: {
    200: refTo(Status, { description: 'The database can do its work.' }),
    503: errorResponse(['database_unavailable', 'shutting_down', 'no_token_verifiable'], 'The database cannot do its work now, the service is shutting down (`Shutting down`, from SIGTERM on), ' +
      'or no key of the identity provider is kept to verify a token (`No token can be verified: …`, with why).')
  }
}
