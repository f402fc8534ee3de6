/** One measurement under wrk, and rounds of them: requests/s, latency and the server's CPU. */
import { execFileSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { median } from './median.js'
import { CONNECTIONS, duration, folder, pin, rounds, warmup } from './options.js'
import type { Server } from './servers.js'
import type { Workload } from './workloads.js'
import { readWrkOutput, type WrkFigures } from './wrk.js'

export interface Sample { rps: number, p50: number, p99: number, cpu: number, unexpected: number }

function cpuSeconds (pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return (Number(fields[11]) + Number(fields[12])) / 100
}
export const rssMegabytes = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024

/** Answers 201 each server gave, warm-ups included, to check them against the users it stored. */
export const created201 = new Map<Server, number>()

export async function measure (server: Server, workload: Workload, seconds: number, connections = CONNECTIONS): Promise<Sample> {
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
export async function compare (servers: Array<{ server: Server, workload: Workload }>, connections = CONNECTIONS): Promise<Sample[][]> {
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

export const summarise = (list: Sample[]): Sample => ({
  rps: median(list.map((sample) => sample.rps)),
  p50: median(list.map((sample) => sample.p50)),
  p99: median(list.map((sample) => sample.p99)),
  cpu: median(list.map((sample) => sample.cpu)),
  unexpected: list.reduce((sum, sample) => sum + sample.unexpected, 0)
})
/** The median over rounds of the ratio of two servers' requests/s in the same round. */
export const medianRatio = (a: Sample[], b: Sample[]) => median(a.map((sample, round) => sample.rps / b[round]!.rps))
/** "412 (380–455)": the median, then the lowest and highest. */
export const spread = (numbers: number[], digits: number) =>
  `${median(numbers).toFixed(digits)} (${Math.min(...numbers).toFixed(digits)}–${Math.max(...numbers).toFixed(digits)})`
