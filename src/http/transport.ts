/**
 * The HTTP edge: every guard of the transport, registered first as one plugin. Connections are
 * bounded, pipelined requests go in turn, bodies are read within their bounds, and what Node
 * refuses is answered in JSON; the bound on files sent at once is kept here for the routes that
 * send files (file-limit.ts).
 */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { readJsonBodies } from './bodies.js'
import { trackConnections } from './connections.js'
import { boundFilesSent } from './file-limit.js'
import { answerExpectAndConnect } from './malformed-http.js'
import { pipelineInOrder } from './pipelining.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** Connections refused since start, for being over MAX_CONNECTIONS. */
    refusedConnections: () => number
  }
}

async function edge (app: FastifyInstance, options: { maxConnections: number, bodyLimit: number }): Promise<void> {
  const connections = trackConnections(app, options.maxConnections)
  const inTurn = pipelineInOrder()
  app.decorate('refusedConnections', connections.refused)
  app.decorate('filesSent', boundFilesSent())
  app.decorate('earlyAnswers', new WeakMap())
  answerExpectAndConnect(app)
  readJsonBodies(app, options.bodyLimit)

  app.addHook('onRequest', (request, reply, done) => {
    // Counted as it arrives: a connection with none unanswered may be closed to make room.
    connections.arrived(request.raw)
    inTurn(request, reply, done)
  })
  app.addHook('onResponse', (request, _reply, done) => {
    connections.answered(request.raw.socket)
    if (!request.raw.complete) app.earlyAnswers.set(request.raw.socket, request.raw)
    done()
  })
}

export default fp(edge, { name: 'edge' })
