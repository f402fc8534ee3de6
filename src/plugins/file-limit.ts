/**
 * At most MAX_FILES_SENT files being sent at once, in the scope that serves pages (the docs
 * page's assets, static files); past it a page answers 503 with Retry-After at once.
 *
 * A file being sent holds one of the process's open files until the client has read it all.
 * Without a bound, clients that ask for a large file (the docs page's script is 1.7 MB) and
 * read it slowly take every descriptor the process has, a connection and a file each (a
 * connection's pipelined requests are handled in turn, pipelining.ts): then the database's
 * connections fail, and reading the memory figures for overload protection ends the process.
 * The bound fits in the descriptors that MAX_CONNECTIONS keeps for everything but
 * connections (config.ts).
 *
 * A request holds its place from its first hook until the file it sent is closed (read to
 * its end, or abandoned with its connection), or, when it sent no file, until its answer is
 * done.
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

interface Place {
  sendsFile: boolean
  release: () => void
}

async function fileLimit (pages: FastifyInstance): Promise<void> {
  let sending = 0
  const places = new WeakMap<object, Place>()

  pages.addHook('onRequest', (request, reply, done) => {
    if (sending >= MAX_FILES_SENT) {
      done(new TooManyFilesError())
      return
    }
    sending++
    let held = true
    const place: Place = {
      sendsFile: false,
      release: () => {
        if (held) sending--
        held = false
      }
    }
    places.set(request.raw, place)
    reply.raw.once('close', () => { if (!place.sendsFile) place.release() })
    done()
  })

  pages.addHook('onSend', (request, _reply, payload, done) => {
    const place = places.get(request.raw)
    if (place !== undefined && payload instanceof Readable) {
      place.sendsFile = true
      payload.once('close', place.release)
    }
    done(null, payload)
  })
}

export default fp(fileLimit, { name: 'file-limit' })
