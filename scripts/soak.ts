/**
 * `npm run soak -- --duration 60 [--connections 64] [--database-url postgres://…]`
 *
 * Runs the built service as a real process and drives mixed reads and writes at it over
 * keep-alive connections for the given time. It then prints requests and errors by status,
 * the 201s acknowledged against the rows the database gained (they must be equal), and the
 * service's RSS after warm-up, at the middle and at the end. RSS may not grow more than
 * RSS_GROWTH_BOUND after warm-up, in runs of at least RSS_JUDGED_FROM_MS: a shorter run ends
 * while the service is still warming up (caches, JIT, heap), so its growth says nothing of a
 * leak. Exits 1 if a check fails.
 *
 * Before each RSS sample the service runs a full garbage collection. V8 collects its old
 * space lazily: on a fast machine the first full collection came after about 105 s of this
 * load, so a 60 s run measured garbage not yet collected and could fail without a leak.
 * Garbage collection frees only what nothing holds, so a leak still shows.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import http from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { parseArgs } from 'node:util'
import { SERVER_BUNDLE } from './build.js'

const RSS_GROWTH_BOUND = 0.25
const RSS_JUDGED_FROM_MS = 30_000

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '60' },
    connections: { type: 'string', default: '64' },
    'database-url': { type: 'string' }
  }
})
const durationMs = Number(values.duration) * 1000
const connections = Number(values.connections)
if (!(durationMs > 0) || !(connections > 0)) {
  process.stderr.write('usage: npm run soak -- --duration <seconds> [--connections <n>] [--database-url <url>]\n')
  process.exit(1)
}

const folder = mkdtempSync(join(tmpdir(), 'soak-'))
const databaseUrl = values['database-url'] ?? `sqlite:${join(folder, 'soak.db')}`
const port = 3900 + Math.floor(Math.random() * 90)

// Loaded into the soaked service only, beside the bundle as shipped: a full collection when
// asked over the IPC channel, which is unref'd so that it never holds the service open. The
// SQLite worker thread loads it too, and has no channel.
const COLLECT_WHEN_ASKED = 'data:text/javascript,' +
  'if (process.channel) { process.on("message", () => { globalThis.gc(); process.send("collected") }); process.channel.unref() }'

const service = spawn(process.execPath, ['--expose-gc', '--import', COLLECT_WHEN_ASKED, SERVER_BUNDLE], {
  env: { ...process.env, NODE_ENV: 'production', JWT_SECRET: 'soak-'.padEnd(40, 'x'), LOG_LEVEL: 'warn', HOST: '127.0.0.1', PORT: String(port), DATABASE_URL: databaseUrl },
  stdio: ['ignore', 'ignore', 'inherit', 'ipc']
})
const agent = new http.Agent({ keepAlive: true, maxSockets: connections })

function send (method: string, path: string, body?: string): Promise<{ status: number, headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const request = http.request({ agent, host: '127.0.0.1', port, method, path, headers: body === undefined ? {} : { 'content-type': 'application/json' } }, (response) => {
      response.resume()
      response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers }))
    })
    request.on('error', reject)
    request.end(body)
  })
}

async function rssAfterCollection (): Promise<number> {
  const collected = once(service, 'message')
  service.send('collect')
  await collected
  const line = readFileSync(`/proc/${service.pid}/status`, 'utf8').split('\n').find((entry) => entry.startsWith('VmRSS:'))
  return Number(line?.split(/\s+/)[1]) * 1024
}

async function storedUsers (): Promise<number> {
  return Number((await send('GET', '/users?limit=1')).headers['x-total-count'])
}

const mixes: Array<[number, () => [string, string, string?]]> = [
  [35, () => ['GET', '/users?limit=10&offset=' + Math.floor(Math.random() * 50)]],
  [20, () => ['GET', `/users/${1 + Math.floor(Math.random() * 500)}`]],
  [25, () => ['POST', '/users', JSON.stringify({ name: 'soak', email: 'soak@example.com' })]],
  [5, () => ['GET', '/custom?name=soak&age=3']],
  [5, () => ['POST', '/users/507f1f77bcf86cd799439011?limit=5', JSON.stringify({ name: 'soak', email: 'soak@example.com', age: 3 })]],
  [5, () => ['POST', '/users/507f1f77bcf86cd799439011', JSON.stringify({ name: 'soak', email: 'not-an-email' })]],
  [5, () => ['GET', '/']]
]
function pick (): [string, string, string?] {
  let roll = Math.random() * 100
  for (const [weight, make] of mixes) {
    roll -= weight
    if (roll < 0) return make()
  }
  return mixes[0]![1]()
}

const statuses = new Map<string, number>()
let requests = 0
let acknowledged = 0

try {
  for (let attempt = 0; ; attempt++) {
    try {
      if ((await send('GET', '/health')).status === 200) break
    } catch {}
    if (attempt > 100) throw new Error('the service did not start')
    await sleep(100)
  }
  const usersBefore = await storedUsers()
  const started = Date.now()
  const rss: Array<[string, number]> = []
  const samples = [['after warm-up', 0.1], ['middle', 0.5], ['end', 0.99]] as const
  const sampling = samples.map(async ([label, at]) => {
    await sleep(durationMs * at)
    rss.push([label, await rssAfterCollection()])
  })

  await Promise.all(Array.from({ length: connections }, async () => {
    while (Date.now() - started < durationMs) {
      const [method, path, body] = pick()
      let key
      try {
        const { status } = await send(method, path, body)
        key = String(status)
        if (status === 201) acknowledged++
      } catch (error) {
        key = (error as NodeJS.ErrnoException).code ?? 'network error'
      }
      requests++
      statuses.set(key, (statuses.get(key) ?? 0) + 1)
    }
  }))
  await Promise.all(sampling)
  const seconds = (Date.now() - started) / 1000
  const stored = (await storedUsers()) - usersBefore

  const megabytes = (bytes: number) => `${(bytes / 1048576).toFixed(1)} MB`
  const baseline = rss[0]![1]
  const growth = (rss[rss.length - 1]![1] - baseline) / baseline
  const judged = durationMs >= RSS_JUDGED_FROM_MS
  const verdict = !judged ? `not judged in a run under ${RSS_JUDGED_FROM_MS / 1000} s` : growth <= RSS_GROWTH_BOUND ? 'within' : 'EXCEEDED'
  const lines = [
    `database:     ${databaseUrl.startsWith('sqlite:') ? 'SQLite (temporary file)' : 'PostgreSQL'}`,
    `duration:     ${seconds.toFixed(1)} s, ${connections} connections, node ${process.version}`,
    `requests:     ${requests} (${Math.round(requests / seconds)}/s)`,
    `by status:    ${[...statuses].sort().map(([status, count]) => `${status}: ${count}`).join(', ')}`,
    `201s / rows:  ${acknowledged} acknowledged, ${stored} stored: ${acknowledged === stored ? 'equal' : 'MISMATCH'}`,
    `RSS:          ${rss.map(([label, bytes]) => `${label} ${megabytes(bytes)}`).join(', ')}`,
    `RSS growth:   ${(growth * 100).toFixed(1)}% after warm-up (bound ${RSS_GROWTH_BOUND * 100}%): ${verdict}`
  ]
  process.stdout.write(lines.join('\n') + '\n')
  const serverErrors = [...statuses].filter(([status]) => !/^[1-4]\d\d$/.test(status))
  if (acknowledged !== stored || (judged && growth > RSS_GROWTH_BOUND) || serverErrors.length > 0) process.exitCode = 1
} finally {
  agent.destroy()
  service.kill('SIGTERM')
  await once(service, 'exit')
  rmSync(folder, { recursive: true, force: true })
}
