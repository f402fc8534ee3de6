/**
 * Many instances behind a load balancer: HAProxy (Debian's package) in front of three
 * instances on PostgreSQL, checking `/ready`, under a steady mixed load. Restarting the
 * instances one at a time with SIGTERM loses nothing; SIGKILL fails only POSTs sent to the
 * instance before it was gone, and GETs not even those, since the balancer retries them.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import http from 'node:http'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, test, type TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { rawRequest, temporaryFolder, testDatabases } from '../helpers.js'
import { freePort, installed, startService, type RunningService } from '../process.js'

const postgres = testDatabases.find((database) => database.name === 'PostgreSQL')!
const skip = postgres.skip !== false ? postgres.skip : installed('haproxy') ? false : 'haproxy is not installed (CI installs Debian\'s package)'

/** HAProxy in front of the given ports: health checks on /ready every 100 ms, two to change state. */
async function startHaproxy (t: TestContext, backends: number[]): Promise<number> {
  const port = await freePort()
  const file = join(temporaryFolder(t), 'haproxy.cfg')
  writeFileSync(file, [
    'defaults',
    '  mode http',
    '  timeout connect 1s',
    '  timeout client 10s',
    '  timeout server 10s',
    // A connection refused by an instance that has just closed is tried again elsewhere;
    // so is a GET whose instance died before answering (safe: it changes nothing).
    '  retries 3',
    '  option redispatch 1',
    '  retry-on conn-failure empty-response response-timeout',
    // A new connection to the instance for each request, so that a POST reaches a killed
    // instance only if it was sent before the kill: one sent later finds the port closed and
    // is tried elsewhere. (Reusing an idle connection, HAProxy's default, can send a POST
    // down a connection the instance's death has just closed, and that POST fails too.)
    '  option http-server-close',
    'frontend api',
    `  bind 127.0.0.1:${port}`,
    '  default_backend instances',
    'backend instances',
    '  balance roundrobin',
    '  option httpchk GET /ready',
    '  http-check expect status 200',
    // Only what changes nothing is sent again once it may have arrived, as deploy/haproxy.cfg says.
    '  http-request disable-l7-retry unless METH_GET || METH_OPTIONS',
    ...backends.map((backend, index) => `  server instance${index} 127.0.0.1:${backend} check inter 100 fall 2 rise 2`)
  ].join('\n') + '\n')
  const haproxy = spawn('haproxy', ['-db', '-f', file], { stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  haproxy.stderr.on('data', (chunk) => { stderr += String(chunk) })
  t.after(() => { haproxy.kill('SIGKILL') })
  for (let attempt = 0; attempt < 100; attempt++) {
    if (haproxy.exitCode !== null) break
    try {
      if ((await fetch(`http://127.0.0.1:${port}/health`)).status === 200) return port
    } catch {}
    await sleep(50)
  }
  throw new Error(`HAProxy did not start: ${stderr}`)
}

interface Outcome { method: 'GET' | 'POST', status: number | 'network error', location?: string, sentAt: number }

/** A request through a keep-alive agent, as a real client pool sends it; a network error is an outcome too. */
async function request (agent: http.Agent, port: number, method: 'GET' | 'POST', path: string, body?: string): Promise<Outcome> {
  const headers: Record<string, string> = body === undefined ? {} : { 'content-type': 'application/json' }
  const sentAt = performance.now()
  return await rawRequest(port, { method, path, headers, body, agent }).then(
    (response) => ({ method, status: response.statusCode, location: response.headers.location as string | undefined, sentAt }),
    () => ({ method, status: 'network error' as const, sentAt }))
}

/** A steady mixed load of creates and reads, from `workers` concurrent clients, until stopped. */
function steadyLoad (port: number, workers: number) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: workers })
  const outcomes: Outcome[] = []
  const state = { running: true }
  let sequence = 0
  const loops = Array.from({ length: workers }, async (_, worker) => {
    while (state.running) {
      const n = sequence++
      const outcome = n % 3 === 0
        ? await request(agent, port, 'GET', '/users?limit=10')
        : n % 3 === 1
          ? await request(agent, port, 'GET', `/users/${1 + (n % 50)}`)
          : await request(agent, port, 'POST', '/users', JSON.stringify({ name: `load${worker}-${n}`, email: `load${n}@example.com` }))
      outcomes.push(outcome)
    }
  })
  return {
    outcomes,
    async stop () {
      state.running = false
      await Promise.all(loops)
      agent.destroy()
    }
  }
}

const failed = (outcome: Outcome) => outcome.status === 'network error' || (outcome.status as number) >= 500 ||
  (outcome.method === 'POST' && outcome.status !== 201)

describe('behind HAProxy, on PostgreSQL', { skip }, () => {
  test('a rolling restart with SIGTERM loses nothing; SIGKILL fails only POSTs sent to that instance before it was gone', async (t) => {
    const env = { DATABASE_URL: await postgres.url(t), SHUTDOWN_DRAIN_MS: '1000' }
    const ports = [await freePort(), await freePort(), await freePort()]
    const start = async (port: number) => await startService(t, { ...env, PORT: String(port) })
    const instances: RunningService[] = []
    for (const port of ports) instances.push(await start(port))
    const balancer = await startHaproxy(t, ports)

    const load = steadyLoad(balancer, 8)
    await sleep(500)
    for (const [index, port] of ports.entries()) {
      instances[index]!.child.kill('SIGTERM')
      assert.deepEqual(await instances[index]!.exited, { code: 0, signal: null })
      instances[index] = await start(port)
      await sleep(600) // two health checks, and some load on the new instance
    }
    await load.stop()
    const created = load.outcomes.filter((outcome) => outcome.status === 201)
    assert.deepEqual(load.outcomes.filter(failed), [], 'no request failed during the rolling restart')
    assert.ok(created.length > 50, `${created.length} users created during the restart`)
    for (const { location } of created) {
      assert.equal((await request(new http.Agent(), balancer, 'GET', location!)).status, 200, `${location} is stored`)
    }
    t.diagnostic(`rolling restart: ${load.outcomes.length} requests, ${created.length} created, none failed`)

    const crash = steadyLoad(balancer, 8)
    await sleep(500)
    const killedAt = performance.now()
    instances[1]!.child.kill('SIGKILL')
    // Once the process has exited, its port is closed: a request sent from then on is refused
    // a connection and tried elsewhere. Until then, one may still be taken into its backlog.
    await instances[1]!.exited
    const goneAt = performance.now()
    await sleep(1500)
    await crash.stop()
    const crashed = crash.outcomes.filter(failed)
    const described = (outcomes: Outcome[]) => outcomes.map((outcome) => `${outcome.method} ${outcome.status} sent ${(outcome.sentAt - killedAt).toFixed(1)} ms after the kill`).join(', ')
    assert.deepEqual(described(crashed.filter((outcome) => outcome.method === 'GET')), '', 'the balancer retries GETs elsewhere')
    assert.deepEqual(described(crashed.filter((outcome) => outcome.sentAt >= goneAt)), '', `requests sent once the instance had exited, ${(goneAt - killedAt).toFixed(1)} ms after the kill, are served elsewhere`)
    assert.ok(crash.outcomes.some((outcome) => outcome.sentAt >= goneAt && outcome.status === 201), 'creates go on after the kill')
    t.diagnostic(`SIGKILL under load: ${crash.outcomes.length} requests, ${crashed.length} failed (${described(crashed)}); the instance exited ${(goneAt - killedAt).toFixed(1)} ms after the kill`)
  })
})
