/** The change feed: the outbox written with each change, `GET /events`, retention, and webhooks, on each database. */
import assert from 'node:assert/strict'
import { createHmac, randomBytes } from 'node:crypto'
import { once } from 'node:events'
import http from 'node:http'
import net from 'node:net'
import { describe, test, type TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { sql } from 'kysely'
import type { FastifyInstance } from 'fastify'
import pg from 'pg'
import { createSigner } from 'fast-jwt'
import { EventFeed } from '../../src/events/feed.js'
import type { UserEvent } from '../../src/events/outbox.js'
import { captureLogs, listeningApp, postJson, testApp, testAppOn, testConfig, testDatabases, waitFor, type Env } from '../helpers.js'

interface Event { id: number, type: string, timestamp: string, data: { userId: number, changed?: string[] } }

const secret = `whsec_${randomBytes(32).toString('base64')}`

/** Reads the stream of `GET /events` from a listening app: the events as they come, and its raw text. */
async function follow (t: TestContext, port: number, headers: Record<string, string> = {}, query = '') {
  const request = http.get({ host: '127.0.0.1', port, path: `/events${query}`, headers })
  const [response] = await once(request, 'response') as [http.IncomingMessage]
  t.after(() => { request.destroy() })
  if (response.statusCode !== 200) {
    let body = ''
    for await (const chunk of response) body += String(chunk)
    return { response, events: [] as Event[], text: () => body }
  }
  const events: Event[] = []
  let text = ''
  response.setEncoding('utf8')
  response.on('data', (chunk: string) => {
    text += chunk
    for (const block of chunk.split('\n\n')) {
      const data = /^data: (.*)$/m.exec(block)?.[1]
      if (data !== undefined) events.push(JSON.parse(data) as Event)
    }
  })
  return { response, events, text: () => text }
}

/** A webhook endpoint that checks each signature as the Standard Webhooks specification says, answering with `answer`. */
async function receiver (t: TestContext, answer: (count: number, id: string) => number = () => 204) {
  const received: Array<{ id: string, event: Event }> = []
  let count = 0
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64')
  const server = http.createServer((request, response) => {
    let body = ''
    request.on('data', (chunk: Buffer) => { body += String(chunk) })
    request.on('end', () => {
      const id = String(request.headers['webhook-id'])
      const timestamp = String(request.headers['webhook-timestamp'])
      const expected = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')
      assert.equal(request.headers['webhook-signature'], `v1,${expected}`, 'signed with the secret')
      assert.ok(Math.abs(Number(timestamp) - Date.now() / 1000) < 60, 'a current timestamp')
      const status = answer(count++, id)
      if (status < 300) received.push({ id, event: JSON.parse(body) as Event })
      response.writeHead(status).end()
    })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.after(() => { server.closeAllConnections(); server.close() })
  return { url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/hooks?token=x`, received, tries: () => count }
}

/**
 * Waits until every stored event has its position. On PostgreSQL that is once every transaction
 * begun before it has ended, on the whole server, which other tests' transactions can delay. Asking
 * for the stream numbers what can be; one asked to follow from past the newest event is refused
 * then, so no stream is left open to count against the client's bound.
 */
async function allSequenced (app: FastifyInstance): Promise<void> {
  const unsequenced = async () => (await app.db.selectFrom('events').select('type').where('position', 'is', null).execute()).length
  const deadline = Date.now() + 5000
  while (await unsequenced() > 0) {
    assert.ok(Date.now() < deadline, 'every event is sequenced within 5 s')
    const refused = await app.inject({ url: '/events', headers: { 'last-event-id': '999999999' } })
    assert.equal(refused.statusCode, 400)
    await sleep(20)
  }
}

async function storedEvents (app: FastifyInstance) {
  return (await app.db.selectFrom('events').selectAll().orderBy('position').execute()).map((row) => ({ ...row, position: Number(row.position) }))
}

for (const database of testDatabases) {
  describe(`the change feed in ${database.name}`, { skip: database.skip }, () => {
    test('each create, change and delete writes one event with its user; a change names the fields it set, never a value', async (t) => {
      const { app, port } = await listeningApp(t, { DATABASE_URL: await database.url(t) })
      await postJson(app, '/users', { name: 'Ada', email: 'ada@example.com' })
      await app.inject({ method: 'PATCH', url: '/users/1', payload: { name: 'Ada L' } })
      await app.inject({ method: 'PATCH', url: '/users/1', payload: { name: 'Ada L', email: 'ada@example.com' } })
      await app.inject({ method: 'PATCH', url: '/users/1', payload: { name: 'Ada', email: 'a@example.org' } })
      await app.inject({ method: 'PATCH', url: '/users/1', payload: {} })
      await app.inject({ method: 'DELETE', url: '/users/1' })
      const stream = await follow(t, port, {}, '?after=0')
      await waitFor(() => stream.events.length === 4, 3000)
      assert.deepEqual(stream.events.map(({ id, type, data }) => [id, type, data]), [
        [1, 'user.created', { userId: 1 }],
        [2, 'user.updated', { userId: 1, changed: ['name'] }],
        [3, 'user.updated', { userId: 1, changed: ['name', 'email'] }],
        [4, 'user.deleted', { userId: 1 }]
      ], 'a change that sets the values the user has writes none')
      const stored = await app.db.selectFrom('events').selectAll().execute()
      assert.equal(stored.length, 4)
      assert.doesNotMatch(JSON.stringify(stored), /Ada|example/, 'no name or address is stored with an event')
    })

    test('a write that fails writes no event', async (t) => {
      const app = await testAppOn(t, database)
      await postJson(app, '/users', { name: 'Ada', email: 'ada@example.com' })
      assert.equal((await app.inject({ method: 'PATCH', url: '/users/1', headers: { 'if-match': '"1.9"' }, payload: { name: 'Grace' } })).statusCode, 412)
      assert.equal((await app.inject({ method: 'DELETE', url: '/users/2' })).statusCode, 404)
      assert.deepEqual((await storedEvents(app)).map((event) => event.type), ['user.created'])
    })

    test('GET /events streams from after=0 as Server-Sent Events, then each change as it is committed', async (t) => {
      const { app, port } = await listeningApp(t, { DATABASE_URL: await database.url(t) })
      await postJson(app, '/users', { name: 'Ada', email: 'ada@example.com' })
      const stream = await follow(t, port, {}, '?after=0')
      assert.equal(stream.response.statusCode, 200)
      assert.match(String(stream.response.headers['content-type']), /^text\/event-stream/)
      assert.equal(stream.response.headers['cache-control'], 'no-store')
      await app.inject({ method: 'PATCH', url: '/users/1', payload: { email: 'ada@example.org' } })
      await app.inject({ method: 'DELETE', url: '/users/1' })
      await waitFor(() => stream.events.length === 3, 3000)
      assert.deepEqual(stream.events.map(({ id, type, data }) => ({ id, type, data })), [
        { id: 1, type: 'user.created', data: { userId: 1 } },
        { id: 2, type: 'user.updated', data: { userId: 1, changed: ['email'] } },
        { id: 3, type: 'user.deleted', data: { userId: 1 } }
      ])
      assert.match(stream.text(), /^retry: 1000\n/)
      assert.match(stream.text(), /\nid: 2\nevent: user.updated\ndata: \{"id":2,/)
      assert.match(stream.events[0]!.timestamp, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
    })

    test('a reader that reconnects with Last-Event-ID gets every event after it, and one without starts at now', async (t) => {
      const { app, port } = await listeningApp(t, { DATABASE_URL: await database.url(t) })
      for (const name of ['Ada', 'Grace', 'Edsger']) await postJson(app, '/users', { name, email: 'x@example.com' })
      await allSequenced(app)
      const resumed = await follow(t, port, { 'last-event-id': '1' }, '?after=0')
      assert.equal(resumed.response.statusCode, 200, `answered ${resumed.response.statusCode}: ${resumed.text()}`)
      const fromNow = await follow(t, port)
      await postJson(app, '/users', { name: 'Barbara', email: 'x@example.com' })
      await waitFor(() => resumed.events.length === 3 && fromNow.events.length === 1, 3000)
      assert.deepEqual(resumed.events.map((event) => event.id), [2, 3, 4], 'Last-Event-ID wins over after')
      assert.deepEqual(fromNow.events.map((event) => event.id), [4])
    })

    test('an id after the newest is 400, a malformed one 400, one whose events are purged 410 naming the oldest kept; after=0 starts at the oldest kept', async (t) => {
      const app = await testAppOn(t, database)
      for (const name of ['Ada', 'Grace', 'Edsger']) await postJson(app, '/users', { name, email: 'x@example.com' })
      await allSequenced(app)
      const after = await app.inject({ url: '/events', headers: { 'last-event-id': '4' } })
      assert.equal(after.statusCode, 400)
      assert.match(after.json().error, /^Event 4 is after the newest event \(3\)/)
      assert.equal((await app.inject({ url: '/events', headers: { 'last-event-id': 'abc' } })).statusCode, 400)
      assert.equal((await app.inject({ url: '/events?after=-1' })).statusCode, 400)
      assert.equal((await app.inject({ url: `/events?after=${Number.MAX_SAFE_INTEGER + 1}` })).json().code, 'validation_failed')
      const current = await app.inject({ url: '/events', headers: { 'last-event-id': '3' }, payloadAsStream: true })
      if (current.statusCode !== 200) {
        let body = ''
        for await (const chunk of current.stream()) body += String(chunk)
        assert.fail(`answered ${current.statusCode}: ${body}`)
      }
      current.stream().destroy()
      await app.db.deleteFrom('events').where('position', '<', 3).execute()
      const gone = await app.inject({ url: '/events', headers: { 'last-event-id': '1' } })
      assert.equal(gone.statusCode, 410)
      assert.match(gone.json().error, /^Events after 1 are purged \(EVENTS_RETENTION\): the oldest kept is 3\./)
      assert.equal(gone.json().code, 'events_purged')
      const head = await app.inject({ method: 'HEAD', url: '/events?after=1' })
      assert.deepEqual([head.statusCode, head.body], [410, ''], 'HEAD answers as GET would, without a body')
      const headFromOldest = await app.inject({ method: 'HEAD', url: '/events?after=0' })
      assert.deepEqual([headFromOldest.statusCode, String(headFromOldest.headers['content-type']), headFromOldest.body], [200, 'text/event-stream; charset=utf-8', ''])
      const fromOldest = await app.inject({ url: '/events?after=0', payloadAsStream: true })
      assert.equal(fromOldest.statusCode, 200, 'after=0 is never purged')
      const [opening] = await once(fromOldest.stream(), 'data') as [Buffer]
      fromOldest.stream().destroy()
      assert.match(String(opening), /: following from 2\n/, 'the next event is the oldest kept')
    })

    test('events past EVENTS_RETENTION are purged every hour from the oldest, up to the first newer one, keeping the newest', async (t) => {
      const databaseUrl = await database.url(t)
      const app = await testApp(t, { DATABASE_URL: databaseUrl })
      for (const name of ['Ada', 'Grace', 'Edsger', 'Barbara']) await postJson(app, '/users', { name, email: 'x@example.com' })
      await allSequenced(app)
      const age = async (db: typeof app.db, positions: number[]) =>
        await db.updateTable('events').set({ created_at: '2026-01-01T00:00:00.000Z' }).where('position', 'in', positions).execute()
      await age(app.db, [1, 2, 4])
      await app.close()
      const logs = captureLogs()
      t.mock.timers.enable({ apis: ['setInterval'] })
      const restarted = await testApp(t, { DATABASE_URL: databaseUrl, LOG_LEVEL: 'info', EVENTS_RETENTION: '1d' }, logs.stream)
      await restarted.ready()
      const purges = () => logs.lines.filter((line) => line.msg === 'purged events past EVENTS_RETENTION').length
      t.mock.timers.tick(60 * 60_000)
      await waitFor(() => purges() === 1, 3000)
      assert.deepEqual((await storedEvents(restarted)).map((event) => Number(event.position)), [3, 4], 'the purge stops at the first event kept')
      assert.equal((await restarted.inject({ url: '/events', headers: { 'last-event-id': '1' } })).statusCode, 410)

      await age(restarted.db, [3])
      t.mock.timers.tick(60 * 60_000)
      t.mock.timers.reset()
      await waitFor(() => purges() === 2, 3000)
      assert.deepEqual((await storedEvents(restarted)).map((event) => Number(event.position)), [4], 'the newest stays, to say where the feed is')
    })

    test('an idle stream sends a heartbeat every EVENTS_HEARTBEAT_MS; closing the service ends it', async (t) => {
      const { app, port } = await listeningApp(t, { DATABASE_URL: await database.url(t), EVENTS_HEARTBEAT_MS: '150' })
      const stream = await follow(t, port)
      await waitFor(() => (stream.text().match(/^: heartbeat$/gm) ?? []).length >= 2, 3000)
      const ended = once(stream.response, 'end')
      const started = performance.now()
      await app.close()
      await ended
      assert.ok(performance.now() - started < 2000, 'shutdown does not wait for the reader')
    })

    test('webhooks: each event, signed, in order, once; a refusal is tried again with the same webhook-id; one never taken is kept as failed', async (t) => {
      const endpoint = await receiver(t, (count) => count === 1 || count === 2 ? 503 : 204)
      const logs = captureLogs()
      const app = await testAppOn(t, database, { WEBHOOK_URLS: endpoint.url, WEBHOOK_SECRET: secret, WEBHOOK_RETRY_BASE_MS: '10', LOG_LEVEL: 'info' }, logs.stream)
      await app.ready()
      for (const name of ['Ada', 'Grace']) await postJson(app, '/users', { name, email: 'x@example.com' })
      await app.inject({ method: 'PATCH', url: '/users/1', payload: { name: 'Ada L' } })
      await waitFor(() => endpoint.received.length === 3, 5000)
      assert.deepEqual(endpoint.received.map(({ id, event }) => [id, event.id, event.type, event.data.userId]), [
        ['evt_1', 1, 'user.created', 1], ['evt_2', 2, 'user.created', 2], ['evt_3', 3, 'user.updated', 1]
      ])
      assert.equal(endpoint.tries(), 5, 'the second event was refused twice, then taken')
      const retried = logs.lines.filter((line) => line.msg === 'webhook event not taken: trying again later')
      assert.deepEqual(retried.map((line) => [line.event, line.attempts, line.endpoint]), [[2, 1, endpoint.url.replace('?token=x', '')], [2, 2, endpoint.url.replace('?token=x', '')]])
      // The endpoint has the last event before the service has its answer, and counts it.
      let metrics = ''
      const delivered = /^webhook_deliveries_total\{outcome="delivered"\} 3$/m
      for (let asked = 0; asked < 100 && !delivered.test(metrics); asked++) metrics = (await app.inject('/metrics')).body
      assert.match(metrics, delivered)
      assert.match(metrics, /^webhook_deliveries_total\{outcome="retried"\} 2$/m)
      assert.match(metrics, /^webhook_failed_events 0$/m)
    })

    test('webhooks: an event the endpoint refuses for all of WEBHOOK_RETRY_FOR is kept as failed, shown in /metrics, and the next one goes', async (t) => {
      const endpoint = await receiver(t, (_count, id) => id === 'evt_1' ? 500 : 204)
      const app = await testAppOn(t, database, { WEBHOOK_URLS: endpoint.url, WEBHOOK_SECRET: secret, WEBHOOK_RETRY_BASE_MS: '400', WEBHOOK_RETRY_FOR: '1s' })
      await app.ready()
      for (const name of ['Ada', 'Grace']) await postJson(app, '/users', { name, email: 'x@example.com' })
      await waitFor(() => endpoint.received.length === 1, 8000)
      assert.deepEqual(endpoint.received.map(({ event }) => event.id), [2])
      const failures = await app.db.selectFrom('webhook_failures').selectAll().execute()
      assert.deepEqual(failures.map(({ url, position, reason }) => [url, Number(position), reason]), [[endpoint.url, 1, 'answered 500']])
      assert.match((await app.inject('/metrics')).body, /^webhook_failed_events 1$/m)
    })
  })
}

test('a reader that takes nothing is disconnected after two heartbeats', async (t) => {
  const logs = captureLogs()
  const { app, port } = await listeningApp(t, { DATABASE_URL: await testDatabases[0]!.url(t), EVENTS_HEARTBEAT_MS: '200', LOG_LEVEL: 'info' }, logs.stream)
  // More events than the loopback's socket buffers hold, so that the stream must wait for the reader.
  await sql`with recursive n(i) as (select 1 union all select i + 1 from n where i < 100000)
    insert into users (name, email) select 'user' || i, 'user' || i || '@example.com' from n`.execute(app.db)
  const socket = net.connect(port, '127.0.0.1')
  await once(socket, 'connect')
  socket.pause()
  socket.write('GET /events?after=0 HTTP/1.1\r\nHost: localhost\r\n\r\n')
  const disconnected = () => logs.lines.some((entry) => entry.msg === 'disconnected an events reader that took nothing for two heartbeats')
  await waitFor(disconnected, 10_000)
  // A paused socket hears the end only once it has read what came before.
  socket.resume()
  await once(socket, 'close')
})

describe('the change feed across instances', { skip: testDatabases[1]!.skip }, () => {
  test('two instances on one PostgreSQL database deliver each event to an endpoint once', async (t) => {
    const endpoint = await receiver(t)
    const url = await testDatabases[1]!.url(t)
    const env: Env = { DATABASE_URL: url, WEBHOOK_URLS: endpoint.url, WEBHOOK_SECRET: secret }
    const [one, two] = [await testApp(t, env), await testApp(t, env)]
    await Promise.all([one.ready(), two.ready()])
    await Promise.all(Array.from({ length: 40 }, async (_, i) => await postJson(i % 2 === 0 ? one : two, '/users', { name: `user${i}`, email: 'x@example.com' })))
    await waitFor(() => endpoint.received.length >= 40, 10_000)
    assert.deepEqual(endpoint.received.map(({ event }) => event.id), Array.from({ length: 40 }, (_, i) => i + 1), 'each once, in order')
  })

  test('positions follow commit order under concurrent writes: a stream never sees a later event before an earlier one', async (t) => {
    const url = await testDatabases[1]!.url(t)
    const { app, port } = await listeningApp(t, { DATABASE_URL: url })
    const other = await testApp(t, { DATABASE_URL: url })
    const stream = await follow(t, port, {}, '?after=0')
    await Promise.all(Array.from({ length: 200 }, async (_, i) => await postJson(i % 2 === 0 ? app : other, '/users', { name: `user${i}`, email: 'x@example.com' })))
    await waitFor(() => stream.events.length === 200, 10_000)
    assert.deepEqual(stream.events.map((event) => event.id), Array.from({ length: 200 }, (_, i) => i + 1))
    const { rows } = await sql<{ gaps: number }>`select count(*)::int as gaps from events where position > 1 and not exists (select 1 from events e where e.position = events.position - 1)`.execute(app.db)
    assert.equal(rows[0]!.gaps, 0)
  })

  test('an event waits for every transaction begun before it: one committed after a later write still comes first', async (t) => {
    const url = await testDatabases[1]!.url(t)
    const { app, port } = await listeningApp(t, { DATABASE_URL: url })
    const stream = await follow(t, port, {}, '?after=0')
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    t.after(async () => { await client.end() })
    await client.query('begin')
    await client.query("insert into users (name, email) values ('early', 'x@example.com')")
    await postJson(app, '/users', { name: 'later', email: 'x@example.com' })
    // Asking for the stream sequences what can be: the later event cannot, while the earlier transaction is open.
    const probe = await app.inject({ url: '/events', payloadAsStream: true })
    probe.stream().destroy()
    const sequenced = await app.db.selectFrom('events').select('position').execute()
    assert.deepEqual(sequenced.map((event) => event.position), [null], 'the later write waits while the earlier transaction may still commit')
    assert.equal(stream.events.length, 0)
    await client.query('commit')
    await waitFor(() => stream.events.length === 2, 3000)
    assert.deepEqual(stream.events.map((event) => [event.id, event.data.userId]), [[1, 1], [2, 2]])
  })
})

describe('the bounds on streams', () => {
  const jwtSecret = 'a-stream-bounds-secret-of-at-least-32-bytes'
  const bearer = (sub: string) => ({ authorization: `Bearer ${createSigner({ key: jwtSecret, expiresIn: 60_000 })({ sub })}` })
  /** Opens a stream over a real connection from `localAddress`: its status, Retry-After and error, and a way to close it. */
  const open = async (t: TestContext, port: number, headers: Record<string, string> = {}, localAddress = '127.0.0.1') => {
    const request = http.get({ host: '127.0.0.1', port, path: '/events', headers, localAddress, agent: false })
    t.after(() => { request.destroy() })
    const [response] = await once(request, 'response') as [http.IncomingMessage]
    let body = ''
    if (response.statusCode !== 200) {
      for await (const chunk of response) body += String(chunk)
    }
    return { status: response.statusCode, retryAfter: response.headers['retry-after'], error: body === '' ? undefined : JSON.parse(body).error as string, close: () => { request.destroy() } }
  }

  test('streams are bounded per token subject and in all; other requests of the same client are not; a closed stream frees its place', async (t) => {
    const { app, port } = await listeningApp(t, { AUTH: 'all', JWT_SECRET: jwtSecret, EVENTS_MAX_READERS: '3', EVENTS_MAX_READERS_PER_CLIENT: '2' })
    const [a1, a2] = [await open(t, port, bearer('a')), await open(t, port, bearer('a'))]
    assert.deepEqual([a1.status, a2.status], [200, 200])
    const a3 = await open(t, port, bearer('a'))
    assert.deepEqual([a3.status, a3.retryAfter, a3.error], [429, '5', 'Too many event streams open for this client: at most 2 (EVENTS_MAX_READERS_PER_CLIENT). Close one, or retry later'])
    assert.equal((await app.inject({ url: '/users', headers: bearer('a') })).statusCode, 200, 'the client\'s other requests are answered')
    assert.equal((await open(t, port, bearer('b'))).status, 200, 'another subject has places of its own')
    const c1 = await open(t, port, bearer('c'))
    assert.deepEqual([c1.status, c1.retryAfter, c1.error], [503, '5', 'Too many event streams are open on this instance (EVENTS_MAX_READERS): retry shortly'])
    a1.close()
    let c2 = await open(t, port, bearer('c'))
    for (let tries = 0; tries < 20 && c2.status !== 200; tries++) c2 = await open(t, port, bearer('c'))
    assert.equal(c2.status, 200, 'a closed stream frees its place')
    assert.equal((await open(t, port, bearer('a'))).status, 503)
  })

  test('without tokens streams are counted by address', async (t) => {
    const { port } = await listeningApp(t, { EVENTS_MAX_READERS_PER_CLIENT: '1' })
    assert.equal((await open(t, port)).status, 200)
    assert.equal((await open(t, port)).status, 429)
    assert.equal((await open(t, port, {}, '127.0.0.2')).status, 200, 'another address')
  })

  test('EVENTS_MAX_READERS is at most half of MAX_CONNECTIONS, and so by default', () => {
    assert.equal(testConfig({ MAX_CONNECTIONS: '100' }).events.maxReaders, 50)
    assert.equal(testConfig({ MAX_CONNECTIONS: '100' }).events.maxReadersPerClient, 8)
    assert.throws(() => testConfig({ MAX_CONNECTIONS: '100', EVENTS_MAX_READERS: '51' }), /^ConfigError: EVENTS_MAX_READERS must be at most half of MAX_CONNECTIONS \(100\), 50/)
  })
})

test('readers who have caught up share one read of each new page, and one page of text, however many they are', async () => {
  let reads = 0
  let stored: UserEvent[] = []
  const feed = new EventFeed(async () => stored.at(-1)?.id ?? 0, async (position) => {
    reads++
    return stored.filter((event) => event.id > position).slice(0, 100)
  })
  const event = (id: number): UserEvent => ({ id, type: 'user.created', timestamp: new Date(0).toISOString(), data: { userId: id } })
  assert.deepEqual(await Promise.all(Array.from({ length: 500 }, () => feed.pageAfter(0))), Array(500).fill(undefined))
  stored = [event(1), event(2), event(3)]
  await feed.newest()
  reads = 0
  const pages = await Promise.all(Array.from({ length: 500 }, () => feed.pageAfter(0)))
  assert.equal(reads, 1, 'one read for all 500')
  assert.ok(pages.every((page) => page === pages[0]), 'one page for all 500')
  assert.equal(pages[0]!.last, 3)
  assert.match(String(pages[0]!.bytes), /^id: 1\nevent: user.created\ndata: \{"id":1,.*\n\nid: 2\n.*\n\nid: 3\n/s)
  stored.push(event(4))
  await feed.newest()
  const later = await Promise.all(Array.from({ length: 500 }, (_, i) => feed.pageAfter(i % 2 === 0 ? 3 : 1)))
  assert.equal(reads, 2, 'readers a page behind are served from what is kept')
  assert.deepEqual([later[0]!.last, later[1]!.last], [4, 3], 'one a page behind gets what was kept as it asked')
  assert.equal((await feed.pageAfter(3))!.last, 4)
  assert.equal(reads, 2)
  feed.close()
})

describe('tickets, for a browser\'s EventSource', () => {
  const jwtSecret = 'a-ticket-test-secret-of-at-least-32-bytes'
  const bearer = (claims: Record<string, unknown>) => ({ authorization: `Bearer ${createSigner({ key: jwtSecret, expiresIn: 900_000 })(claims)}` })
  // Minted as the file loads, so valid for as long as its tests may take on a busy machine.
  const follower = bearer({ sub: 'web-app', scope: 'events:read' })
  /** GET `path` over a real connection: its status and error; a stream is closed once its answer has begun. */
  const get = async (t: TestContext, port: number, path: string, headers: Record<string, string> = {}) => {
    const request = http.get({ host: '127.0.0.1', port, path, headers, agent: false })
    t.after(() => { request.destroy() })
    const [response] = await once(request, 'response') as [http.IncomingMessage]
    if (response.statusCode === 200 && path.startsWith('/events')) {
      request.destroy()
      return { status: 200, error: undefined }
    }
    let body = ''
    for await (const chunk of response) body += String(chunk)
    return { status: response.statusCode, error: JSON.parse(body).error as string | undefined }
  }
  const ticketFor = async (app: FastifyInstance, headers: Record<string, string>) => await app.inject({ method: 'POST', url: '/events/tickets', headers })

  test('a ticket from POST /events/tickets opens one stream in place of a token, once; another, or one on another route, is a 401', async (t) => {
    const { app, port } = await listeningApp(t, { AUTH: 'all', JWT_SECRET: jwtSecret })
    assert.equal((await ticketFor(app, {})).statusCode, 401, 'a ticket needs a token')
    const issued = await ticketFor(app, follower)
    assert.equal(issued.statusCode, 201)
    const { ticket, expires_in: expiresIn } = issued.json()
    assert.match(ticket, /^[A-Za-z0-9_-]{43}$/)
    assert.equal(expiresIn, 30)
    assert.equal((await get(t, port, '/events')).status, 401, 'no token, no ticket')
    assert.equal((await get(t, port, `/users?ticket=${ticket}`)).status, 401, 'a ticket opens the feed alone')
    assert.equal((await get(t, port, `/events?ticket=${ticket}&after=0`)).status, 200)
    const spent = await get(t, port, `/events?ticket=${ticket}`)
    assert.deepEqual(spent, { status: 401, error: 'Ticket is unknown, used or expired: ask for a new one (POST /events/tickets)' })
    assert.equal((await get(t, port, '/events?ticket=made-up')).status, 401)
    const stored = await app.db.selectFrom('event_tickets').selectAll().execute()
    assert.ok(stored.every((row) => row.ticket_hash !== ticket), 'a ticket is kept only as its hash')
  })

  test('an expired ticket is a 401; a ticket counts against its token\'s bound on streams', async (t) => {
    const { app, port } = await listeningApp(t, { AUTH: 'all', JWT_SECRET: jwtSecret, EVENTS_MAX_READERS_PER_CLIENT: '1' })
    const expired = (await ticketFor(app, follower)).json().ticket
    await app.db.updateTable('event_tickets').set({ expires_at: new Date(Date.now() - 1000).toISOString() }).execute()
    assert.equal((await get(t, port, `/events?ticket=${expired}`)).status, 401)
    const request = http.get({ host: '127.0.0.1', port, path: '/events', headers: follower, agent: false })
    t.after(() => { request.destroy() })
    assert.equal((await once(request, 'response') as [http.IncomingMessage])[0].statusCode, 200)
    const second = (await ticketFor(app, follower)).json().ticket
    assert.equal((await get(t, port, `/events?ticket=${second}`)).status, 429, 'the same subject, by ticket')
  })

  test('AUTH=writes with AUTH_SCOPES=on asks readers of the feed for events:read, by token or ticket; without scopes the feed is public', async (t) => {
    const { app, port } = await listeningApp(t, { AUTH: 'writes', AUTH_SCOPES: 'on', JWT_SECRET: jwtSecret })
    assert.equal((await get(t, port, '/events')).status, 401)
    assert.equal((await get(t, port, '/events', bearer({ sub: 'w', scope: 'users:write' }))).status, 403)
    assert.equal((await get(t, port, '/events', follower)).status, 200)
    assert.equal((await ticketFor(app, bearer({ sub: 'w', scope: 'users:write' }))).statusCode, 403, 'no ticket without events:read')
    assert.equal((await get(t, port, `/events?ticket=${(await ticketFor(app, follower)).json().ticket}`)).status, 200)
    const document = (await app.inject('/documentation/json')).json()
    assert.deepEqual(document.paths['/events'].get.security, [{ bearerAuth: ['events:read'] }])
    const open = await listeningApp(t, { AUTH: 'writes', JWT_SECRET: jwtSecret })
    assert.equal((await get(t, open.port, '/events')).status, 200)
  })
})
