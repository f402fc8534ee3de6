/**
 * Request bodies take at most MAX_BODY_BYTES of memory at once, counted as their bytes
 * arrive and given back once their answers are done; a body that would go past it is
 * refused with 503 and Retry-After, and the rest of it is read and dropped, so that the
 * connection serves its next request.
 *
 * Fastify keeps a body in memory until it has all arrived, and the route keeps it until
 * it has answered. Without a bound, clients that each send a body up to BODY_LIMIT and hold
 * back its last byte, or send large bodies faster than the database takes them, fill the
 * process's memory until the kernel ends it. A bound in bytes, rather than in requests,
 * makes a client that means to hold the bound send that many bytes and keep them coming.
 */
import type { IncomingMessage } from 'node:http'
import { Transform, type TransformCallback } from 'node:stream'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { AppError } from '../errors.js'

const MAX_BODY_BYTES = 64 * 1024 * 1024

class TooManyBodiesError extends AppError {
  constructor () {
    super('Too many request bodies are being received: try again shortly', 503, { 'retry-after': '1' })
  }
}

const hasBody = (request: IncomingMessage): boolean =>
  request.headers['transfer-encoding'] !== undefined ||
  (request.headers['content-length'] !== undefined && request.headers['content-length'] !== '0')

async function bodyMemory (app: FastifyInstance, options: { bodyLimit: number }): Promise<void> {
  // A body as large as BODY_LIMIT always fits, once no other body is held.
  const maxBytes = Math.max(MAX_BODY_BYTES, options.bodyLimit)
  let held = 0

  app.addHook('preParsing', (request, reply, payload, done) => {
    if (!hasBody(request.raw)) {
      done(null, payload)
      return
    }
    let counted = 0
    const body = new Transform({
      transform (chunk: Buffer, _encoding: BufferEncoding, next: TransformCallback) {
        if (held + chunk.length > maxBytes) {
          next(new TooManyBodiesError())
          return
        }
        held += chunk.length
        counted += chunk.length
        next(null, chunk)
      }
    })
    payload.once('error', (error) => { body.destroy(error) })
    payload.pipe(body)
    reply.raw.once('close', () => {
      payload.unpipe(body)
      body.destroy()
      held -= counted
      // What is left of a body refused or never read: read and dropped, as Node does with a
      // body nobody reads, so that the connection's next request can be parsed.
      payload.resume()
    })
    done(null, body)
  })
}

export default fp(bodyMemory, { name: 'body-memory' })
