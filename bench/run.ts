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
 * benchmark-run.svg into docs/, or into `--out <folder>`. Each part is a file of bench/, beside
 * the helpers they share: options, workloads, servers, measure, seeds and report.
 */
import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync, rmSync, writeFileSync } from 'node:fs'
import { cpus } from 'node:os'
import { join } from 'node:path'
import { SERVER_BUNDLE } from '../scripts/build.js'
import { writesWithEvents } from './events.js'
import { findingUsers } from './finding-users.js'
import { bigUsers, duration, folder, has, out, pinning, root, rounds, users, values, warmup } from './options.js'
import { lines, write } from './report.js'
import { chart, routes } from './routes.js'
import { seededDatabase } from './seeds.js'
import { buildAt, buildPlainServers } from './servers.js'
import { startup } from './startup.js'
import { tableSize } from './table-size.js'

if (!existsSync(join(root, SERVER_BUNDLE))) throw new Error('build first: npm run build')
if (!has('wrk')) throw new Error('the benchmark needs wrk: apt-get install wrk')
await buildPlainServers()

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

await startup(seed, againstBuild, againstSeed)
const rows = await routes(seed, againstBuild, againstSeed)
const bigSeed = bigUsers > 0 ? await seededDatabase(bigUsers) : undefined
if (bigSeed !== undefined) {
  await tableSize(seed, bigSeed)
  await findingUsers(bigSeed)
}
await writesWithEvents(seed)

rmSync(folder, { recursive: true, force: true })

writeFileSync(join(out, 'benchmark-run.md'), ['# Benchmark run', '', '![Requests/s at 50 connections](benchmark-run.svg)', '', ...lines].join('\n'))
writeFileSync(join(out, 'benchmark-run.svg'), chart(rows))
process.stdout.write(`Wrote benchmark-run.md and benchmark-run.svg into ${out}\n`)
