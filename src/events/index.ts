/**
 * The change feed: `GET /events`, the webhook deliveries, the purge of events past
 * EVENTS_RETENTION, and their metrics. Triggers fill the outbox (storage/migrations/2026-12-02-user-events.ts).
 */
import { Counter, Gauge, type Registry } from '@prometheus-io/client'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import type { EventsConfig } from '../config/events.js'
import type { Dialect } from '../storage/database.js'
import { EventFeed } from './feed.js'
import { eventsAfter, newestPosition, purgeEvents, storedNow } from './outbox.js'
import { eventSequencer } from './sequencer.js'
import followEvents from './stream.js'
import tickets from './tickets.js'
import { deliveredEverywhere, failedEvents } from './webhook-cursors.js'
import { type Deliveries, type DeliveryOutcome, deliverWebhooks } from './webhooks.js'

export { UserEvent, webhooksDocument } from './events.schemas.js'

/** How often events past their retention are looked for. */
const PURGE_EVERY_MS = 60 * 60_000

/** `metrics` is the registry the feed's metrics go to, when the service keeps them. */
async function events (app: FastifyInstance, { config, dialect, metrics }: { config: EventsConfig, dialect: Dialect, metrics: Registry | undefined }): Promise<void> {
  const sequence = eventSequencer(app.db, dialect)
  const feed = new EventFeed(async () => {
    await sequence()
    return await newestPosition(app.db)
  }, async (position) => await eventsAfter(app.db, position))
  await app.register(tickets)
  await app.register(followEvents, { feed, heartbeatMs: config.heartbeatMs, bounds: { maxReaders: config.maxReaders, maxReadersPerClient: config.maxReadersPerClient } })

  const delivered = metrics !== undefined
    ? new Counter({ name: 'webhook_deliveries_total', help: 'Tries of webhook events, by outcome: delivered, retried (not taken, tried again later) or failed (kept as failed).', labelNames: ['outcome'] as const, registers: [metrics] })
    : undefined
  if (metrics !== undefined && config.webhooks !== undefined) {
    const db = app.db
    metrics.registerMetric(new Gauge({
      name: 'webhook_failed_events',
      help: 'Webhook events kept as failed: not taken by their endpoint within WEBHOOK_RETRY_FOR.',
      registers: [],
      async collect () { this.set(await failedEvents(db).catch(() => Number.NaN)) }
    }))
  }

  const urls = config.webhooks?.urls ?? []
  async function purge (): Promise<void> {
    // Sequenced first, so that an event is purged by its age whether or not anyone has read the feed.
    await feed.newest()
    const upTo = await deliveredEverywhere(app.db, urls) ?? Number.MAX_SAFE_INTEGER
    const purged = await purgeEvents(app.db, storedNow(-config.retentionMs), upTo)
    if (purged > 0) app.log.info({ purged }, 'purged events past EVENTS_RETENTION')
  }

  let deliveries: Deliveries | undefined
  let purging: NodeJS.Timeout | undefined
  app.addHook('onReady', async () => {
    if (config.webhooks !== undefined) {
      deliveries = deliverWebhooks(app.db, feed, config.webhooks, app.log, (outcome: DeliveryOutcome) => delivered?.inc({ outcome }))
    }
    // Not at once: what the service does as it starts is only what it needs to serve.
    purging = setInterval(() => {
      purge().catch((error: unknown) => { app.log.warn({ err: error }, 'purging old events failed; trying again later') })
    }, PURGE_EVERY_MS).unref()
  })
  app.addHook('preClose', async () => {
    clearInterval(purging)
    feed.close()
    await deliveries?.stop()
  })
}

export default fp(events, { name: 'events', dependencies: ['storage', 'guards', 'edge'], encapsulate: true })
