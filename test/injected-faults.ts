/**
 * Faults injected into the service as a real process: a small library loaded with LD_PRELOAD
 * (test/fixtures/faults.c) makes each sync of SQLite's write-ahead log wait or fail, each write
 * of its files fail with EROFS, or each open of a file or socket fail with ENFILE, as the
 * control file says. It needs a C compiler, which CI installs.
 */
import { execFileSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { TestContext } from 'node:test'
import { fileURLToPath } from 'node:url'
import { temporaryFolder } from './helpers.js'
import { installed } from './process.js'

/** Why the tests that inject faults are skipped, or false when they run. */
export const needsCompiler = installed('cc') ? false : 'needs a C compiler (cc) to build the fault injector (CI installs gcc)'

export interface InjectedFaults {
  /** The environment that loads the library into the service. */
  env: Record<string, string>
  /**
   * What fails from now on: each sync of the WAL (fail with EIO, or wait first), each write of
   * the database (`readonly`), each open of a file or socket (`nofiles`), or nothing (`ok`).
   */
  set: (mode: 'ok' | 'fail' | `slow ${number}` | 'readonly' | 'nofiles') => void
  /** The syncs of the WAL so far: when each began and ended, and whether it succeeded. */
  syncs: () => Sync[]
}

interface Sync { began: number, ended: number, ok: boolean }

export function injectedFaults (t: TestContext): InjectedFaults {
  const folder = temporaryFolder(t)
  const library = join(folder, 'faults.so')
  execFileSync('cc', ['-shared', '-fPIC', '-O2', '-o', library, fileURLToPath(new URL('fixtures/faults.c', import.meta.url)), '-ldl'])
  const control = join(folder, 'control')
  const log = join(folder, 'syncs')
  writeFileSync(control, 'ok')
  writeFileSync(log, '')
  return {
    env: { LD_PRELOAD: library, FAULT_CONTROL: control, FAULT_SYNC_LOG: log },
    set: (mode) => writeFileSync(control, mode),
    syncs: () => readFileSync(log, 'utf8').split('\n').filter(Boolean).map((line) => {
      const [began, ended, outcome] = line.split(' ')
      return { began: Number(began), ended: Number(ended), ok: outcome === 'ok' }
    })
  }
}
