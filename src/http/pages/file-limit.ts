/**
 * At most MAX_FILES_SENT files being sent at once, since each holds a descriptor until its client
 * has read it all; past it a route that sends files answers 503
 * (docs/decisions/0010-files-sent-at-once.md).
 */
import { Readable } from 'node:stream'
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler, onSendHookHandler } from 'fastify'
import fp from 'fastify-plugin'
import { AppError } from '../errors.js'

const MAX_FILES_SENT = 64

declare module 'fastify' {
  interface FastifyInstance {
    /** The files being sent at once, for the routes that send files. */
    filesSent: FileBound
  }
}

export interface FileBound {
  /** Takes a place for a request to a route that sends files, or says there is none. */
  admit: (request: FastifyRequest, reply: FastifyReply) => Error | undefined
  /** Gives the place back once the file sent is closed, if that comes before the answer's end. */
  sending: (request: FastifyRequest, payload: unknown) => void
}

export function boundFilesSent (): FileBound {
  let sending = 0
  /** The requests holding a place, by their Node request: each gives it back once. */
  const holding = new WeakSet<object>()
  const release = (request: object) => { if (holding.delete(request)) sending-- }
  return {
    admit (request, reply) {
      if (sending >= MAX_FILES_SENT) return new AppError('too_many_files')
      sending++
      holding.add(request.raw)
      reply.raw.once('close', () => { release(request.raw) })
      return undefined
    },
    sending (request, payload) {
      if (payload instanceof Readable) payload.once('close', () => { release(request.raw) })
    }
  }
}

/** Bounds the files sent by the routes of the scope it is registered in. */
export const sendsFiles = fp(async (scope: FastifyInstance) => {
  const bound = scope.filesSent
  const admit: onRequestHookHandler = (request, reply, done) => { done(bound.admit(request, reply)) }
  const sending: onSendHookHandler = (request, _reply, payload, done) => {
    bound.sending(request, payload)
    done(null, payload)
  }
  scope.addHook('onRequest', admit)
  scope.addHook('onSend', sending)
}, { name: 'sends-files', dependencies: ['edge'] })
