/** The problem types that error answers' `type` leads to, one per code of the catalogue. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import fp from 'fastify-plugin'
import { ERRORS, type ErrorCode, type Refusal, titleOf } from '../http/error-catalogue.js'
import { AppError } from '../http/errors.js'
import { ProblemTypeSchema } from './problems.schemas.js'

const isCode = (name: string): name is ErrorCode => Object.hasOwn(ERRORS, name)

const problems: FastifyPluginAsyncTypebox = async (app) => {
  app.get('/problems/:code', app.protect('users:read', { schema: ProblemTypeSchema }, { token: 'never' }), async (request) => {
    const { code } = request.params
    if (!isCode(code)) throw new AppError('route_not_found')
    const refusal: Refusal = ERRORS[code]
    return { code, status: refusal.status, title: titleOf(code), retryable: refusal.retryable, ...(refusal.retryAfter !== undefined && { retry_after: refusal.retryAfter }) }
  })
}

export default fp(problems, { name: 'problems', dependencies: ['guards'], encapsulate: true })
