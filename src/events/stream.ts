/**
 * `GET /events`: the change feed as Server-Sent Events. Each reader follows from its own
 * position: from the feed's kept pages once it has caught up (feed.ts), and waits on the feed
 * then. What is sent goes through a stream the socket pulls from, so that a reader that takes
 * nothing stops the reading; one that takes nothing for two heartbeats is disconnected. Streams
 * are bounded per client and per instance, and a ticket may stand in for a token (tickets.ts).
 */
import { Readable } from 'node:stream'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { AppError } from '../http/errors.js'
import { EventsSchema } from './events.schemas.js'
import type { EventFeed } from './feed.js'
import { oldestPosition } from './outbox.js'
import { ticketHolder } from './tickets.js'

/** How long a reconnecting EventSource waits before it tries again, as the stream tells it. */
const RECONNECT_MS = 1000

/** Whom a stream is counted against: the token's issuer and subject when one was verified, else the address. */
const clientOf = (request: FastifyRequest): string => request.user?.sub === undefined
  ? `address ${request.ip}`
  : `token ${JSON.stringify([request.user.iss ?? null, request.user.sub])}`

/** Where the stream starts: after `Last-Event-ID`, else after `after`, else after the newest event. */
async function startingPosition (app: FastifyInstance, feed: EventFeed, lastEventId: string | undefined, after: number | undefined): Promise<number> {
  const newest = await feed.newest()
  const asked = lastEventId !== undefined ? Number(lastEventId) : after
  if (asked === undefined) return newest
  if (asked > newest) {
    throw new AppError('event_from_another_feed', { asked, newest })
  }
  const oldest = await oldestPosition(app.db)
  // 0 names no event: it is the start of whatever the feed still keeps.
  if (asked === 0) return Math.max(oldest - 1, 0)
  if (asked < oldest - 1) {
    throw new AppError('events_purged', { asked, oldest, newest })
  }
  return asked
}

/** A reader's text: the reconnection delay, then events as they come, and a heartbeat when none does. */
async function * eventText (feed: EventFeed, start: number, heartbeatMs: number, reader: Reader): AsyncGenerator<string | Buffer> {
  let position = start
  yield * reader.sent(`retry: ${RECONNECT_MS}\n: following from ${position}\n\n`)
  while (!reader.closing.signal.aborted && !feed.closed) {
    const page = await feed.pageAfter(position)
    if (page !== undefined) {
      // A page goes to the socket as one write.
      yield * reader.sent(page.bytes)
      position = page.last
    }
    // Behind a full page read for this reader there may be more; else the reader has caught up,
    // and reads again when the feed has grown, not as fast as writes come.
    if (page?.more === true) continue
    const waited = performance.now()
    await feed.waitBeyond(position, heartbeatMs, reader.closing.signal)
    if (performance.now() - waited >= heartbeatMs) yield * reader.sent(': heartbeat\n\n')
  }
}

/** One reader of the stream: what ends it, and since when the socket has not taken what was sent. */
class Reader {
  readonly closing = new AbortController()
  /** When the stream last offered text that has not been taken since; undefined while none waits. */
  offeredAt: number | undefined

  /** Offers `text`; resumes once the socket's side has taken it. */
  * sent (text: string | Buffer): Generator<string | Buffer> {
    this.offeredAt = performance.now()
    yield text
    this.offeredAt = undefined
  }
}

interface StreamBounds { maxReaders: number, maxReadersPerClient: number }

const followEvents: FastifyPluginAsyncTypebox<{ feed: EventFeed, heartbeatMs: number, bounds: StreamBounds }> = async (app, { feed, heartbeatMs, bounds }) => {
  const readers = new Set<{ reader: Reader, destroy: () => void }>()
  /** Open streams by client. */
  const byClient = new Map<string, number>()

  /** Counts a new stream of the client, or refuses it past a bound: readers are few connections, never all of them. */
  function admit (client: string): void {
    const open = byClient.get(client) ?? 0
    if (open >= bounds.maxReadersPerClient) throw new AppError('too_many_streams_for_client', { max: bounds.maxReadersPerClient })
    if (readers.size >= bounds.maxReaders) throw new AppError('too_many_streams')
    byClient.set(client, open + 1)
  }
  function release (client: string): void {
    const open = byClient.get(client) ?? 1
    if (open <= 1) byClient.delete(client)
    else byClient.set(client, open - 1)
  }

  // Open streams end before the server closes, so that shutdown does not wait for their readers.
  app.addHook('preClose', (done) => {
    for (const { reader } of readers) reader.closing.abort()
    done()
  })
  // Looked for while there are readers: with none, nothing runs.
  let slowReaders: NodeJS.Timeout | undefined
  const watchReaders = () => {
    slowReaders ??= setInterval(() => {
      for (const { reader, destroy } of readers) {
        if (reader.offeredAt !== undefined && performance.now() - reader.offeredAt > 2 * heartbeatMs) destroy()
      }
      if (readers.size === 0) {
        clearInterval(slowReaders)
        slowReaders = undefined
      }
    }, Math.min(heartbeatMs, 1000)).unref()
  }
  app.addHook('onClose', (_app, done) => {
    clearInterval(slowReaders)
    done()
  })

  // A browser's EventSource sends no header: a ticket in the URL stands in for its token.
  const guards = { urlCredential: ticketHolder(app.db) }
  app.get('/events', app.protect('events:read', { schema: EventsSchema, exposeHeadRoute: false }, guards), async (request, reply) => {
    const start = await startingPosition(app, feed, request.headers['last-event-id'], request.query.after)
    const client = clientOf(request)
    admit(client)
    // Near the connection limit a stream may be closed to make room; its reader resumes with Last-Event-ID.
    app.holdsPlace(request)
    const reader = new Reader()
    const entry = {
      reader,
      destroy: () => {
        request.log.info({ heldMs: Math.round(performance.now() - (reader.offeredAt ?? 0)) }, 'disconnected an events reader that took nothing for two heartbeats')
        reply.raw.destroy()
      }
    }
    readers.add(entry)
    watchReaders()
    reply.raw.once('close', () => {
      reader.closing.abort()
      readers.delete(entry)
      release(client)
    })
    const text = Readable.from(eventText(feed, start, heartbeatMs, reader), { objectMode: false })
    // Fastify sends a stream as it is; the type provider knows only the JSON bodies of the schema.
    return await streamHeaders(reply).send(text as never)
  })
  // HEAD answers as every other GET does: the stream's status and headers, with no stream held open.
  app.head('/events', app.protect('events:read', { schema: { ...EventsSchema, hide: true } }, guards), async (request, reply) => {
    await startingPosition(app, feed, request.headers['last-event-id'], request.query.after)
    return await streamHeaders(reply).send()
  })
}

const streamHeaders = (reply: FastifyReply) => reply.type('text/event-stream; charset=utf-8').header('cache-control', 'no-store').header('x-accel-buffering', 'no')

export default followEvents
