/** What the bench reads off wrk's output (`wrk --latency`, with run.ts's Lua script). */

export interface WrkFigures {
  requests: number
  rps: number
  p50: number
  p99: number
  /** Answers with a status other than the one expected, counted by run.ts's Lua script. */
  unexpected: number
}

const MS_PER_UNIT: Record<string, number> = { us: 0.001, ms: 1, s: 1000, m: 60_000 }

/**
 * wrk writes latencies as 812.00us, 1.52ms, 2.01s or 1.10m, in a column of fixed width, so
 * a unit of one letter is followed by a space.
 */
function toMs (text: string): number {
  const match = /^([\d.]+)(us|ms|s|m)$/.exec(text)
  if (match === null) throw new Error(`unreadable latency from wrk: ${text}`)
  return Number(match[1]) * MS_PER_UNIT[match[2]!]!
}

export function readWrkOutput (output: string): WrkFigures {
  const field = (pattern: RegExp): string => {
    const match = pattern.exec(output)
    if (match === null) throw new Error(`wrk printed no ${pattern}`)
    return match[1]!
  }
  return {
    requests: Number(field(/(\d+) requests in/)),
    rps: Number(field(/Requests\/sec:\s+([\d.]+)/)),
    p50: toMs(field(/^\s+50%\s+(\S+)\s*$/m)),
    p99: toMs(field(/^\s+99%\s+(\S+)\s*$/m)),
    unexpected: Number(/unexpected: (\d+)/.exec(output)?.[1] ?? 0)
  }
}
