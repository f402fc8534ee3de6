/**
 * Traces over OTLP/HTTP, received by a collector this test runs itself: the service as a real
 * process with the standard OpenTelemetry variables set.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import http from 'node:http'
import { join } from 'node:path'
import { test, type TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { postJsonOver, rawRequest, temporaryFolder } from '../helpers.js'
import { startService } from '../process.js'

interface Span { traceId: string, spanId: string, parentSpanId?: string, name: string, kind: number, attributes: Array<{ key: string, value: { stringValue?: string } }> }

/**
 * An OTLP/HTTP receiver for traces in JSON: every span it is sent, with its service's name.
 * While `refusing`, it answers 503 and keeps nothing.
 */
async function startCollector (t: TestContext) {
  const spans: Array<Span & { service: string }> = []
  const state = { refusing: false }
  const server = http.createServer((request, response) => {
    let body = ''
    request.on('data', (chunk) => { body += String(chunk) })
    request.on('end', () => {
      if (state.refusing) {
        response.writeHead(503).end()
        return
      }
      if (request.url === '/v1/traces') {
        for (const resourceSpans of JSON.parse(body).resourceSpans ?? []) {
          const service = resourceSpans.resource.attributes.find((attribute: { key: string }) => attribute.key === 'service.name')?.value.stringValue
          for (const scopeSpans of resourceSpans.scopeSpans) for (const span of scopeSpans.spans) spans.push({ ...span, service })
        }
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.after(() => { server.close() })
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, spans, state }
}

const attribute = (span: Span, key: string) => span.attributes.find((entry) => entry.key === key)?.value.stringValue

test('with OTEL_EXPORTER_OTLP_ENDPOINT: a server span per request continuing the caller\'s traceparent, a child span per query, trace ids in the log', async (t) => {
  const collector = await startCollector(t)
  const service = await startService(t, {
    DATABASE_URL: `sqlite:${join(temporaryFolder(t), 'app.db')}`,
    OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
    OTEL_SERVICE_NAME: 'users-under-test',
    OTEL_BSP_SCHEDULE_DELAY: '100'
  })
  const traceId = randomBytes(16).toString('hex')
  const callerSpanId = randomBytes(8).toString('hex')
  const created = await rawRequest(service.port, {
    method: 'POST',
    path: '/users',
    headers: { 'content-type': 'application/json', traceparent: `00-${traceId}-${callerSpanId}-01` },
    body: JSON.stringify({ name: 'Ada', email: 'ada@example.com' })
  })
  assert.equal(created.statusCode, 201)
  assert.equal((await postJsonOver(service.port, '/users', { name: 'Grace', email: 'grace@example.com' })).statusCode, 201)
  assert.equal((await rawRequest(service.port, { path: '/users?email=grace%40example.com&limit=5', headers: { traceparent: `00-${traceId}-${callerSpanId}-01` } })).statusCode, 200)

  let ours: Span[] = []
  for (let attempt = 0; attempt < 50; attempt++) {
    ours = collector.spans.filter((span) => span.traceId === traceId)
    if (ours.some((span) => span.name.startsWith('db.')) && ours.some((span) => String(attribute(span, 'url.path')).startsWith('/users?'))) break
    await sleep(100)
  }
  const server = ours.find((span) => span.kind === 2)
  assert.ok(server, `a server span in the caller's trace: ${JSON.stringify(ours.map((span) => span.name))}`)
  assert.equal(server.parentSpanId, callerSpanId, 'it continues the caller\'s span')
  assert.equal(attribute(server, 'http.route'), '/users')
  const query = ours.find((span) => span.name === 'db.write')
  assert.ok(query, 'the insert has a span of its own')
  assert.equal(query.kind, 3, 'a client span')
  assert.match(String(attribute(query, 'db.query.text')), /^insert into "users"/)
  assert.ok(ours.some((span) => span.spanId === query.parentSpanId), 'the query\'s span is a child of the request\'s')
  assert.ok(collector.spans.every((span) => span.service === 'users-under-test'))
  const search = ours.find((span) => span.kind === 2 && String(attribute(span, 'url.path')).startsWith('/users?'))
  assert.equal(attribute(search!, 'url.path'), '/users?email=***&limit=5', 'a span masks query values as the log does')
  assert.ok(!JSON.stringify(collector.spans).includes('grace%40example.com'), 'no address reaches the collector')
  assert.ok(collector.spans.some((span) => span.kind === 2 && span.traceId !== traceId), 'a request without traceparent starts a trace of its own')

  const logged = service.stdout.map((line) => JSON.parse(line)).filter((line) => line.trace_id === traceId)
  assert.ok(logged.some((line) => line.msg === 'request completed'), 'the request\'s log line carries its trace id')
})

test('a collector that refuses spans costs no request: one warning, one line once it takes them again, and SIGTERM still exits 0', async (t) => {
  const collector = await startCollector(t)
  collector.state.refusing = true
  const service = await startService(t, {
    DATABASE_URL: 'sqlite::memory:',
    OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
    OTEL_BSP_SCHEDULE_DELAY: '100',
    // A 503 is retried, with backoff, for as long as this allows.
    OTEL_EXPORTER_OTLP_TIMEOUT: '500'
  })
  const lines = () => service.stdout.map((line) => JSON.parse(line)).filter((line) => /^traces /.test(line.msg)).map((line) => line.msg)
  const waitFor = async (count: number) => {
    for (let attempt = 0; attempt < 100 && lines().length < count; attempt++) await sleep(50)
  }

  // Several batches refused, each request answered meanwhile.
  for (let batch = 0; batch < 5; batch++) {
    assert.equal((await rawRequest(service.port, { path: '/users' })).statusCode, 200)
    await sleep(250)
  }
  await waitFor(1)
  assert.deepEqual(lines(), ['traces cannot be sent to the collector: they are dropped until it takes them again'], 'one line for every refused batch')

  collector.state.refusing = false
  assert.equal((await rawRequest(service.port, { path: '/users' })).statusCode, 200)
  await waitFor(2)
  assert.equal(lines()[1], 'traces are sent to the collector again')
  assert.ok(collector.spans.some((span) => span.kind === 2), 'spans arrive again')

  // Spans still waiting at shutdown that the collector refuses are lost; the shutdown is not.
  collector.state.refusing = true
  assert.equal((await rawRequest(service.port, { path: '/users' })).statusCode, 200)
  service.child.kill('SIGTERM')
  assert.deepEqual(await service.exited, { code: 0, signal: null })
})

test('a collector that takes connections and never answers holds the shutdown 2 s at most, and the exit is 0', async (t) => {
  const silent = http.createServer(() => {})
  silent.listen(0, '127.0.0.1')
  await once(silent, 'listening')
  t.after(() => { silent.closeAllConnections(); silent.close() })
  const service = await startService(t, {
    DATABASE_URL: 'sqlite::memory:',
    OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(silent.address() as { port: number }).port}`,
    // Every span still waits to be sent when the shutdown begins.
    OTEL_BSP_SCHEDULE_DELAY: '60000'
  })
  assert.equal((await rawRequest(service.port, { path: '/users' })).statusCode, 200)
  const started = Date.now()
  service.child.kill('SIGTERM')
  assert.deepEqual(await service.exited, { code: 0, signal: null })
  const seconds = (Date.now() - started) / 1000
  assert.ok(seconds > 1.5 && seconds < 4, `exited after ${seconds} s`)
  assert.ok(service.stdout.some((line) => JSON.parse(line).msg === 'the last traces could not be sent to the collector within 2000 ms'))
})
