/**
 * Requests pipelined on one connection (sent before the answers to the earlier ones have
 * been read) are handled one at a time, in the order they came, as nginx handles them; a
 * connection with more than MAX_WAITING requests waiting behind the one being handled is
 * closed.
 *
 * Node's HTTP server hands the app every request it parses at once, so without this one
 * connection could have thousands of requests handled together, each holding its answer in
 * memory until the client read the ones before it: a few kilobytes of requests for full
 * pages ran a small container out of memory. Answers go out in order anyway, so handling a
 * connection's requests one at a time costs a pipelining client no answer, only work done
 * side by side. Each request holds its place until its answer is done (written, or its
 * connection gone).
 *
 * The first hook of every request but the connection limit's count, so that a request that
 * waits has nothing else begun.
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
