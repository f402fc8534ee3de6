/**
 * `npm run bench [-- --duration 5 --rounds 3 --warmup 6 --users 1000 --big 1000000]`
 *
 * Measures the built service, as shipped (NODE_ENV=production, every default feature on,
 * LOG_LEVEL=warn), beside yardsticks on the same routes and the same 1,000 users: the bare
 * node:http baseline (bench/baseline.ts), plain Fastify (bench/fastify.ts), plain Fastify
 * answering with the headers the service must send (`bench/fastify.ts <port> headers`, the limit
 * for the routes without storage), plain Fastify with SQLite written the simple way
 * (bench/fastify-sqlite.ts, the limit for the same work on storage), and what a user would build
 * with Fastify's plugins for the same features (bench/fastify-plugins.ts). Each server runs
 * pinned to core 0 and wrk to core 1. Every round measures each server in turn on one
 * workload, so that a ratio compares figures taken in the same minute, and each round is a new
 * process of each server; the ratios reported are medians of the rounds' ratios. Six parts:
 *
 * 1. Start-up over five starts of each server: the first 200 on /health after process start,
 *    and idle RSS.
 * 2. Every workload at 50 connections: requests/s, p50 and p99, the service's ratio to its
 *    yardstick and to the baseline; after POST /users, that every 201 was stored.
 * 3. A concurrency sweep: 1 and 256 connections on GET /, GET /users/{id} and POST /users.
 * 4. A table-size sweep: the service on `--users` and on `--big` users (0 skips it), on a
 *    lookup, the first page, a keyset page deep in the table and POST /users.
 * 5. Finding users on `--big` users, on SQLite and, given `--postgres <url>`, on PostgreSQL (in a
 *    schema of its own, dropped after): each order's page after its 10th user beside its page
 *    at its last users, and a search by address for the first user beside one for the last.
 * 6. Writes with events: POST /users on the service as shipped, beside the same build on a
 *    database whose event triggers are dropped, and beside the service with one reader of
 *    /events attached and with 500; on SQLite and, given `--postgres <url>`, on PostgreSQL.
 *
 * `--only <texts>` runs the workloads whose names contain one of the comma-separated texts;
 * `--against <git ref>` also builds the service as it was at that commit (a git worktree,
 * `npm ci`) and measures it beside the service in parts 1 and 2. Writes benchmark-run.md and
 * benchmark-run.svg into docs/, or into `--out <folder>`.
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { get, type ClientRequest, type IncomingMessage } from 'node:http'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'
import { parseArgs } from 'node:util'
import Sqlite from 'better-sqlite3'
import { build } from 'esbuild'
import pg from 'pg'
import { NODE_BUNDLE, SERVER_BUNDLE } from '../scripts/build.js'
import { createDatabase } from '../src/storage/database.js'
import { migrateToLatest } from '../src/storage/migrate.js'
import { nextAfter, type Sort } from '../src/users/list-query.js'
import { freePort } from '../test/process.js'
import { median } from './median.js'
import { readWrkOutput, type WrkFigures } from './wrk.js'

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '5' },
    rounds: { type: 'string', default: '3' },
    warmup: { type: 'string', default: '6' },
    users: { type: 'string', default: '1000' },
    big: { type: 'string', default: '1000000' },
    only: { type: 'string' },
    against: { type: 'string' },
    postgres: { type: 'string' },
    out: { type: 'string' }
  }
})
const duration = Number(values.duration)
const rounds = Number(values.rounds)
const warmup = Number(values.warmup)
const users = Number(values.users)
const bigUsers = Number(values.big)
const CONNECTIONS = 50
const SWEEP_CONNECTIONS = [1, 256]
const P99_TARGET_MS = 5
const TABLE_TARGET = 0.9
const FULL_CORE = 0.85

const root = new URL('..', import.meta.url).pathname
// Made before the run, so that a report's folder cannot fail the run at its end.
const out = values.out ?? join(root, 'docs')
mkdirSync(out, { recursive: true })
if (!existsSync(join(root, SERVER_BUNDLE))) throw new Error('build first: npm run build')
const has = (command: string) => spawnSync('sh', ['-c', `command -v ${command}`]).status === 0
if (!has('wrk')) throw new Error('the benchmark needs wrk: apt-get install wrk')
const pinning = has('taskset') && cpus().length >= 2
const pin = (core: number, command: string[]) => pinning ? ['taskset', '-c', String(core), ...command] : command

const folder = mkdtempSync(join(tmpdir(), 'bench-'))
const user = JSON.stringify({ name: 'Ada', email: 'ada@example.com' })
const hex = '507f1f77bcf86cd799439011'

type YardstickName = 'plain Fastify + headers' | 'plain Fastify + SQLite'
interface Workload {
  name: string
  method: 'GET' | 'POST'
  path: string
  body?: string
  expect: number
  /** The plain server that is the limit for the same work, and the least ratio to it. */
  yardstick?: YardstickName
  target?: number
  /** The least ratio to what a user would build with Fastify's plugins. */
  pluginsTarget?: number
  /** The least ratio to the yardstick at one connection, in the concurrency sweep. */
  oneConnectionTarget?: number
}
const allWorkloads: Workload[] = [
  { name: 'GET /', method: 'GET', path: '/', expect: 200, yardstick: 'plain Fastify + headers', target: 0.95, pluginsTarget: 1.5 },
  { name: 'GET /custom', method: 'GET', path: '/custom?name=a&age=3', expect: 200, yardstick: 'plain Fastify + headers', target: 0.95, pluginsTarget: 1.5 },
  { name: 'POST /users/{24hex}', method: 'POST', path: `/users/${hex}?limit=5`, body: JSON.stringify({ name: 'Ada', email: 'ada@example.com', age: 36 }), expect: 200, yardstick: 'plain Fastify + headers', target: 0.9, pluginsTarget: 1.5 },
  { name: 'POST /users/{24hex} invalid', method: 'POST', path: `/users/${hex}`, body: JSON.stringify({ name: 'Ada', email: 'not-an-email' }), expect: 400, yardstick: 'plain Fastify + headers', target: 0.9, pluginsTarget: 1.5 },
  { name: 'GET /users/{id}', method: 'GET', path: '/users/500', expect: 200, yardstick: 'plain Fastify + SQLite', target: 0.9, pluginsTarget: 1.5, oneConnectionTarget: 0.75 },
  { name: 'GET /users?limit=10', method: 'GET', path: '/users?limit=10', expect: 200, yardstick: 'plain Fastify + SQLite', target: 0.9, pluginsTarget: 1.5, oneConnectionTarget: 0.75 },
  { name: 'POST /users', method: 'POST', path: '/users', body: user, expect: 201, yardstick: 'plain Fastify + SQLite', pluginsTarget: 3 },
  { name: 'unknown route (404)', method: 'GET', path: '/no/such/route', expect: 404, yardstick: 'plain Fastify + headers' },
  { name: 'GET /index.html', method: 'GET', path: '/index.html', expect: 200 }
]
const only = values.only?.split(',')
const chosen = (workload: Workload) => only === undefined || only.some((text) => workload.name.includes(text))
const workloads = allWorkloads.filter(chosen)
const workload = (name: string) => allWorkloads.find((candidate) => candidate.name === name)!
const sweepWorkloads = [workload('GET /'), workload('GET /users/{id}'), workload('GET /users?limit=10'), workload('POST /users')].filter(chosen)

/** The table-size sweep's workloads, for a table of `size` users. */
function tableWorkloads (size: number): Workload[] {
  // 10,000 users from the end of the table, or halfway in a small one.
  const deep = size > 20_000 ? size - 10_000 : Math.floor(size / 2)
  const table: Workload[] = [
    { name: 'GET /users/{id}', method: 'GET', path: `/users/${deep}`, expect: 200 },
    { name: 'GET /users?limit=10 (first page)', method: 'GET', path: '/users?limit=10', expect: 200 },
    { name: 'GET /users?limit=10&after= (keyset page, deep)', method: 'GET', path: `/users?limit=10&after=${deep}`, expect: 200 },
    { name: 'POST /users', method: 'POST', path: '/users', body: user, expect: 201 }
  ]
  return table.filter(chosen)
}

interface Sample { rps: number, p50: number, p99: number, cpu: number, unexpected: number }

function cpuSeconds (pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return (Number(fields[11]) + Number(fields[12])) / 100
}
const rssMegabytes = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024

/**
 * A server under test: its process, for its CPU use, and the port it answers on; `restart`
 * replaces the process with a new one of the same command, on the same port and files.
 */
interface Server { name: string, process: ChildProcess, port: number, restart: () => Promise<void> }

/** Answers 201 each server gave, warm-ups included, to check them against the users it stored. */
const created201 = new Map<Server, number>()

async function measure (server: Server, workload: Workload, seconds: number, connections = CONNECTIONS): Promise<Sample> {
  const script = join(folder, 'request.lua')
  writeFileSync(script, [
    `wrk.method = "${workload.method}"`,
    'wrk.headers["Origin"] = "http://bench.example"',
    ...(workload.body === undefined ? [] : ['wrk.headers["Content-Type"] = "application/json"', `wrk.body = '${workload.body}'`]),
    // Counts answers other than the expected status, which wrk only reports as non-2xx. Each
    // thread counts in a Lua state of its own; done() runs in another and asks each thread.
    'local threads = {}',
    'setup = function (thread) table.insert(threads, thread) end',
    'unexpected = 0',
    `response = function (status) if status ~= ${workload.expect} then unexpected = unexpected + 1 end end`,
    'done = function ()',
    '  local total = 0',
    '  for _, thread in ipairs(threads) do total = total + thread:get("unexpected") end',
    '  io.write("unexpected: " .. total .. "\\n")',
    'end'
  ].join('\n'))
  const before = cpuSeconds(server.process.pid!)
  const started = performance.now()
  const [command, ...args] = pin(1, ['wrk', '-t1', `-c${connections}`, `-d${seconds}s`, '--latency', '-s', script, `http://127.0.0.1:${server.port}${workload.path}`])
  const output = execFileSync(command!, args, { encoding: 'utf8' })
  let figures: WrkFigures
  try {
    figures = readWrkOutput(output)
  } catch (error) {
    throw new Error(`${server.name}, ${workload.name}, ${connections} connections: ${(error as Error).message}:\n${output}`)
  }
  const { requests, rps, p50, p99, unexpected } = figures
  if (workload.expect === 201) created201.set(server, (created201.get(server) ?? 0) + requests - unexpected)
  return { rps, p50, p99, cpu: (cpuSeconds(server.process.pid!) - before) / ((performance.now() - started) / 1000), unexpected }
}

/**
 * Measures the servers in turn, round after round, each round a new process warmed up on the
 * workload: two processes of one build can differ by more than the changes measured, and the
 * warm-up outlasts a new process's first seconds.
 */
async function compare (servers: Array<{ server: Server, workload: Workload }>, connections = CONNECTIONS): Promise<Sample[][]> {
  const samples = servers.map((): Sample[] => [])
  for (let round = 0; round < rounds; round++) {
    for (const [index, { server, workload }] of servers.entries()) {
      await server.restart()
      if (warmup > 0) await measure(server, workload, warmup, connections)
      samples[index]!.push(await measure(server, workload, duration, connections))
    }
  }
  return samples
}

async function waitFor200 (port: number): Promise<void> {
  for (;;) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/health`)).status === 200) return
    } catch {}
    await sleep(5)
  }
}

const children = new Set<ChildProcess>()
// Whatever happens, no server outlives the run to hold its port and core.
process.on('exit', () => { for (const child of children) child.kill('SIGKILL') })

async function spawnServer (command: string[], port: number, env: Record<string, string>): Promise<ChildProcess> {
  const child = spawn(command[0]!, command.slice(1), { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'inherit'] })
  children.add(child)
  child.on('exit', () => children.delete(child))
  await waitFor200(port)
  return child
}

async function stop (server: Server): Promise<void> {
  server.process.kill('SIGTERM')
  await once(server.process, 'exit')
}

async function startServer (name: string, command: string[], port: number, env: Record<string, string> = {}): Promise<Server & { startupMs: number }> {
  const launched = performance.now()
  const server = {
    name,
    process: await spawnServer(command, port, env),
    port,
    startupMs: performance.now() - launched,
    restart: async () => {
      await stop(server)
      server.process = await spawnServer(command, port, env)
    }
  }
  return server
}

const summarise = (list: Sample[]): Sample => ({
  rps: median(list.map((sample) => sample.rps)),
  p50: median(list.map((sample) => sample.p50)),
  p99: median(list.map((sample) => sample.p99)),
  cpu: median(list.map((sample) => sample.cpu)),
  unexpected: list.reduce((sum, sample) => sum + sample.unexpected, 0)
})
/** The median over rounds of the ratio of two servers' requests/s in the same round. */
const medianRatio = (a: Sample[], b: Sample[]) => median(a.map((sample, round) => sample.rps / b[round]!.rps))
/** "412 (380–455)": the median, then the lowest and highest. */
const spread = (numbers: number[], digits: number) =>
  `${median(numbers).toFixed(digits)} (${Math.min(...numbers).toFixed(digits)}–${Math.max(...numbers).toFixed(digits)})`

/**
 * A database of `size` users, made with the schema and migrations of the source tree at
 * `source`: the service's own, or the one at `--against` (a build refuses a database that a
 * later one has migrated further).
 */
async function seededDatabase (size: number, source = root): Promise<string> {
  const file = join(folder, `seed-${size}${source === root ? '' : '-against'}.db`)
  const module = async <T>(path: string): Promise<T> => await import(pathToFileURL(join(source, path)).href) as T
  const { createDatabase } = await module<typeof import('../src/storage/database.js')>('src/storage/database.ts')
  const { migrateToLatest } = await module<typeof import('../src/storage/migrate.js')>('src/storage/migrate.ts')
  const { db } = await createDatabase({ dialect: 'sqlite', filename: file })
  await migrateToLatest(db, 'sqlite')
  await db.transaction().execute(async (transaction) => {
    for (let first = 1; first <= size; first += 1000) {
      // A millisecond apart, as users stored one at a time are, rather than a statement's thousand at one time.
      const batch = Array.from({ length: Math.min(1000, size - first + 1) }, (_, i) => ({
        name: `user${first + i}`, email: `user${first + i}@example.com`, created_at: new Date(Date.UTC(2026, 0, 1) + first + i).toISOString()
      }))
      await transaction.insertInto('users').values(batch).execute()
    }
  })
  await db.destroy()
  return file
}

/** The service's bundle (or one built at `--against`) as shipped, on a free port, with DATABASE_URL `databaseUrl`. */
async function startBundle (name: string, databaseUrl: (port: number) => string, bundle = join(root, SERVER_BUNDLE), env: Record<string, string> = {}) {
  const port = await freePort()
  return await startServer(name, pin(0, [process.execPath, bundle]), port, {
    NODE_ENV: 'production',
    JWT_SECRET: 'bench-secret-of-thirty-two-bytes-or-more',
    LOG_LEVEL: 'warn',
    HOST: '127.0.0.1',
    PORT: String(port),
    DATABASE_URL: databaseUrl(port),
    ...env
  })
}

/** Starts the service (or its build at `--against`) on a fresh copy of a seeded database. */
async function startService (name: string, seed: string, bundle = join(root, SERVER_BUNDLE), env: Record<string, string> = {}) {
  return await startBundle(name, (port) => {
    const databaseFile = join(folder, `service-${port}.db`)
    copyFileSync(seed, databaseFile)
    return `sqlite:${databaseFile}`
  }, bundle, env)
}

/**
 * The plain servers of bench/, each bundled into one file as the service is (NODE_BUNDLE) and
 * run by `node` alone, so that the two sides load their code the same way: through tsx, a
 * plain server would also load its TypeScript sources one by one and tsx's own loader.
 */
const PLAIN_SERVERS = ['baseline', 'fastify', 'fastify-sqlite', 'fastify-plugins'] as const
const plainBundles = join(root, 'dist/bench')
await build({ ...NODE_BUNDLE, entryPoints: PLAIN_SERVERS.map((name) => join(root, 'bench', `${name}.ts`)), outdir: plainBundles })

/** Starts one of the plain servers, given its port and then `args`. */
async function startPlain (name: string, server: typeof PLAIN_SERVERS[number], ...args: string[]): Promise<Server & { startupMs: number }> {
  const port = await freePort()
  return await startServer(name, pin(0, [process.execPath, join(plainBundles, `${server}.js`), String(port), ...args]), port)
}

/** The service's bundle as built at another commit, for `--against`, and its source tree. */
function buildAt (ref: string): { bundle: string, source: string } {
  const worktree = join(folder, 'against')
  const run = (command: string, args: string[], cwd: string) => execFileSync(command, args, { cwd, stdio: ['ignore', 'ignore', 'inherit'] })
  run('git', ['worktree', 'add', '--detach', worktree, ref], root)
  // The folder goes with the run's other files; git forgets the worktree once it is gone.
  process.on('exit', () => { spawnSync('git', ['worktree', 'prune'], { cwd: root }) })
  run('npm', ['ci', '--no-audit', '--no-fund'], worktree)
  run('npm', ['run', 'build'], worktree)
  return { bundle: join(worktree, SERVER_BUNDLE), source: worktree }
}

/**
 * How many users a server holds, from its X-Total-Count. On a connection of its own: one kept
 * from minutes before may have been closed by the server since.
 */
async function storedUsers (server: Server): Promise<number> {
  const request = get({ host: '127.0.0.1', port: server.port, path: '/users?limit=1', agent: false })
  const [response] = await once(request, 'response') as [IncomingMessage]
  response.resume()
  return Number(response.headers['x-total-count'])
}

/** The `after` of a page near the start and of one at the last 10 users, in each order part 5 measures. */
type Positions = Record<'name' | '-created_at', { near: string, deep: string }>
const SEARCHES = ['sort=name (after the 10th user, after the 999,990th)', 'sort=-created_at (the same)', 'email= (the first user, the last)'] as const

interface ListedRow { id: number, name: string, created_at: string }

/** The cursors after the 10th user and the 11th from the end of each order, found by `userAt(order by, offset)`. */
async function positions (userAt: (order: string, offset: number) => Promise<ListedRow>): Promise<Positions> {
  const after = async (sort: Sort, order: string) => ({
    near: nextAfter({ sort, filters: {} }, await userAt(order, 9)),
    deep: nextAfter({ sort, filters: {} }, await userAt(order, bigUsers - 11))
  })
  return { name: await after('name', 'name, id'), '-created_at': await after('-created_at', 'created_at desc, id desc') }
}

/** Each search's page near the start and its page at the end: both after a cursor, so that only the depth differs. */
function searchWorkloads (size: number, at: Positions): Array<[Workload, Workload]> {
  const page = (name: string, path: string): Workload => ({ name, method: 'GET', path, expect: 200 })
  const sorted = (sort: 'name' | '-created_at'): [Workload, Workload] => [
    page(`sort=${sort}, near the start`, `/users?limit=10&sort=${sort}&after=${at[sort].near}`),
    page(`sort=${sort}, at the end`, `/users?limit=10&sort=${sort}&after=${at[sort].deep}`)
  ]
  return [
    sorted('name'),
    sorted('-created_at'),
    [page('email=, the first user', '/users?email=user1@example.com'), page('email=, the last user', `/users?email=user${size}@example.com`)]
  ]
}

/** A schema of its own on PostgreSQL at `url`, migrated; a client working in it; the URL that points the service at it. */
async function postgresSchema (url: string, schema: string) {
  const admin = new pg.Client({ connectionString: url })
  await admin.connect()
  await admin.query(`drop schema if exists ${schema} cascade; create schema ${schema}`)
  const serviceUrl = `${url}${url.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`
  const { db } = await createDatabase({ dialect: 'postgres', connectionString: serviceUrl, poolSize: 1 })
  await migrateToLatest(db, 'postgres')
  await db.destroy()
  await admin.query(`set search_path = ${schema}`)
  return {
    admin,
    serviceUrl,
    drop: async () => {
      await admin.query(`drop schema ${schema} cascade`)
      await admin.end()
    }
  }
}

/**
 * `size` users in a schema of PostgreSQL's own at `url`, seeded as an operator loads users in bulk
 * (docs/api.md): in one transaction with the count's trigger off, then counted, vacuumed and
 * analysed; and the service on them.
 */
async function seededPostgres (url: string, size: number) {
  const { admin, serviceUrl, drop } = await postgresSchema(url, 'bench_find_users')
  await admin.query(`begin; alter table users disable trigger count_users;
    insert into users (name, email, created_at) select 'user' || i, 'user' || i || '@example.com',
      to_char(timestamp '2026-01-01' + i * interval '1 millisecond', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') from generate_series(1, ${size}) as i;
    alter table users enable trigger count_users;
    update user_counts set total = (select count(*) from users where users.id % 16 = user_counts.shard); commit`)
  await admin.query('vacuum analyze users, user_counts')
  const at = await positions(async (order, offset) =>
    (await admin.query<ListedRow>(`select id, name, created_at from users order by ${order} limit 1 offset ${offset}`)).rows[0]!)
  return { name: 'PostgreSQL', server: await startBundle('PostgreSQL', () => serviceUrl), at, close: drop }
}

/** A copy of the seeded SQLite database with the outbox's triggers (migration 2026-12-02-user-events) dropped: writes without events. */
function withoutEventsSqlite (seed: string): string {
  const file = join(folder, 'seed-without-events.db')
  copyFileSync(seed, file)
  const database = new Sqlite(file)
  for (const trigger of ['user_created_event', 'user_updated_event', 'user_deleted_event']) database.exec(`drop trigger ${trigger}`)
  database.close()
  return file
}

/** What each reader of /events costs its server in memory, from the RSS before and after they attach. */
interface Readers { close: () => void, kilobytesEach: () => number }

/**
 * Gives `server` `count` readers of /events from each start of its process on, which read every
 * event as it comes; `close` ends them.
 */
function withEventsReaders (server: Server, count = 1): Server & Readers {
  let readers: ClientRequest[] = []
  let kilobytesEach = Number.NaN
  const attach = async () => {
    const before = rssMegabytes(server.process.pid!)
    readers = await Promise.all(Array.from({ length: count }, async () => {
      const reader = get({ host: '127.0.0.1', port: server.port, path: '/events', headers: { accept: 'text/event-stream' }, agent: false })
      reader.on('error', () => {})
      const [response] = await once(reader, 'response') as [IncomingMessage]
      if (response.statusCode !== 200) throw new Error(`GET /events answered ${response.statusCode}`)
      response.resume()
      return reader
    }))
    await sleep(500)
    kilobytesEach = (rssMegabytes(server.process.pid!) - before) * 1024 / count
  }
  const restart = server.restart
  server.restart = async () => {
    for (const reader of readers) reader.destroy()
    await restart()
    await attach()
  }
  return Object.assign(server, { close: () => { for (const reader of readers) reader.destroy() }, kilobytesEach: () => kilobytesEach })
}

const lines: string[] = []
const write = (...text: string[]) => {
  lines.push(...text)
  for (const line of text) process.stderr.write(line + '\n')
}
const cores = (sample: Sample) => `${sample.cpu.toFixed(2)}${sample.cpu < FULL_CORE ? ' ⚠' : ''}`
const latency = (sample: Sample) => `${sample.p50.toFixed(2)} / ${sample.p99.toFixed(2)}`
const mark = (ratio: number, target: number | undefined) => `${ratio.toFixed(2)}×${target === undefined ? '' : ratio >= target ? ' ✓' : ' ✗'}`
/** A target beside its ratio: " (≥ 0.9×)", or nothing for a ratio without one. */
const goal = (target: number | undefined) => target === undefined ? '' : ` (≥ ${target}×)`
/** A ratio to a server that gave other answers than the workload expects (a route it lacks) compares other work: none is given. */
const versus = (other: Sample, ratio: number, target?: number) => other.unexpected > 0 ? `— (${other.unexpected} other answers)` : mark(ratio, target)

const seed = await seededDatabase(users)
const git = (...args: string[]) => execFileSync('git', args, { cwd: root, encoding: 'utf8' }).trim()
const measured = `commit ${git('rev-parse', '--short', 'HEAD')}${git('status', '--porcelain', '--untracked-files=no') === '' ? '' : ' with uncommitted changes'}`
const againstBuild = values.against === undefined ? undefined : buildAt(values.against)
const againstSeed = againstBuild === undefined ? undefined : await seededDatabase(users, againstBuild.source)

write(
  `Machine: ${cpus().length} × ${cpus()[0]?.model.trim()}, Node ${process.version}, wrk ${/wrk (\S+)/.exec(spawnSync('wrk', ['-v'], { encoding: 'utf8' }).stdout)?.[1] ?? ''}` +
    `${pinning ? ', servers on core 0 and wrk on core 1 (taskset)' : ', not pinned (no taskset)'}.`,
  `Command: \`npm run bench -- --duration ${duration} --rounds ${rounds} --warmup ${warmup} --users ${users} --big ${bigUsers}` +
    `${values.only === undefined ? '' : ` --only ${values.only}`}${values.against === undefined ? '' : ` --against ${values.against}`}\`: ` +
    `${rounds} rounds of ${duration} s per server and workload after ${warmup} s of warm-up; medians; ratios are medians of each round's ratio.`,
  `The service measured: ${measured}${values.against === undefined ? '' : `; against it, ${values.against} (commit ${git('rev-parse', '--short', values.against)})`}.`,
  'The service runs as shipped: NODE_ENV=production, LOG_LEVEL=warn, every default feature on (request ids, security headers, CORS, metrics, overload protection), SQLite with synchronous=FULL.',
  ''
)

// 1. Start-up and idle memory: the service, the build at --against, and the plain servers as
// yardsticks, each started in turn, five times. The plain server with SQLite keeps its file
// (the first start gives it 1,000 users), and part 2 goes on with it.
const STARTS = 5
/** The service's first 200, at most this many times plain Fastify + SQLite's in the same run. */
const STARTUP_TARGET_RATIO = 1.2
const IDLE_RSS_TARGET_MB = 95
const plainDatabase = join(folder, 'plain.db')
const pluginsDatabase = join(folder, 'plugins.db')
const starters = [
  { name: 'the service', judged: true, start: async () => await startService('service', seed) },
  ...(againstBuild === undefined ? [] : [{ name: values.against!, judged: true, start: async () => await startService(values.against!, againstSeed!, againstBuild.bundle) }]),
  { name: 'bare node:http (baseline)', judged: false, start: async () => await startPlain('baseline', 'baseline') },
  { name: 'plain Fastify', judged: false, start: async () => await startPlain('plain Fastify', 'fastify') },
  { name: 'plain Fastify + SQLite', judged: false, start: async () => await startPlain('plain Fastify + SQLite', 'fastify-sqlite', plainDatabase) },
  { name: 'Fastify + plugins', judged: false, start: async () => await startPlain('Fastify + plugins', 'fastify-plugins', pluginsDatabase) }
].map((starter) => ({ ...starter, startupMs: [] as number[], idleRss: [] as number[] }))
for (let index = 0; index < STARTS; index++) {
  for (const starter of starters) {
    const server = await starter.start()
    await sleep(1000)
    starter.startupMs.push(server.startupMs)
    starter.idleRss.push(rssMegabytes(server.process.pid!))
    await stop(server)
  }
}
const within = (figure: number, target: number, judged: boolean) => judged ? (figure <= target ? ' ✓' : ' ✗') : ''
const startupTargetMs = STARTUP_TARGET_RATIO * median(starters.find((starter) => starter.name === 'plain Fastify + SQLite')!.startupMs)
write('## Start-up and memory', '',
  `Each server started ${STARTS} times, in turn: the first 200 on /health after process start, and RSS one second later; the targets are the service's.`, '',
  `| server | first 200 on /health, ms (target ≤ ${STARTUP_TARGET_RATIO}× plain Fastify + SQLite: ${startupTargetMs.toFixed(0)}) | idle RSS, MB (target ≤ ${IDLE_RSS_TARGET_MB}) |`,
  '|---|---:|---:|')
for (const { name, judged, startupMs, idleRss } of starters) {
  write(`| ${name} | ${spread(startupMs, 0)}${within(median(startupMs), startupTargetMs, judged)} | ${spread(idleRss, 1)}${within(median(idleRss), IDLE_RSS_TARGET_MB, judged)} |`)
}
write('')

// 2. Every workload at 50 connections, and 3. the concurrency sweep, against the yardsticks.
const service = await startService('service', seed)
const baseline = await startPlain('baseline', 'baseline')
const yardsticks: Record<YardstickName, Server> = {
  // Plain Fastify answering with the service's headers too: the limit for the routes without storage.
  'plain Fastify + headers': await startPlain('plain Fastify + headers', 'fastify', 'headers'),
  'plain Fastify + SQLite': await startPlain('plain Fastify + SQLite', 'fastify-sqlite', plainDatabase)
}
const plainFastify = await startPlain('plain Fastify', 'fastify')
const plugins = await startPlain('Fastify + plugins', 'fastify-plugins', pluginsDatabase)
const against = againstBuild === undefined ? undefined : await startService(values.against!, againstSeed!, againstBuild.bundle)

interface Row {
  workload: Workload
  service: Sample
  yardstick?: Sample
  baseline: Sample
  toYardstick?: number
  toBaseline: number
  plugins: Sample
  toPlugins: number
  /** The service to plain Fastify without the service's headers, on the routes without storage. */
  toPlainFastify?: number
  stored?: string
}
const rows: Row[] = []
write(`## Every route at ${CONNECTIONS} connections`, '',
  '| workload | service req/s | p50 / p99 ms | CPU | yardstick | yardstick req/s | service ÷ yardstick (target) | Fastify + plugins req/s | ' +
    `service ÷ plugins (target) | service ÷ plain Fastify | baseline req/s | service ÷ baseline |${against === undefined ? '' : ` ${values.against} req/s | service ÷ ${values.against} |`}`,
  `|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|${against === undefined ? '' : '---:|---:|'}`)
for (const workload of workloads) {
  const yardstick = workload.yardstick === undefined ? undefined : yardsticks[workload.yardstick]
  const withoutStorage = workload.yardstick === 'plain Fastify + headers'
  const servers = [service, baseline, plugins, ...(yardstick === undefined ? [] : [yardstick]), ...(withoutStorage ? [plainFastify] : []), ...(against === undefined ? [] : [against])]
  const before = workload.expect === 201 ? await storedUsers(service) : 0
  const samples = await compare(servers.map((server) => ({ server, workload })))
  const [serviceSamples, baselineSamples, pluginsSamples] = samples as [Sample[], Sample[], Sample[]]
  const yardstickSamples = yardstick === undefined ? undefined : samples[3]!
  const againstSamples = against === undefined ? undefined : samples.at(-1)!
  const versusAgainst = againstSamples === undefined ? undefined : { ...summarise(againstSamples), ratio: medianRatio(serviceSamples, againstSamples) }
  const row: Row = {
    workload,
    service: summarise(serviceSamples),
    baseline: summarise(baselineSamples),
    toBaseline: medianRatio(serviceSamples, baselineSamples),
    plugins: summarise(pluginsSamples),
    toPlugins: medianRatio(serviceSamples, pluginsSamples),
    ...(yardstickSamples !== undefined && { yardstick: summarise(yardstickSamples), toYardstick: medianRatio(serviceSamples, yardstickSamples) }),
    ...(withoutStorage && { toPlainFastify: medianRatio(serviceSamples, samples[4]!) })
  }
  if (workload.expect === 201) {
    // Every 201 is a stored user: wrk counts the answers it read, so requests still in
    // flight when it stopped may be stored without being counted, never the other way.
    const [created, stored] = [created201.get(service) ?? 0, await storedUsers(service) - before]
    row.stored = `${created} answers 201 (warm-up included), ${stored} users stored ${stored >= created ? '✓' : '✗'}`
  }
  rows.push(row)
  const unexpected = row.service.unexpected > 0 ? ` (${row.service.unexpected} unexpected answers)` : ''
  write(`| ${workload.name}${unexpected} | ${row.service.rps.toFixed(0)} | ${latency(row.service)}${row.service.p99 <= P99_TARGET_MS ? '' : ' ✗'} | ${cores(row.service)} | ` +
    `${workload.yardstick ?? ''} | ${row.yardstick?.rps.toFixed(0) ?? ''} | ${row.toYardstick === undefined ? '' : versus(row.yardstick!, row.toYardstick, workload.target) + goal(workload.target)} | ` +
    `${row.plugins.rps.toFixed(0)} | ${versus(row.plugins, row.toPlugins, workload.pluginsTarget)}${goal(workload.pluginsTarget)} | ` +
    `${row.toPlainFastify?.toFixed(2).concat('×') ?? ''} | ${row.baseline.rps.toFixed(0)} | ${versus(row.baseline, row.toBaseline)} |` +
    (versusAgainst === undefined ? '' : ` ${versusAgainst.rps.toFixed(0)} | ${versus(versusAgainst, versusAgainst.ratio)} |`))
}
write('', 'Plain Fastify + headers is bench/fastify.ts answering with the headers the service adds to every JSON answer (its security headers, CORS\'s exposed headers, a request id); ' +
  'Fastify + plugins is bench/fastify-plugins.ts: helmet, CORS, a request id, under-pressure, fastify-metrics, etag, pino and SQLite the simple way.',
  `p99 target: ≤ ${P99_TARGET_MS} ms on every route (✗ marks a miss). CPU is the server's, in cores; ⚠ marks a server that used less than ${FULL_CORE} of its core, when wrk, not the server, was the limit.`)
for (const row of rows.filter((row) => row.stored !== undefined)) write('', `${row.workload.name}: ${row.stored}.`)
write('')

write('## Concurrency sweep', '',
  '| workload | connections | service req/s | service p50 / p99 ms | yardstick | yardstick req/s | yardstick p50 / p99 ms | service ÷ yardstick |',
  '|---|---:|---:|---:|---|---:|---:|---:|')
for (const workload of sweepWorkloads) {
  const yardstick = yardsticks[workload.yardstick!]
  for (const connections of [...SWEEP_CONNECTIONS.slice(0, 1), CONNECTIONS, ...SWEEP_CONNECTIONS.slice(1)]) {
    const sweepRow = connections === CONNECTIONS ? rows.find((row) => row.workload === workload) : undefined
    let serviceSample: Sample, yardstickSample: Sample, ratio: number
    if (sweepRow !== undefined) {
      [serviceSample, yardstickSample, ratio] = [sweepRow.service, sweepRow.yardstick!, sweepRow.toYardstick!]
    } else {
      const [serviceSamples, yardstickSamples] = await compare([{ server: service, workload }, { server: yardstick, workload }], connections) as [Sample[], Sample[]]
      ;[serviceSample, yardstickSample, ratio] = [summarise(serviceSamples), summarise(yardstickSamples), medianRatio(serviceSamples, yardstickSamples)]
    }
    const target = connections === 1 ? workload.oneConnectionTarget : undefined
    write(`| ${workload.name} | ${connections} | ${serviceSample.rps.toFixed(0)} | ${latency(serviceSample)} | ${yardstick.name} | ${yardstickSample.rps.toFixed(0)} | ${latency(yardstickSample)} | ` +
      `${mark(ratio, target)}${goal(target)} |`)
  }
}
write('')
const loadedRss = rssMegabytes(service.process.pid!)
for (const server of [service, baseline, ...Object.values(yardsticks), plainFastify, plugins, ...(against === undefined ? [] : [against])]) await stop(server)
write(`The service's RSS at the end of its last round above: ${loadedRss.toFixed(1)} MB.`, '')

// 4. The table-size sweep: the same workloads on a small and a big table, side by side.
const bigSeed = bigUsers > 0 ? await seededDatabase(bigUsers) : undefined
if (bigSeed !== undefined) {
  const small = await startService(`${users} users`, seed)
  const big = await startService(`${bigUsers} users`, bigSeed)
  write(`## Table size: ${users.toLocaleString('en')} and ${bigUsers.toLocaleString('en')} users`, '',
    `A lookup and a keyset page ${bigUsers > 20_000 ? '10,000 users from the end of the table' : 'halfway through the table'}; POST /users last, so that the others see the tables as seeded.`, '',
    `| workload | ${users} users req/s | p50 / p99 ms | ${bigUsers} users req/s | p50 / p99 ms | big ÷ small (target ≥ ${TABLE_TARGET}×) |`,
    '|---|---:|---:|---:|---:|---:|')
  const smallWorkloads = tableWorkloads(users)
  const bigWorkloads = tableWorkloads(bigUsers)
  for (const [index, smallWorkload] of smallWorkloads.entries()) {
    const [smallSamples, bigSamples] = await compare([{ server: small, workload: smallWorkload }, { server: big, workload: bigWorkloads[index]! }]) as [Sample[], Sample[]]
    const [smallSample, bigSample] = [summarise(smallSamples), summarise(bigSamples)]
    write(`| ${smallWorkload.name} | ${smallSample.rps.toFixed(0)} | ${latency(smallSample)} | ${bigSample.rps.toFixed(0)} | ${latency(bigSample)} | ${mark(medianRatio(bigSamples, smallSamples), TABLE_TARGET)} |`)
  }
  write('')
  await stop(small)
  await stop(big)
}
// 5. Finding users: on each database, an order's first page beside its page at the last users.
if (bigSeed !== undefined) {
  const databases: Array<{ name: string, server: Server, at: Positions, close?: () => Promise<void> }> = []
  const seeded = new Sqlite(bigSeed, { readonly: true })
  const at = await positions(async (order, offset) => seeded.prepare<[], ListedRow>(`select id, name, created_at from users order by ${order} limit 1 offset ${offset}`).get()!)
  seeded.close()
  databases.push({ name: 'SQLite', server: await startService(`${bigUsers} users`, bigSeed), at })
  if (values.postgres !== undefined) databases.push(await seededPostgres(values.postgres, bigUsers))
  write(`## Finding users: ${bigUsers.toLocaleString('en')} users`, '',
    'Each order\'s page of 10 after the 10th user beside its page at the last 10 users (both after a cursor, so that only the depth differs), ' +
    'and a search by address for the first user beside one for the last' +
    `${values.postgres === undefined ? ' (on SQLite; `--postgres <url>` adds PostgreSQL)' : ''}.`, '',
    `| workload | ${databases.map(({ name }) => `${name} near req/s | ${name} end req/s | end ÷ near (target ≥ ${TABLE_TARGET}×)`).join(' | ')} |`,
    `|---|${databases.map(() => '---:|---:|---:|').join('')}`)
  for (const [index, name] of SEARCHES.entries()) {
    const cells: string[] = []
    for (const { server, at } of databases) {
      const [first, last] = searchWorkloads(bigUsers, at)[index]!
      const [firstSamples, lastSamples] = await compare([{ server, workload: first }, { server, workload: last }]) as [Sample[], Sample[]]
      cells.push(`${summarise(firstSamples).rps.toFixed(0)} | ${summarise(lastSamples).rps.toFixed(0)} | ${mark(medianRatio(lastSamples, firstSamples), TABLE_TARGET)}`)
    }
    write(`| ${name} | ${cells.join(' | ')} |`)
  }
  write('')
  for (const { server, close } of databases) {
    await stop(server)
    await close?.()
  }
}

// 6. Writes with events: POST /users with the outbox, without it, with a reader of the feed, and with many.
const EVENTS_TARGET = 0.8
const MANY_READERS = 500
/** The bounds on streams raised for the many readers, all from one address. */
const MANY_READERS_ENV = { EVENTS_MAX_READERS: String(MANY_READERS), EVENTS_MAX_READERS_PER_CLIENT: String(MANY_READERS) }
const eventsWorkload = { ...workload('POST /users'), name: 'POST /users with events' }
if (chosen(eventsWorkload)) {
  type Reading = Server & Readers
  const databases: Array<{ name: string, on: Server, off: Server, read: Reading, many: Reading, close?: () => Promise<void> }> = []
  databases.push({
    name: 'SQLite',
    on: await startService('events on', seed),
    off: await startService('events off', withoutEventsSqlite(seed)),
    read: withEventsReaders(await startService('events on, a reader', seed)),
    many: withEventsReaders(await startService(`events on, ${MANY_READERS} readers`, seed, undefined, MANY_READERS_ENV), MANY_READERS)
  })
  if (values.postgres !== undefined) {
    const schemas = await Promise.all(['on', 'off', 'read', 'many'].map(async (kind) => await postgresSchema(values.postgres!, `bench_events_${kind}`)))
    const [on, off, read, many] = schemas as [typeof schemas[0], typeof schemas[0], typeof schemas[0], typeof schemas[0]]
    await off.admin.query('drop trigger user_events on users')
    databases.push({
      name: 'PostgreSQL',
      on: await startBundle('events on', () => on.serviceUrl),
      off: await startBundle('events off', () => off.serviceUrl),
      read: withEventsReaders(await startBundle('events on, a reader', () => read.serviceUrl)),
      many: withEventsReaders(await startBundle(`events on, ${MANY_READERS} readers`, () => many.serviceUrl, undefined, MANY_READERS_ENV), MANY_READERS),
      close: async () => { for (const schema of schemas) await schema.drop() }
    })
  }
  write('## Writes with events', '',
    'POST /users on the service as shipped (events on), on the same build with the outbox\'s triggers dropped from its database (events off), ' +
    `as shipped with a reader of /events attached, and with ${MANY_READERS} (the bounds on streams raised for them)` +
    `${values.postgres === undefined ? ' (on SQLite; `--postgres <url>` adds PostgreSQL)' : ''}. Memory per reader is the RSS its readers added, over their number.`, '',
    `| database | events off req/s | events on req/s | on ÷ off (target ≥ ${EVENTS_TARGET}×) | a reader req/s | a reader ÷ off (target ≥ ${EVENTS_TARGET}×) | ` +
    `${MANY_READERS} readers req/s | ${MANY_READERS} readers ÷ on (target ≥ ${EVENTS_TARGET}×) | memory per reader, KB |`,
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|')
  for (const { name, on, off, read, many, close } of databases) {
    const [offSamples, onSamples, readSamples, manySamples] = await compare([off, on, read, many].map((server) => ({ server, workload: eventsWorkload }))) as [Sample[], Sample[], Sample[], Sample[]]
    write(`| ${name} | ${summarise(offSamples).rps.toFixed(0)} | ${summarise(onSamples).rps.toFixed(0)} | ${mark(medianRatio(onSamples, offSamples), EVENTS_TARGET)} | ` +
      `${summarise(readSamples).rps.toFixed(0)} | ${mark(medianRatio(readSamples, offSamples), EVENTS_TARGET)} | ` +
      `${summarise(manySamples).rps.toFixed(0)} | ${mark(medianRatio(manySamples, onSamples), EVENTS_TARGET)} | ${many.kilobytesEach().toFixed(1)} |`)
    read.close()
    many.close()
    for (const server of [on, off, read, many]) await stop(server)
    await close?.()
  }
  write('')
}

rmSync(folder, { recursive: true, force: true })

writeFileSync(join(out, 'benchmark-run.md'), ['# Benchmark run', '', '![Requests/s at 50 connections](benchmark-run.svg)', '', ...lines].join('\n'))
writeFileSync(join(out, 'benchmark-run.svg'), chart(rows))
process.stdout.write(`Wrote benchmark-run.md and benchmark-run.svg into ${out}\n`)

/** Requests/s per workload at 50 connections: the service beside its yardstick and the baseline. */
function chart (rows: Row[]): string {
  const barHeight = 14
  const rowHeight = 4 * barHeight + 14
  const left = 190
  const width = 720
  const top = 40
  const max = Math.max(...rows.flatMap((row) => [row.service.rps, row.baseline.rps, row.plugins.rps, row.yardstick?.rps ?? 0]))
  const scale = (rps: number) => (rps / max) * (width - left - 90)
  const escape = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;')
  const bar = (y: number, rps: number, fill: string, label: string) =>
    `<rect x="${left}" y="${y}" width="${scale(rps).toFixed(1)}" height="${barHeight}" fill="${fill}"/>` +
    `<text x="${left + scale(rps) + 4}" y="${y + 11}">${label}</text>`
  const bars = rows.map((row, index) => {
    const y = top + index * rowHeight
    return `<text x="${left - 8}" y="${y + barHeight + 11}" text-anchor="end">${escape(row.workload.name)}</text>` +
      bar(y, row.service.rps, '#2f6fdf', `${Math.round(row.service.rps)}${row.toYardstick === undefined ? '' : ` (${row.toYardstick.toFixed(2)}×)`}`) +
      (row.yardstick === undefined ? '' : bar(y + barHeight, row.yardstick.rps, row.workload.yardstick === 'plain Fastify + headers' ? '#e0a040' : '#3a9a5a', String(Math.round(row.yardstick.rps)))) +
      bar(y + 2 * barHeight, row.plugins.rps, '#c05050', `${Math.round(row.plugins.rps)}`) +
      bar(y + 3 * barHeight, row.baseline.rps, '#b9b9b9', String(Math.round(row.baseline.rps)))
  })
  const height = top + rows.length * rowHeight + 10
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="11">` +
    '<rect width="100%" height="100%" fill="white"/>' +
    `<text x="10" y="18" font-size="13" font-weight="bold">Requests/s at ${CONNECTIONS} connections (${process.version})</text>` +
    `<rect x="${left}" y="24" width="10" height="10" fill="#2f6fdf"/><text x="${left + 14}" y="33">service</text>` +
    `<rect x="${left + 60}" y="24" width="10" height="10" fill="#e0a040"/><text x="${left + 74}" y="33">plain Fastify + headers</text>` +
    `<rect x="${left + 200}" y="24" width="10" height="10" fill="#3a9a5a"/><text x="${left + 214}" y="33">+ SQLite</text>` +
    `<rect x="${left + 270}" y="24" width="10" height="10" fill="#c05050"/><text x="${left + 284}" y="33">Fastify + plugins</text>` +
    `<rect x="${left + 380}" y="24" width="10" height="10" fill="#b9b9b9"/><text x="${left + 394}" y="33">node:http</text>` +
    bars.join('') + '</svg>\n'
}
