/**
 * `npm run bench [-- --duration 5 --rounds 3 --warmup 2]`
 *
 * Measures the built service against the bare node:http baseline (bench/baseline.ts) on the
 * same workloads, in one run: the service with access logs off (LOG_LEVEL=warn) and on
 * (LOG_LEVEL=info, stdout to /dev/null), the baseline and a plain Fastify server of the same
 * routes (bench/fastify.ts) all run, and each workload goes to each of the four in turn,
 * A B C D A B C D, for `rounds` rounds after a warm-up. Reports median requests/s, p50 and p99
 * latency, the ratios to the baseline and to plain Fastify, and the server's CPU use; a run
 * whose server did not use about one full core is flagged, for then the load generator, not
 * the server, was the limit. Also reports the time from process start to the first 200 on
 * /health and RSS idle and after the load; start-up over five starts. Writes
 * docs/benchmark-run.md and docs/benchmark-run.svg.
 *
 * `--users <n>` stores that many users first (1,000 by default), and `--only <names>` runs the
 * workloads whose names contain one of the comma-separated texts, so that a table-size sweep
 * is two short runs: `--users 1000 --only /users` and `--users 1000000 --only /users`.
 *
 * `--against <git ref>` also builds the service as it was at that commit (in a git worktree,
 * installed with `npm ci`) and measures it in the same rounds at LOG_LEVEL=warn, so that a
 * change is judged by figures taken side by side: before and after, from one run.
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { parseArgs } from 'node:util'
import { createDatabase } from '../src/db/database.js'
import { migrateToLatest } from '../src/db/migrate.js'
import { SERVER_BUNDLE } from '../scripts/build.js'

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '5' },
    rounds: { type: 'string', default: '3' },
    warmup: { type: 'string', default: '2' },
    connections: { type: 'string', default: '50' },
    users: { type: 'string', default: '1000' },
    only: { type: 'string' },
    against: { type: 'string' }
  }
})
const duration = Number(values.duration)
const rounds = Number(values.rounds)
const warmup = Number(values.warmup)
const connections = Number(values.connections)
const users = Number(values.users)
const FULL_CORE = 0.85

const root = new URL('..', import.meta.url).pathname
if (!existsSync(join(root, SERVER_BUNDLE))) throw new Error('build first: npm run build')
const has = (command: string) => spawnSync('sh', ['-c', `command -v ${command}`]).status === 0
const pinning = has('taskset') && cpus().length >= 2
const generator = has('wrk') ? 'wrk' : 'autocannon'
const pin = (core: number, command: string[]) => pinning ? ['taskset', '-c', String(core), ...command] : command

const folder = mkdtempSync(join(tmpdir(), 'bench-'))
const origin = 'http://bench.example'
const user = JSON.stringify({ name: 'Ada', email: 'ada@example.com' })
const hex = '507f1f77bcf86cd799439011'

interface Workload { name: string, method: 'GET' | 'POST', path: string, body?: string, expect: number, target?: number }
// A page and a user deep in the table, 10,000 from its end (or halfway, in a small one).
const deep = users > 20_000 ? users - 10_000 : Math.floor(users / 2)
const allWorkloads: Workload[] = [
  { name: 'GET /', method: 'GET', path: '/', expect: 200, target: 0.85 },
  { name: 'GET /users?limit=10', method: 'GET', path: '/users?limit=10', expect: 200, target: 0.6 },
  { name: 'GET /users/{id}', method: 'GET', path: '/users/500', expect: 200, target: 0.6 },
  { name: 'GET /users/{id} deep', method: 'GET', path: `/users/${deep}`, expect: 200 },
  { name: 'GET /users?after= deep (keyset page)', method: 'GET', path: `/users?limit=10&after=${deep}`, expect: 200 },
  { name: 'GET /custom', method: 'GET', path: '/custom?name=a&age=3', expect: 200, target: 0.85 },
  { name: 'POST /users', method: 'POST', path: '/users', body: user, expect: 201, target: 0.5 },
  { name: 'POST /users/{24hex}', method: 'POST', path: `/users/${hex}?limit=5`, body: JSON.stringify({ name: 'Ada', email: 'ada@example.com', age: 36 }), expect: 200, target: 0.85 },
  { name: 'POST /users/{24hex} invalid', method: 'POST', path: `/users/${hex}`, body: JSON.stringify({ name: 'Ada', email: 'not-an-email' }), expect: 400, target: 0.85 },
  { name: 'GET /index.html', method: 'GET', path: '/index.html', expect: 200 },
  { name: 'unknown route (404)', method: 'GET', path: '/no/such/route', expect: 404 }
]
const only = values.only?.split(',')
const workloads = only === undefined ? allWorkloads : allWorkloads.filter((workload) => only.some((text) => workload.name.includes(text)))

interface Sample { rps: number, p50: number, p99: number, cpu: number, unexpected: number }

function cpuSeconds (pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return (Number(fields[11]) + Number(fields[12])) / 100
}
const rssMegabytes = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024

const MS_PER_UNIT: Record<string, number> = { us: 0.001, ms: 1, s: 1000, m: 60_000 }

/** wrk writes latencies as 812.00us, 1.52ms, 2.01s or 1.10m. */
function toMs (text: string): number {
  const match = /^([\d.]+)(us|ms|s|m)$/.exec(text)
  if (match === null) throw new Error(`unreadable latency from wrk: ${text}`)
  return Number(match[1]) * MS_PER_UNIT[match[2]!]!
}

async function load (port: number, workload: Workload, seconds: number): Promise<Omit<Sample, 'cpu'>> {
  const url = `http://127.0.0.1:${port}${workload.path}`
  if (generator === 'wrk') {
    const script = join(folder, 'request.lua')
    writeFileSync(script, [
      `wrk.method = "${workload.method}"`,
      `wrk.headers["Origin"] = "${origin}"`,
      ...(workload.body === undefined ? [] : ['wrk.headers["Content-Type"] = "application/json"', `wrk.body = '${workload.body}'`]),
      // Counts answers other than the expected status, which wrk only reports as non-2xx.
      'unexpected = 0',
      `response = function (status) if status ~= ${workload.expect} then unexpected = unexpected + 1 end end`,
      'done = function () io.write("unexpected: " .. unexpected .. "\\n") end'
    ].join('\n'))
    const [command, ...args] = pin(1, ['wrk', '-t1', `-c${connections}`, `-d${seconds}s`, '--latency', '-s', script, url])
    const output = execFileSync(command!, args, { encoding: 'utf8' })
    return {
      rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(output)![1]),
      p50: toMs(/^\s+50%\s+(\S+)$/m.exec(output)![1]!),
      p99: toMs(/^\s+99%\s+(\S+)$/m.exec(output)![1]!),
      unexpected: Number(/unexpected: (\d+)/.exec(output)?.[1] ?? 0)
    }
  }
  const { default: autocannon } = await import('autocannon')
  const result = await autocannon({
    url,
    connections,
    duration: seconds,
    method: workload.method,
    headers: { origin, ...(workload.body !== undefined && { 'content-type': 'application/json' }) },
    ...(workload.body !== undefined && { body: workload.body })
  })
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, unexpected: result.non2xx * (workload.expect < 300 ? 1 : 0) }
}

/** A server under test: its process, for its CPU use, and the port it answers on. */
interface Server { process: ChildProcess, port: number }

async function measure ({ process: server, port }: Server, workload: Workload, seconds: number): Promise<Sample> {
  const before = cpuSeconds(server.pid!)
  const started = performance.now()
  const result = await load(port, workload, seconds)
  const cpu = (cpuSeconds(server.pid!) - before) / ((performance.now() - started) / 1000)
  return { ...result, cpu }
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

function start (command: string[], env: Record<string, string>): ChildProcess {
  const child = spawn(command[0]!, command.slice(1), { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'inherit'] })
  children.add(child)
  child.on('exit', () => children.delete(child))
  return child
}

const median = (numbers: number[]) => [...numbers].sort((a, b) => a - b)[Math.floor(numbers.length / 2)]!
/** "412 (380–455)": the median, then the lowest and highest. */
const spread = (numbers: number[], digits: number) =>
  `${median(numbers).toFixed(digits)} (${Math.min(...numbers).toFixed(digits)}–${Math.max(...numbers).toFixed(digits)})`

// A database of 1,000 users, made with the service's own schema; each log level starts
// from its own copy, so rows added by one pass do not slow the next one's counts.
const seedFile = join(folder, 'seed.db')
const { db: seed } = await createDatabase({ dialect: 'sqlite', filename: seedFile })
await migrateToLatest(seed, 'sqlite')
await seed.transaction().execute(async (transaction) => {
  for (let first = 1; first <= users; first += 1000) {
    const batch = Array.from({ length: Math.min(1000, users - first + 1) }, (_, i) => ({ name: `user${first + i}`, email: `user${first + i}@example.com` }))
    await transaction.insertInto('users').values(batch).execute()
  }
})
await seed.destroy()

async function startYardstick (script: string, port: number): Promise<Server> {
  const yardstick = { process: start(pin(0, [process.execPath, '--import', 'tsx', script, String(port)]), {}), port }
  await waitFor200(port)
  return yardstick
}
const baseline = await startYardstick('bench/baseline.ts', 3301)
const plainFastify = await startYardstick('bench/fastify.ts', 3304)

interface Row { workload: Workload, service: Sample, baseline: Sample, fastify: Sample, against?: Sample }
interface LevelResult { level: string, startupMs: number, idleRss: number, loadedRss: number, rows: Row[] }

interface Running extends Server { level: string, startupMs: number, idleRss: number }

/** Starts the service at a log level on its own copy of the seeded database. */
async function startService (level: string, port: number, bundle = join(root, SERVER_BUNDLE), label = level): Promise<Running> {
  const databaseFile = join(folder, `${label}.db`)
  copyFileSync(seedFile, databaseFile)
  const launched = performance.now()
  const service = start(pin(0, [process.execPath, bundle]), {
    NODE_ENV: 'production',
    JWT_SECRET: 'bench-secret-of-thirty-two-bytes-or-more',
    LOG_LEVEL: level,
    HOST: '127.0.0.1',
    PORT: String(port),
    DATABASE_URL: `sqlite:${databaseFile}`
  })
  await waitFor200(port)
  const startupMs = performance.now() - launched
  await sleep(1000)
  const idleRss = rssMegabytes(service.pid!)
  process.stderr.write(`${label}: first 200 after ${startupMs.toFixed(0)} ms, idle RSS ${idleRss.toFixed(1)} MB\n`)
  return { level, process: service, port, startupMs, idleRss }
}

/** The service's bundle as built at another commit, for `--against`. */
function buildAt (ref: string): string {
  const worktree = join(folder, 'against')
  const run = (command: string, args: string[], cwd: string) => execFileSync(command, args, { cwd, stdio: ['ignore', 'ignore', 'inherit'] })
  run('git', ['worktree', 'add', '--detach', worktree, ref], root)
  // The folder goes with the run's other files; git forgets the worktree once it is gone.
  process.on('exit', () => { spawnSync('git', ['worktree', 'prune'], { cwd: root }) })
  run('npm', ['ci', '--no-audit', '--no-fund'], worktree)
  run('npm', ['run', 'build'], worktree)
  return join(worktree, SERVER_BUNDLE)
}
const againstBundle = values.against === undefined ? undefined : buildAt(values.against)

const summarise = (list: Sample[]): Sample => ({
  rps: median(list.map((sample) => sample.rps)),
  p50: median(list.map((sample) => sample.p50)),
  p99: median(list.map((sample) => sample.p99)),
  cpu: median(list.map((sample) => sample.cpu)),
  unexpected: list.reduce((sum, sample) => sum + sample.unexpected, 0)
})

// One start says little on a shared machine, so start-up is measured over several, before
// the load, at the default level of production logging.
const STARTS = 5
const startups: Array<Pick<Running, 'startupMs' | 'idleRss'>> = []
for (let index = 0; index < STARTS; index++) {
  const { process: service, startupMs, idleRss } = await startService('warn', 3302)
  startups.push({ startupMs, idleRss })
  service.kill('SIGTERM')
  await once(service, 'exit')
}

const results: LevelResult[] = []
// Both log levels run side by side with the yardsticks, and every round measures all four in
// turn, so that the ratios (to the yardsticks, and info to warn) come from the same minutes
// even when the machine's speed drifts. Idle servers on the shared core use no CPU.
const services = [await startService('warn', 3302), await startService('info', 3303)]
const rows = services.map((): Row[] => [])
const againstServers = againstBundle === undefined ? [] : [await startService('warn', 3305, againstBundle, values.against)]
const servers = [...services, baseline, plainFastify, ...againstServers]
try {
  for (const workload of workloads) {
    for (const server of servers) await measure(server, workload, warmup)
    const samples = servers.map((): Sample[] => [])
    for (let round = 0; round < rounds; round++) {
      for (const [index, server] of servers.entries()) samples[index]!.push(await measure(server, workload, duration))
    }
    const [baselineSummary, fastifySummary, againstSummary] = samples.slice(services.length).map(summarise)
    for (const [index, service] of services.entries()) {
      const row = { workload, service: summarise(samples[index]!), baseline: baselineSummary!, fastify: fastifySummary!, against: againstSummary }
      rows[index]!.push(row)
      process.stderr.write(`  ${workload.name} at ${service.level}: ${row.service.rps.toFixed(0)} vs ${row.baseline.rps.toFixed(0)} req/s (${(row.service.rps / row.baseline.rps).toFixed(2)}x), ` +
        `plain Fastify ${row.fastify.rps.toFixed(0)} (${(row.service.rps / row.fastify.rps).toFixed(2)}x), p99 ${row.service.p99.toFixed(2)} ms\n`)
    }
  }
  for (const [index, service] of services.entries()) {
    const { level, startupMs, idleRss } = service
    results.push({ level, startupMs, idleRss, loadedRss: rssMegabytes(service.process.pid!), rows: rows[index]! })
    service.process.kill('SIGTERM')
    await once(service.process, 'exit')
  }
} finally {
  for (const yardstick of [baseline, plainFastify, ...againstServers]) yardstick.process.kill('SIGTERM')
  rmSync(folder, { recursive: true, force: true })
}

// The report.
const warn = results.find((result) => result.level === 'warn')!
const flag = (sample: Sample) => sample.cpu < FULL_CORE ? ` ⚠ ${sample.cpu.toFixed(2)} cores` : ''
const lines: string[] = [
  `Machine: ${cpus().length} × ${cpus()[0]?.model.trim()}, Node ${process.version}, load generator ${generator}` +
    `${pinning ? ', server on core 0 and generator on core 1 (taskset)' : ', not pinned (no taskset)'}.`,
  `Command: \`npm run bench -- --duration ${duration} --rounds ${rounds} --warmup ${warmup} --users ${users}${values.only === undefined ? '' : ` --only ${values.only}`}` +
    `${values.against === undefined ? '' : ` --against ${values.against}`}\`; ${connections} connections; medians of ${rounds} rounds; ${users} users stored.`,
  'Plain Fastify is bench/fastify.ts: Fastify 5 with the same routes and schemas, @fastify/cors and @fastify/static, logging off, fixed users and no storage.',
  '',
  `Start-up, over ${STARTS} starts at LOG_LEVEL=warn: first 200 on /health after ${spread(startups.map((start) => start.startupMs), 0)} ms ` +
    `(target ≤ 500); idle RSS ${spread(startups.map((start) => start.idleRss), 1)} MB (target ≤ 80).`,
  ''
]
for (const result of results) {
  lines.push(`### LOG_LEVEL=${result.level}${result.level === 'info' ? ' (access log on, stdout to /dev/null)' : ' (access log off)'}`, '')
  lines.push(`First 200 on /health ${result.startupMs.toFixed(0)} ms after process start; RSS ${result.idleRss.toFixed(1)} MB idle, ${result.loadedRss.toFixed(1)} MB after the load.`, '')
  const againstColumns = values.against === undefined ? '' : ` ${values.against} req/s | ${values.against} p50 / p99 ms | service ÷ ${values.against} |`
  lines.push(result.level === 'warn'
    ? `| workload | service req/s | baseline req/s | ratio | target | service p50 / p99 ms | baseline p50 / p99 ms | service CPU | plain Fastify req/s | service ÷ Fastify |${againstColumns}`
    : '| workload | service req/s | ratio to warn | target | ratio to baseline | service p50 / p99 ms | service CPU |')
  lines.push(result.level === 'warn' ? `|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|${values.against === undefined ? '' : '---:|---:|---:|'}` : '|---|---:|---:|---:|---:|---:|---:|')
  for (const { workload, service, baseline, fastify, against } of result.rows) {
    const unexpected = service.unexpected > 0 ? ` (${service.unexpected} unexpected answers)` : ''
    if (result.level === 'warn') {
      const ratio = service.rps / baseline.rps
      const mark = workload.target === undefined ? '' : ratio >= workload.target ? ' ✓' : ' ✗'
      lines.push(`| ${workload.name}${unexpected} | ${service.rps.toFixed(0)} | ${baseline.rps.toFixed(0)} | ${ratio.toFixed(2)}×${mark} | ${workload.target === undefined ? '' : `≥ ${workload.target}×`} | ${service.p50.toFixed(2)} / ${service.p99.toFixed(2)} | ${baseline.p50.toFixed(2)} / ${baseline.p99.toFixed(2)} | ${service.cpu.toFixed(2)}${flag(service)} | ${fastify.rps.toFixed(0)}${flag(fastify)} | ${(service.rps / fastify.rps).toFixed(2)}× |` +
        (against === undefined ? '' : ` ${against.rps.toFixed(0)}${flag(against)} | ${against.p50.toFixed(2)} / ${against.p99.toFixed(2)} | ${(service.rps / against.rps).toFixed(2)}× |`))
    } else {
      const atWarn = warn.rows.find((row) => row.workload === workload)!.service.rps
      const ratio = service.rps / atWarn
      lines.push(`| ${workload.name}${unexpected} | ${service.rps.toFixed(0)} | ${ratio.toFixed(2)}× ${ratio >= 0.75 ? '✓' : '✗'} | ≥ 0.75× | ${(service.rps / baseline.rps).toFixed(2)}× | ${service.p50.toFixed(2)} / ${service.p99.toFixed(2)} | ${service.cpu.toFixed(2)}${flag(service)} |`)
    }
  }
  lines.push('')
}
writeFileSync(join(root, 'docs/benchmark-run.md'), lines.join('\n'))
writeFileSync(join(root, 'docs/benchmark-run.svg'), chart(warn))
process.stdout.write(lines.join('\n') + '\nWrote docs/benchmark-run.md and docs/benchmark-run.svg\n')

/** Requests/s per workload, service beside the baseline and plain Fastify, at LOG_LEVEL=warn. */
function chart (result: LevelResult): string {
  const barHeight = 14
  const rowHeight = 3 * barHeight + 14
  const left = 190
  const width = 720
  const top = 40
  const max = Math.max(...result.rows.flatMap((row) => [row.service.rps, row.baseline.rps, row.fastify.rps]))
  const scale = (rps: number) => (rps / max) * (width - left - 90)
  const escape = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;')
  const bar = (y: number, rps: number, fill: string, label: string) =>
    `<rect x="${left}" y="${y}" width="${scale(rps).toFixed(1)}" height="${barHeight}" fill="${fill}"/>` +
    `<text x="${left + scale(rps) + 4}" y="${y + 11}">${label}</text>`
  const rows = result.rows.map((row, index) => {
    const y = top + index * rowHeight
    return `<text x="${left - 8}" y="${y + barHeight + 11}" text-anchor="end">${escape(row.workload.name)}</text>` +
      bar(y, row.service.rps, '#2f6fdf', `${Math.round(row.service.rps)} (${(row.service.rps / row.baseline.rps).toFixed(2)}×)`) +
      bar(y + barHeight, row.baseline.rps, '#b9b9b9', String(Math.round(row.baseline.rps))) +
      bar(y + 2 * barHeight, row.fastify.rps, '#e0a040', String(Math.round(row.fastify.rps)))
  })
  const height = top + result.rows.length * rowHeight + 10
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="11">` +
    '<rect width="100%" height="100%" fill="white"/>' +
    `<text x="10" y="18" font-size="13" font-weight="bold">Requests/s at ${connections} connections, LOG_LEVEL=warn</text>` +
    `<rect x="${left}" y="24" width="10" height="10" fill="#2f6fdf"/><text x="${left + 14}" y="33">service</text>` +
    `<rect x="${left + 70}" y="24" width="10" height="10" fill="#b9b9b9"/><text x="${left + 84}" y="33">bare node:http baseline</text>` +
    `<rect x="${left + 230}" y="24" width="10" height="10" fill="#e0a040"/><text x="${left + 244}" y="33">plain Fastify</text>` +
    rows.join('') + '</svg>\n'
}
