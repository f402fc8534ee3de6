/**
 * Prometheus metrics: requests by method, route pattern and status, a latency histogram by
 * method and route pattern, the process and event-loop metrics of prom-client, and the
 * PostgreSQL pool's connections. Labels use the route pattern (`/users/:id`), never the raw
 * URL, so ids cannot multiply the series. prom-client is used directly: fastify-metrics
 * needs Node 22.
 */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { collectDefaultMetrics, Gauge, Registry, type Metric } from 'prom-client'

declare module 'fastify' {
  interface FastifyInstance {
    metricsRegistry: Registry
  }
}

/** Seconds; finer at the low end than prom-client's defaults, where this service answers. */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5]

/** Answers seen: how many, their total seconds, and how many fell in each latency bucket. */
interface Tally {
  count: number
  seconds: number
  /** Per bucket, not cumulative; the last counts those above every bound. */
  buckets: Float64Array
}

const emptyTally = (): Tally => ({ count: 0, seconds: 0, buckets: new Float64Array(LATENCY_BUCKETS.length + 1) })

/** What one method, route pattern and status code have seen. */
interface Series extends Tally {
  method: string
  route: string
  statusCode: number
}

type Sample = { metricName: string, labels: Record<string, string | number>, value: number }

/**
 * Request counts and latencies, kept as plain numbers per series. prom-client's own Counter
 * and Histogram hash their labels on every observation, which cost 5 % of `GET /`'s CPU; here a
 * request costs three map lookups and a few additions, and the Prometheus samples are built
 * only when /metrics is scraped. The two metrics read the same series. The maps are nested
 * by route pattern, method and status code so that no request builds a key string to hash.
 */
class RequestSeries {
  private readonly byRoute = new Map<string, Map<string, Map<number, Series>>>()

  record (method: string, route: string, statusCode: number, seconds: number): void {
    let byMethod = this.byRoute.get(route)
    if (byMethod === undefined) {
      byMethod = new Map()
      this.byRoute.set(route, byMethod)
    }
    let byStatus = byMethod.get(method)
    if (byStatus === undefined) {
      byStatus = new Map()
      byMethod.set(method, byStatus)
    }
    let found = byStatus.get(statusCode)
    if (found === undefined) {
      found = { method, route, statusCode, ...emptyTally() }
      byStatus.set(statusCode, found)
    }
    found.count++
    found.seconds += seconds
    let bucket = 0
    while (bucket < LATENCY_BUCKETS.length && seconds > LATENCY_BUCKETS[bucket]!) bucket++
    found.buckets[bucket]!++
  }

  private * series (): Generator<Series> {
    for (const byMethod of this.byRoute.values()) {
      for (const byStatus of byMethod.values()) yield * byStatus.values()
    }
  }

  requestSamples (name: string): Sample[] {
    return [...this.series()].map(({ method, route, statusCode, count }) =>
      ({ metricName: name, labels: { method, route, status_code: statusCode }, value: count }))
  }

  /** One histogram per method and route pattern, all status codes together. */
  latencySamples (name: string): Sample[] {
    const byRoute = new Map<string, Tally & { method: string, route: string }>()
    for (const series of this.series()) {
      const key = `${series.method} ${series.route}`
      let total = byRoute.get(key)
      if (total === undefined) {
        total = { method: series.method, route: series.route, ...emptyTally() }
        byRoute.set(key, total)
      }
      total.count += series.count
      total.seconds += series.seconds
      series.buckets.forEach((answers, bucket) => { total.buckets[bucket]! += answers })
    }
    return [...byRoute.values()].flatMap(({ method, route, count, seconds, buckets }): Sample[] => {
      let cumulative = 0
      return [
        ...LATENCY_BUCKETS.map((bound, bucket) => {
          cumulative += buckets[bucket]!
          return { metricName: `${name}_bucket`, labels: { le: bound, method, route }, value: cumulative }
        }),
        { metricName: `${name}_bucket`, labels: { le: '+Inf', method, route }, value: count },
        { metricName: `${name}_sum`, labels: { method, route }, value: seconds },
        { metricName: `${name}_count`, labels: { method, route }, value: count }
      ]
    })
  }
}

/** A metric as prom-client's registry reads it, whose samples come from `samples`. */
function registryMetric (name: string, help: string, type: 'counter' | 'histogram', samples: (name: string) => Sample[]) {
  return { name, help, type, aggregator: 'sum' as const, get: () => ({ name, help, type, aggregator: 'sum' as const, values: samples(name) }) }
}

async function metrics (app: FastifyInstance): Promise<void> {
  const registry = new Registry()
  collectDefaultMetrics({ register: registry })

  const requests = new RequestSeries()
  registry.registerMetric(registryMetric('http_requests_total', 'Requests answered, by method, route pattern and status code.',
    'counter', (name) => requests.requestSamples(name)) as unknown as Metric)
  registry.registerMetric(registryMetric('http_request_duration_seconds', 'Time to answer a request, by method and route pattern.',
    'histogram', (name) => requests.latencySamples(name)) as unknown as Metric)

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

  app.decorate('metricsRegistry', registry)
  app.addHook('onResponse', (request, reply, done) => {
    requests.record(request.method, request.routeOptions.url ?? 'unmatched', reply.statusCode, reply.elapsedTime / 1000)
    done()
  })
}

export default fp(metrics, { name: 'metrics', dependencies: ['storage'] })
