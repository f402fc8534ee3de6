/** Parts 2 and 3 of `npm run bench`: every workload at 50 connections beside its yardsticks, and the concurrency sweep. */
import { compare, created201, medianRatio, rssMegabytes, type Sample, summarise } from './measure.js'
import { CONNECTIONS, FULL_CORE, P99_TARGET_MS, plainDatabase, pluginsDatabase, SWEEP_CONNECTIONS, values } from './options.js'
import { cores, goal, latency, mark, versus, write } from './report.js'
import { type Server, startPlain, startService, stop, storedUsers } from './servers.js'
import { sweepWorkloads, type Workload, workloads, type YardstickName } from './workloads.js'

/** A workload's figures at 50 connections: the service's, its yardsticks', and their ratios. */
export interface Row {
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

export async function routes (seed: string, againstBuild: { bundle: string } | undefined, againstSeed: string | undefined): Promise<Row[]> {
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
  return rows
}

/** Requests/s per workload at 50 connections: the service beside its yardstick and the baseline. */
export function chart (rows: Row[]): string {
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
