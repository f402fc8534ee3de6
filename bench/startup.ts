/** Part 1 of `npm run bench`: start-up and idle memory of the service and of each yardstick. */
import { median } from './median.js'
import { rssMegabytes, spread } from './measure.js'
import { plainDatabase, pluginsDatabase, values } from './options.js'
import { write } from './report.js'
import { startPlain, startService, stop } from './servers.js'
import { setTimeout as sleep } from 'node:timers/promises'

export async function startup (seed: string, againstBuild: { bundle: string } | undefined, againstSeed: string | undefined): Promise<void> {
  // 1. Start-up and idle memory: the service, the build at --against, and the plain servers as
  // yardsticks, each started in turn, five times. The plain server with SQLite keeps its file
  // (the first start gives it 1,000 users), and part 2 goes on with it.
  const STARTS = 5
  /** The service's first 200, at most this many times plain Fastify + SQLite's in the same run. */
  const STARTUP_TARGET_RATIO = 1.2
  const IDLE_RSS_TARGET_MB = 95
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
}
