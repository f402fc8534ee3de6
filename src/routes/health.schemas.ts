/** The contract of the operational routes: liveness and readiness. */
import { Type } from 'typebox'
import { errorResponse } from '../errors.js'

const Ok = Type.Object({ status: Type.Literal('ok') }, { description: 'Healthy.' })

export const HealthSchema = {
  summary: 'Liveness: the process answers',
  description: 'Touches no database, so an orchestrator does not restart the service for a database outage.',
  operationId: 'health',
  tags: ['operations'],
  response: { 200: Ok }
}

export const ReadySchema = {
  summary: 'Readiness: the service can reach its database',
  operationId: 'ready',
  tags: ['operations'],
  response: {
    200: Ok,
    503: errorResponse('The database does not answer.')
  }
}
