/**
 * At most MAX_FILES_SENT files being sent at once, in the scope that serves pages (the docs
 * page's assets, static files); past it a page answers 503 with Retry-After at once.
 *
 * A file being sent holds one of the process's open files until the client has read it all.
 * Without a bound, clients that ask for a large file (the docs page's script is 1.7 MB) and
 * read it slowly take every descriptor the process has, a connection and a file each (a
 * connection's pipelined requests are handled in turn, pipelining.ts): then the database's
 * connections and every other file fail.
 * The bound fits in the descriptors that MAX_CONNECTIONS keeps for everything but
 * connections (config.ts).
 *
 * A request holds its place from its first hook until the file it sent is closed (read to
 * its end, or abandoned with its connection) or its answer is done, whichever comes first:
 * a small file is closed once read, while a client that reads slowly still holds its answer.
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
