/** The report: its lines as the parts write them (echoed as they come), and how figures are marked. */
import { FULL_CORE } from './options.js'
import type { Sample } from './measure.js'

export const lines: string[] = []
export const write = (...text: string[]) => {
  lines.push(...text)
  for (const line of text) process.stderr.write(line + '\n')
}
export const cores = (sample: Sample) => `${sample.cpu.toFixed(2)}${sample.cpu < FULL_CORE ? ' ⚠' : ''}`
export const latency = (sample: Sample) => `${sample.p50.toFixed(2)} / ${sample.p99.toFixed(2)}`
export const mark = (ratio: number, target: number | undefined) => `${ratio.toFixed(2)}×${target === undefined ? '' : ratio >= target ? ' ✓' : ' ✗'}`
/** A target beside its ratio: " (≥ 0.9×)", or nothing for a ratio without one. */
export const goal = (target: number | undefined) => target === undefined ? '' : ` (≥ ${target}×)`
/** A ratio to a server that gave other answers than the workload expects (a route it lacks) compares other work: none is given. */
export const versus = (other: Sample, ratio: number, target?: number) => other.unexpected > 0 ? `— (${other.unexpected} other answers)` : mark(ratio, target)
