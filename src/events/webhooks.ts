/**
 * Webhook delivery: every event to every endpoint of WEBHOOK_URLS, at least once and in order,
 * signed as the Standard Webhooks specification says. Each endpoint is served by one loop on
 * whichever instance holds its lease (webhook-cursors.ts): the next event is posted, and only a 2xx
 * moves the endpoint past it; a failure is tried again after a back-off, until WEBHOOK_RETRY_FOR
 * has passed since its first failure, and then kept as failed.
 */
import { createHmac, randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyBaseLogger } from 'fastify'
import type { Kysely } from 'kysely'
import type { WebhookConfig } from '../config/events.js'
import type { Database } from '../storage/schema.js'
import type { EventFeed } from './feed.js'
import { eventsAfter, storedNow, type UserEvent } from './outbox.js'
import { addEndpoint, advance, type Cursor, giveUp, lease, retryLater } from './webhook-cursors.js'

/** How long an endpoint has to answer one event. */
export const DELIVERY_TIMEOUT_MS = 10_000
/** A lease outlasts a delivery, so that the holder renews it (by moving on) before it runs out. */
const LEASE_MS = 2 * DELIVERY_TIMEOUT_MS
/** The longest back-off between two tries of one event. */
const RETRY_DELAY_CAP_MS = 10 * 60_000

export type DeliveryOutcome = 'delivered' | 'retried' | 'failed'

/** The Standard Webhooks headers of one try of an event. */
export function signedHeaders (key: Buffer, id: string, body: string, nowMs = Date.now()): Record<string, string> {
  const timestamp = String(Math.floor(nowMs / 1000))
  const signature = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')
  return { 'content-type': 'application/json', 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': `v1,${signature}` }
}

/** The wait before try `attempts + 1`: doubling from the base, capped, the upper half of it random so that endpoints coming back are not met by every sender at once. */
export function retryDelay (retryBaseMs: number, attempts: number): number {
  const ceiling = Math.min(RETRY_DELAY_CAP_MS, retryBaseMs * 2 ** Math.min(attempts - 1, 30))
  return ceiling / 2 + Math.random() * ceiling / 2
}

/** An endpoint as logs name it: without its query, which may carry a credential. */
const shown = (url: string) => { const { origin, pathname } = new URL(url); return origin + pathname }

/** Posts the event; why not, when the endpoint did not take it. */
async function post (url: string, config: WebhookConfig, event: UserEvent): Promise<string | undefined> {
  const body = JSON.stringify(event)
  const authorization = config.authorization[url]
  const headers = { ...signedHeaders(config.key, `evt_${event.id}`, body), ...(authorization !== undefined && { authorization }) }
  try {
    const response = await fetch(url, { method: 'POST', headers, body, redirect: 'manual', signal: AbortSignal.timeout(DELIVERY_TIMEOUT_MS) })
    await response.body?.cancel()
    return response.ok ? undefined : `answered ${response.status}`
  } catch (error) {
    return (error as Error).name === 'TimeoutError' ? `no answer within ${DELIVERY_TIMEOUT_MS / 1000} s` : `could not be reached: ${(error as Error).message}`
  }
}

export interface Deliveries {
  /** Stops every loop after its current try. */
  stop: () => Promise<void>
}

export function deliverWebhooks (db: Kysely<Database>, feed: EventFeed, config: WebhookConfig, log: FastifyBaseLogger, counted: (outcome: DeliveryOutcome) => void): Deliveries {
  const owner = randomUUID()
  const stopping = new AbortController()
  const until = () => storedNow(LEASE_MS)

  /**
   * Tries the events after the cursor in order, while they are taken; resolves with the position
   * the endpoint has, or false when the lease was lost.
   */
  async function deliverFrom (url: string, cursor: Cursor): Promise<number | false> {
    for (const event of await eventsAfter(db, cursor.position)) {
      if (stopping.signal.aborted) return cursor.position
      const refusal = await post(url, config, event)
      if (refusal === undefined) {
        counted('delivered')
        if (!await advance(db, url, owner, event.id, until())) return false
        cursor = { position: event.id, attempts: 0, firstFailedAt: null, nextAttemptAt: null }
        continue
      }
      const now = storedNow()
      const failingSince = Date.parse(cursor.firstFailedAt ?? now)
      if (Date.now() - failingSince >= config.retryForMs) {
        counted('failed')
        log.warn({ endpoint: shown(url), event: event.id, attempts: cursor.attempts + 1, reason: refusal }, 'webhook event kept as failed: the endpoint did not take it within WEBHOOK_RETRY_FOR')
        if (!await giveUp(db, url, owner, event.id, cursor.attempts + 1, refusal, now, until())) return false
        cursor = { position: event.id, attempts: 0, firstFailedAt: null, nextAttemptAt: null }
        continue
      }
      counted('retried')
      const delay = retryDelay(config.retryBaseMs, cursor.attempts + 1)
      log.info({ endpoint: shown(url), event: event.id, attempts: cursor.attempts + 1, reason: refusal, retryInMs: Math.round(delay) }, 'webhook event not taken: trying again later')
      return await retryLater(db, url, owner, cursor, now, storedNow(delay)) && cursor.position
    }
    return cursor.position
  }

  async function serve (url: string): Promise<void> {
    await addEndpoint(db, url)
    while (!stopping.signal.aborted) {
      try {
        const cursor = await lease(db, url, owner, storedNow(), until())
        const due = cursor?.nextAttemptAt === null || cursor?.nextAttemptAt === undefined ? 0 : Date.parse(cursor.nextAttemptAt) - Date.now()
        if (cursor === undefined) {
          // Another instance serves it; this one takes over if that one stops renewing.
          await sleep(LEASE_MS / 2, undefined, { signal: stopping.signal, ref: false })
        } else if (due > 0) {
          await sleep(Math.min(due, LEASE_MS / 2), undefined, { signal: stopping.signal, ref: false })
        } else {
          const reached = await deliverFrom(url, cursor)
          if (reached !== false) await feed.waitBeyond(reached, LEASE_MS / 2, stopping.signal)
        }
      } catch (error) {
        if (stopping.signal.aborted) return
        log.warn({ endpoint: shown(url), err: error }, 'webhook delivery paused: the database could not be read or written; trying again shortly')
        await sleep(1000, undefined, { signal: stopping.signal, ref: false }).catch(() => {})
      }
    }
  }

  const loops = config.urls.map(async (url) => await serve(url).catch(() => {}))
  return {
    stop: async () => {
      stopping.abort()
      await Promise.all(loops)
    }
  }
}
