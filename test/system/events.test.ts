/** The change feed through a SIGKILL: nothing acknowledged is lost to a webhook endpoint or to a reader that resumes. */
import assert from 'node:assert/strict'
import { createHmac, randomBytes } from 'node:crypto'
import { once } from 'node:events'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { test, type TestContext } from 'node:test'
import { temporaryFolder, waitFor } from '../helpers.js'
import { signalGroup, startService } from '../process.js'

interface Event { id: number, type: string, data: { userId: number } }

const secret = `whsec_${randomBytes(32).toString('base64')}`

/** An endpoint that refuses one call in five, checks each signature, and keeps what it took, in order. */
async function failingReceiver (t: TestContext) {
  const taken: Array<{ webhookId: string, event: Event }> = []
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64')
  let calls = 0
  const server = http.createServer((request, response) => {
    let body = ''
    request.on('data', (chunk: Buffer) => { body += String(chunk) })
    request.on('end', () => {
      const id = String(request.headers['webhook-id'])
      const signature = createHmac('sha256', key).update(`${id}.${String(request.headers['webhook-timestamp'])}.${body}`).digest('base64')
      if (request.headers['webhook-signature'] !== `v1,${signature}` || ++calls % 5 === 0) {
        response.writeHead(500).end()
        return
      }
      taken.push({ webhookId: id, event: JSON.parse(body) as Event })
      response.writeHead(204).end()
    })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.after(() => { server.closeAllConnections(); server.close() })
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`, taken }
}

/** Follows `GET /events` from `after`, keeping every event's id, until the connection ends. */
function follow (port: number, headers: Record<string, string>, path = '/events') {
  const ids: number[] = []
  const request = http.get({ host: '127.0.0.1', port, path, headers })
  request.on('response', (response) => {
    response.setEncoding('utf8')
    let pending = ''
    response.on('data', (chunk: string) => {
      pending += chunk
      const blocks = pending.split('\n\n')
      pending = blocks.pop() ?? ''
      for (const block of blocks) {
        const id = /^id: (\d+)$/m.exec(block)?.[1]
        if (id !== undefined) ids.push(Number(id))
      }
    })
  })
  request.on('error', () => {})
  return { ids, stop: () => request.destroy() }
}

async function send (port: number, method: string, path: string, body: object): Promise<number | undefined> {
  try {
    const response = await fetch(`http://127.0.0.1:${port}${path}`, { method, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
    await response.arrayBuffer()
    return response.status
  } catch {
    return undefined
  }
}

test('kill -9 during a burst of 1,000 writes, with an endpoint that fails one call in five: every acknowledged write\'s event arrives, in order per user, and a resumed reader misses nothing', { timeout: 120_000 }, async (t) => {
  const endpoint = await failingReceiver(t)
  const env = {
    DATABASE_URL: `sqlite:${join(temporaryFolder(t), 'app.db')}`,
    WEBHOOK_URLS: endpoint.url,
    WEBHOOK_SECRET: secret,
    WEBHOOK_RETRY_BASE_MS: '5'
  }
  const first = await startService(t, env)
  const reader = follow(first.port, {}, '/events?after=0')

  // 500 users, each created then renamed: two writes, and so two events, per user.
  const acknowledged: Array<[string, number]> = []
  let killed = false
  await Promise.all(Array.from({ length: 20 }, async (_, client) => {
    for (let i = client; i < 500; i += 20) {
      if (killed) return
      const created = await fetch(`http://127.0.0.1:${first.port}/users`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: `user${i}`, email: 'x@example.com' }) })
        .then(async (response) => { await response.arrayBuffer(); return response.status === 201 ? Number(response.headers.get('location')!.split('/').pop()) : undefined }, () => undefined)
      if (created === undefined) return
      acknowledged.push(['user.created', created])
      if (await send(first.port, 'PATCH', `/users/${created}`, { name: `renamed${i}` }) === 200) acknowledged.push(['user.updated', created])
      if (acknowledged.length >= 600 && !killed) {
        killed = true
        signalGroup(first.child, 'SIGKILL')
      }
    }
  }))
  assert.ok(killed, 'the service was killed during the burst')
  await first.exited
  reader.stop()
  const lastSeen = reader.ids.at(-1) ?? 0

  const second = await startService(t, env)
  const resumed = follow(second.port, { 'last-event-id': String(lastSeen) })
  t.after(() => { resumed.stop() })
  // The lease of the killed process runs out first (20 s); then every event goes.
  const wanted = new Set(acknowledged.map(([type, user]) => `${type} ${user}`))
  const arrived = () => new Set(endpoint.taken.map(({ event }) => `${event.type} ${event.data.userId}`))
  await waitFor(() => [...wanted].every((key) => arrived().has(key)), 60_000, 250)

  const firstArrivals = new Map<string, Event>()
  for (const { webhookId, event } of endpoint.taken) {
    assert.equal(webhookId, `evt_${event.id}`)
    if (!firstArrivals.has(webhookId)) firstArrivals.set(webhookId, event)
  }
  const delivered = [...firstArrivals.values()]
  assert.deepEqual(delivered.map((event) => event.id), delivered.map((event) => event.id).sort((a, b) => a - b), 'in order of the feed, so in order per user')
  const duplicates = endpoint.taken.length - firstArrivals.size
  assert.ok(duplicates <= 1, `at most the event in flight at the kill came twice (${duplicates})`)

  const newest = Math.max(...delivered.map((event) => event.id))
  await waitFor(() => (resumed.ids.at(-1) ?? 0) >= newest, 10_000)
  t.diagnostic(`${acknowledged.length} writes acknowledged before the kill; ${endpoint.taken.length} deliveries taken, ${duplicates} twice; ` +
    `the reader saw ${reader.ids.length} events before the kill and resumed after ${lastSeen}`)
  const seen = [...reader.ids, ...resumed.ids]
  assert.deepEqual(seen.slice(0, newest), Array.from({ length: newest }, (_, i) => i + 1), 'the reader, resumed after the restart, missed nothing')
  assert.ok(seen.every((id, index) => index === 0 || id === seen[index - 1]! + 1), 'and saw nothing twice')
})
