/** Runs the service as a real child process, as `npm start` would, for tests that need one. */
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import type { TestContext } from 'node:test'

const tsx = import.meta.resolve('tsx')
export const repositoryRoot = fileURLToPath(new URL('..', import.meta.url))
const entry = (script: string) => fileURLToPath(new URL(`../src/${script}`, import.meta.url))

export interface Exit {
  code: number | null
  signal: NodeJS.Signals | null
}

export interface RunningService {
  child: ChildProcess
  port: number
  /** Everything written to standard output so far, line by line. */
  stdout: string[]
  /** Everything written to standard error so far. */
  stderr: () => string
  exited: Promise<Exit>
}

function spawnScript (script: string, env: Record<string, string>, cwd: string, args: string[] = []): ChildProcess {
  return spawn(process.execPath, ['--import', tsx, entry(script), ...args], {
    cwd,
    env: { PATH: process.env.PATH, HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe']
  })
}

function exitOf (child: ChildProcess): Promise<Exit> {
  return once(child, 'exit').then(([code, signal]) => ({ code, signal }))
}

/** Starts the service and resolves once it has printed where its documentation is. */
export async function startService (t: TestContext, env: Record<string, string>, cwd = repositoryRoot): Promise<RunningService> {
  const child = spawnScript('server.ts', env, cwd)
  const exited = exitOf(child)
  t.after(() => { if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL') })

  const stdout: string[] = []
  let stderr = ''
  child.stderr?.on('data', (chunk) => { stderr += String(chunk) })
  const port = await new Promise<number>((resolve, reject) => {
    let pending = ''
    child.stdout?.on('data', (chunk) => {
      pending += String(chunk)
      const lines = pending.split('\n')
      pending = lines.pop() ?? ''
      for (const line of lines) {
        stdout.push(line)
        const docs = /API documentation at http:\/\/127\.0\.0\.1:(\d+)\/documentation/.exec(line)
        if (docs) resolve(Number(docs[1]))
      }
    })
    exited.then((exit) => reject(new Error(`service exited (${JSON.stringify(exit)}) before listening: ${stderr}`)), reject)
  })
  return { child, port, stdout, stderr: () => stderr, exited }
}

/** Runs a script to completion and collects what it printed. */
export async function runScript (script: string, env: Record<string, string>, args: string[] = []): Promise<Exit & { stdout: string, stderr: string }> {
  const child = spawnScript(script, env, repositoryRoot, args)
  let stdout = ''
  let stderr = ''
  child.stdout?.on('data', (chunk) => { stdout += String(chunk) })
  child.stderr?.on('data', (chunk) => { stderr += String(chunk) })
  return { ...(await exitOf(child)), stdout, stderr }
}
