/**
 * Prometheus metrics (docs/decisions/0012-metrics-client-directly.md), labelled by route pattern,
 * never the raw URL, so that ids cannot multiply the series.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from '@prometheus-io/client'

declare module 'fastify' {
  interface FastifyInstance {
    metricsRegistry: Registry
  }
}

/** Seconds; finer at the low end than the library's defaults, where this service answers. */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5]

/**
 * The registry and the request metrics, made before the app's plugins so that app.ts can hand
 * them to those that count something (request-context.ts, the change feed).
 */
export class ServiceMetrics {
  readonly registry = new Registry()
  private readonly requests = new Counter({
    name: 'http_requests_total',
    help: 'Requests answered, by method, route pattern and status code.',
    labelNames: ['method', 'route', 'status_code'] as const,
    registers: [this.registry]
  })

  private readonly latency = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'Time to answer a request, by method and route pattern.',
    labelNames: ['method', 'route'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry]
  })

  constructor () {
    collectDefaultMetrics({ register: this.registry })
  }

  /** Counts an answered request and its time. */
  readonly observe = (request: FastifyRequest, reply: FastifyReply): void => {
    const method = request.method
    const route = request.routeOptions.url ?? 'unmatched'
    this.requests.inc({ method, route, status_code: reply.statusCode })
    this.latency.observe({ method, route }, reply.elapsedTime / 1000)
  }
}

/** The metrics of what the app holds: its connections, the database pool, the log lines dropped. */
async function metrics (app: FastifyInstance, { metrics, droppedLogLines }: { metrics: ServiceMetrics, droppedLogLines?: (() => number) | undefined }): Promise<void> {
  const registry = metrics.registry

  // The pool's gauges, once storage has opened a PostgreSQL pool; SQLite has none.
  app.addHook('onReady', (done) => {
    const poolStats = app.databasePoolStats
    if (poolStats !== undefined) {
      for (const [state, help] of [['open', 'open'], ['idle', 'idle'], ['waiting', 'requests waiting for a']] as const) {
        registry.registerMetric(new Gauge({
          name: `db_pool_connections_${state}`,
          help: `PostgreSQL pool: ${help} connection${state === 'waiting' ? '' : 's'}.`,
          registers: [],
          collect () { this.set(poolStats()[state]) }
        }))
      }
    }
    done()
  })

  const refusedConnections = app.refusedConnections
  registry.registerMetric(new Counter({
    name: 'connections_refused_total',
    help: 'Connections closed as they arrived because MAX_CONNECTIONS were open.',
    registers: [],
    collect () {
      this.reset()
      this.inc(refusedConnections())
    }
  }))

  if (droppedLogLines !== undefined) {
    registry.registerMetric(new Counter({
      name: 'log_lines_dropped_total',
      help: 'Log lines dropped because standard output did not take them (a stalled reader, a full disk).',
      registers: [],
      collect () {
        this.reset()
        this.inc(droppedLogLines())
      }
    }))
  }

  app.decorate('metricsRegistry', registry)
}

export default fp(metrics, { name: 'metrics', dependencies: ['edge'] })
