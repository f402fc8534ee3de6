/** Metrics, on one database: run by test/app/ on each backend and by test/system/pgbouncer.test.ts behind PgBouncer. */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import parsePrometheusTextFormat from 'parse-prometheus-text-format'
import { postJson, testAppOn, type TestDatabase } from '../helpers.js'

export function metricsSuite (database: TestDatabase): void {
  describe(`metrics on ${database.name}`, { skip: database.skip }, () => {
    test('GET /metrics is Prometheus text: requests by method, route pattern and status, latency per route, process and event-loop metrics', async (t) => {
      const app = await testAppOn(t, database)
      await app.inject('/users/41')
      await app.inject('/users/42')
      await postJson(app, '/users', { name: 'Ada', email: 'ada@example.com' })
      await app.inject('/no/such/route')

      const response = await app.inject('/metrics')
      assert.equal(response.statusCode, 200)
      assert.match(String(response.headers['content-type']), /^text\/plain; version=0\.0\.4/)
      const families = new Map(parsePrometheusTextFormat(response.body).map((family) => [family.name, family]))

      const requests = families.get('http_requests_total')
      assert.equal(requests?.type, 'COUNTER')
      const count = (labels: Record<string, string>) => requests?.metrics.find((sample) =>
        Object.entries(labels).every(([key, value]) => sample.labels?.[key] === value))?.value
      assert.equal(count({ method: 'GET', route: '/users/:id', status_code: '404' }), '2', 'the route pattern, not the raw URL')
      assert.equal(count({ method: 'POST', route: '/users', status_code: '201' }), '1')
      assert.equal(count({ route: 'unmatched', status_code: '404' }), '1')
      assert.ok(!requests?.metrics.some((sample) => sample.labels?.route?.includes('42')), 'no id in any label')

      const latency = families.get('http_request_duration_seconds')
      assert.equal(latency?.type, 'HISTOGRAM')
      assert.ok(Object.keys(latency?.metrics[0]?.buckets ?? {}).includes('0.001'))
      assert.match(response.body, /^http_request_duration_seconds_bucket\{le="0\.005",method="GET",route="\/users\/:id"\} \d+$/m, 'one histogram per method and route')
      const sample = (name: string) => Number(new RegExp(`^${name}\\{(?:le="([^"]+)",)?method="GET",route="/users/:id"\\} (\\S+)$`, 'm').exec(response.body)?.[2])
      const cumulative = [...response.body.matchAll(/^http_request_duration_seconds_bucket\{le="[^"]+",method="GET",route="\/users\/:id"\} (\d+)$/gm)].map((match) => Number(match[1]))
      assert.equal(cumulative.length, 13, 'twelve bounds and +Inf')
      assert.deepEqual(cumulative, [...cumulative].sort((a, b) => a - b), 'buckets are cumulative')
      assert.equal(cumulative.at(-1), 2, '+Inf counts every answer')
      assert.equal(sample('http_request_duration_seconds_count'), 2)
      assert.ok(sample('http_request_duration_seconds_sum') > 0)

      for (const name of ['process_cpu_user_seconds_total', 'process_resident_memory_bytes', 'nodejs_eventloop_lag_seconds', 'nodejs_heap_size_used_bytes']) {
        assert.ok(families.has(name), name)
      }
      const pool = ['db_pool_connections_open', 'db_pool_connections_idle', 'db_pool_connections_waiting']
      if (database.name !== 'SQLite') {
        for (const name of pool) assert.equal(families.get(name)?.type, 'GAUGE', name)
        assert.ok(Number(families.get('db_pool_connections_open')?.metrics[0]?.value) >= 1)
      } else {
        for (const name of pool) assert.ok(!families.has(name), `${name}: SQLite has no pool`)
      }
    })
  })
}
