/**
 * At most MAX_FILES_SENT files being sent at once, since each holds a descriptor until its client
 * has read it all; past it a page answers 503 (docs/decisions/0010-files-sent-at-once.md).
 */
import { Readable } from 'node:stream'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { AppError } from '../errors.js'

const MAX_FILES_SENT = 64

class TooManyFilesError extends AppError {
  constructor () {
    super('Too many files are being sent: try again shortly', 503, { 'retry-after': '1' })
  }
}

async function fileLimit (pages: FastifyInstance): Promise<void> {
  let sending = 0
  /** The requests holding a place, by their Node request: each gives it back once. */
  const holding = new WeakSet<object>()
  const release = (request: object) => { if (holding.delete(request)) sending-- }

  pages.addHook('onRequest', (request, reply, done) => {
    if (sending >= MAX_FILES_SENT) {
      done(new TooManyFilesError())
      return
    }
    sending++
    holding.add(request.raw)
    reply.raw.once('close', () => { release(request.raw) })
    done()
  })

  pages.addHook('onSend', (request, _reply, payload, done) => {
    if (payload instanceof Readable) payload.once('close', () => { release(request.raw) })
    done(null, payload)
  })
}

export default fp(fileLimit, { name: 'file-limit' })
