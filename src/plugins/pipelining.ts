/**
 * Pipelined requests are handled one at a time, in order, and a connection with more than
 * MAX_WAITING waiting is closed (docs/decisions/0009-pipelining-in-order.md). The first hook after
 * the connection count.
 */
import type { Socket } from 'node:net'
import type { FastifyInstance, FastifyReply } from 'fastify'
import fp from 'fastify-plugin'

const MAX_WAITING = 64

async function pipelining (app: FastifyInstance): Promise<void> {
  /** For each connection with a request being handled, the requests waiting behind it. */
  const waiting = new WeakMap<Socket, Array<() => void>>()

  /** Lets the request go on; once its answer is done, the next waiting one goes on, if any. */
  function handle (socket: Socket, reply: FastifyReply, done: () => void): void {
    reply.raw.once('close', () => {
      const next = socket.destroyed ? undefined : waiting.get(socket)?.shift()
      if (next === undefined) waiting.delete(socket)
      else next()
    })
    done()
  }

  app.addHook('onRequest', (request, reply, done) => {
    const socket = request.raw.socket
    // A connection closed for pipelining too much: the requests Node parsed after it are dropped.
    if (socket.destroyed) return
    const queue = waiting.get(socket)
    if (queue === undefined) {
      waiting.set(socket, [])
      handle(socket, reply, done)
    } else if (queue.length < MAX_WAITING) {
      queue.push(() => { handle(socket, reply, done) })
    } else {
      request.log.info({ client: request.ip, maxWaiting: MAX_WAITING }, 'closing a connection that pipelined more requests than are handled in turn')
      waiting.delete(socket)
      socket.destroy()
    }
  })
}

export default fp(pipelining, { name: 'pipelining' })
