/** `npm run bench`'s options and the settings every part shares: rounds, durations, cores, folders. */
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'

export const { values } = parseArgs({
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
export const duration = Number(values.duration)
export const rounds = Number(values.rounds)
export const warmup = Number(values.warmup)
export const users = Number(values.users)
export const bigUsers = Number(values.big)
export const CONNECTIONS = 50
export const SWEEP_CONNECTIONS = [1, 256]
export const P99_TARGET_MS = 5
export const TABLE_TARGET = 0.9
export const FULL_CORE = 0.85

export const root = new URL('..', import.meta.url).pathname
// Made before the run, so that a report's folder cannot fail the run at its end.
export const out = values.out ?? join(root, 'docs')
mkdirSync(out, { recursive: true })
export const has = (command: string) => spawnSync('sh', ['-c', `command -v ${command}`]).status === 0
export const pinning = has('taskset') && cpus().length >= 2
/** The command run on one core: servers on core 0, wrk on core 1. */
export const pin = (core: number, command: string[]) => pinning ? ['taskset', '-c', String(core), ...command] : command

/** The run's files: seeded databases, copies, wrk's script; removed at its end. */
export const folder = mkdtempSync(join(tmpdir(), 'bench-'))
/** The plain servers' SQLite files: the first start in part 1 seeds each, and part 2 goes on with them. */
export const plainDatabase = join(folder, 'plain.db')
export const pluginsDatabase = join(folder, 'plugins.db')
