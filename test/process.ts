/** Runs the service as a real child process, as `npm start` would, for tests that need one. */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { createServer } from 'node:net'
import { fileURLToPath } from 'node:url'
import type { TestContext } from 'node:test'

const tsx = import.meta.resolve('tsx')
export const repositoryRoot = fileURLToPath(new URL('..', import.meta.url))
const entry = (script: string) => fileURLToPath(new URL(`../src/process/${script}`, import.meta.url))

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

/** Node's arguments that run a script of src/ from its TypeScript source. */
export const fromSource = (script: string): string[] => ['--import', tsx, entry(script)]

/**
 * The command and arguments that run the service under an open-file limit of its own: sh
 * lowers the limit for the service alone, as a tight container or systemd unit would.
 */
export function serverUnderOpenFileLimit (limit: number): { command: string, nodeArgs: string[] } {
  return { command: 'sh', nodeArgs: ['-c', `ulimit -n ${limit} && exec "$0" "$@"`, process.execPath, ...fromSource('server.ts')] }
}

/**
 * Each child leads a process group of its own, so that a test can signal it together with
 * what it started (npm does not pass SIGTERM on to the script it runs).
 */
function spawnNode (nodeArgs: string[], env: Record<string, string>, cwd: string, command = process.execPath): ChildProcess {
  return spawn(command, nodeArgs, {
    cwd,
    env: { PATH: process.env.PATH, HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true
  })
}

/** Sends `signal` to the child's whole process group; false if none of it is left. */
export function signalGroup (child: ChildProcess, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-(child.pid as number), signal)
    return true
  } catch {
    return false
  }
}

function exitOf (child: ChildProcess): Promise<Exit> {
  return once(child, 'exit').then(([code, signal]) => ({ code, signal }))
}

/**
 * Starts the service and resolves once it has printed where its documentation is. It runs
 * from the sources unless `nodeArgs` name another entry, such as the built bundle, or
 * `command` names another program than this Node, such as npm.
 */
export async function startService (t: TestContext, env: Record<string, string>, cwd = repositoryRoot, nodeArgs = fromSource('server.ts'), command = process.execPath): Promise<RunningService> {
  const child = spawnNode(nodeArgs, env, cwd, command)
  const exited = exitOf(child)
  t.after(() => { signalGroup(child, 'SIGKILL') })

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

/** Runs a script of src/ to completion and collects what it printed. */
export async function runScript (script: string, env: Record<string, string>, args: string[] = []): Promise<Exit & { stdout: string, stderr: string }> {
  return await runNode([...fromSource(script), ...args], env)
}

/** Runs Node with these arguments (or `command`, which runs it) to completion and collects what it printed. */
export async function runNode (nodeArgs: string[], env: Record<string, string>, command?: string): Promise<Exit & { stdout: string, stderr: string }> {
  const child = spawnNode(nodeArgs, env, repositoryRoot, command)
  let stdout = ''
  let stderr = ''
  child.stdout?.on('data', (chunk) => { stdout += String(chunk) })
  child.stderr?.on('data', (chunk) => { stderr += String(chunk) })
  return { ...(await exitOf(child)), stdout, stderr }
}

/** Whether a program is on PATH, for tests that need one the machine may lack. */
export const installed = (program: string): boolean => spawnSync('sh', ['-c', `command -v ${program}`], { stdio: 'ignore' }).status === 0

/** A loopback port no one listens on now, for a server a test starts on a port of its choosing. */
export async function freePort (): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as { port: number }
  server.close()
  return port
}
