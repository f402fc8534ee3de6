/**
 * Pipelined requests are handled one at a time, in order, and a connection with more than
 * MAX_WAITING waiting is closed (docs/decisions/0009-pipelining-in-order.md).
 */
import type { Socket } from 'node:net'
import type { FastifyReply, FastifyRequest } from 'fastify'

const MAX_WAITING = 64

/** Lets each request go on in its connection's turn: `admit` calls `proceed` when it may. */
export function pipelineInOrder (): (request: FastifyRequest, reply: FastifyReply, proceed: () => void) => void {
  /** For each connection with a request being handled, the requests waiting behind it. */
  const waiting = new WeakMap<Socket, Array<() => void>>()

  /** Lets the request go on; once its answer is done, the next waiting one goes on, if any. */
  function handle (socket: Socket, reply: FastifyReply, proceed: () => void): void {
    reply.raw.once('close', () => {
      const next = socket.destroyed ? undefined : waiting.get(socket)?.shift()
      if (next === undefined) waiting.delete(socket)
      else next()
    })
    proceed()
  }

  return (request, reply, proceed) => {
    const socket = request.raw.socket
    // A connection closed for pipelining too much: the requests Node parsed after it are dropped.
    if (socket.destroyed) return
    const queue = waiting.get(socket)
    if (queue === undefined) {
      waiting.set(socket, [])
      handle(socket, reply, proceed)
    } else if (queue.length < MAX_WAITING) {
      queue.push(() => { handle(socket, reply, proceed) })
    } else {
      request.log.info({ client: request.ip, maxWaiting: MAX_WAITING }, 'closing a connection that pipelined more requests than are handled in turn')
      waiting.delete(socket)
      socket.destroy()
    }
  }
}
