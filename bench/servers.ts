/** The servers under test: the service's bundle, the plain yardsticks, and a build at another commit. */
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { copyFileSync } from 'node:fs'
import { get, type IncomingMessage } from 'node:http'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { build } from 'esbuild'
import { NODE_BUNDLE, SERVER_BUNDLE } from '../scripts/build.js'
import { freePort } from '../test/process.js'
import { folder, pin, root } from './options.js'

/**
 * A server under test: its process, for its CPU use, and the port it answers on; `restart`
 * replaces the process with a new one of the same command, on the same port and files.
 */
export interface Server { name: string, process: ChildProcess, port: number, restart: () => Promise<void> }

async function waitFor200 (port: number): Promise<void> {
  for (;;) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/health`)).status === 200) return
    } catch {}
    await sleep(5)
  }
}

const children = new Set<ChildProcess>()
// Whatever happens, no server outlives the run to hold its port and core.
process.on('exit', () => { for (const child of children) child.kill('SIGKILL') })

async function spawnServer (command: string[], port: number, env: Record<string, string>): Promise<ChildProcess> {
  const child = spawn(command[0]!, command.slice(1), { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'inherit'] })
  children.add(child)
  child.on('exit', () => children.delete(child))
  await waitFor200(port)
  return child
}

export async function stop (server: Server): Promise<void> {
  server.process.kill('SIGTERM')
  await once(server.process, 'exit')
}

export async function startServer (name: string, command: string[], port: number, env: Record<string, string> = {}): Promise<Server & { startupMs: number }> {
  const launched = performance.now()
  const server = {
    name,
    process: await spawnServer(command, port, env),
    port,
    startupMs: performance.now() - launched,
    restart: async () => {
      await stop(server)
      server.process = await spawnServer(command, port, env)
    }
  }
  return server
}

/** The service's bundle (or one built at `--against`) as shipped, on a free port, with DATABASE_URL `databaseUrl`. */
export async function startBundle (name: string, databaseUrl: (port: number) => string, bundle = join(root, SERVER_BUNDLE), env: Record<string, string> = {}) {
  const port = await freePort()
  return await startServer(name, pin(0, [process.execPath, bundle]), port, {
    NODE_ENV: 'production',
    JWT_SECRET: 'bench-secret-of-thirty-two-bytes-or-more',
    LOG_LEVEL: 'warn',
    HOST: '127.0.0.1',
    PORT: String(port),
    DATABASE_URL: databaseUrl(port),
    ...env
  })
}

/** Starts the service (or its build at `--against`) on a fresh copy of a seeded database. */
export async function startService (name: string, seed: string, bundle = join(root, SERVER_BUNDLE), env: Record<string, string> = {}) {
  return await startBundle(name, (port) => {
    const databaseFile = join(folder, `service-${port}.db`)
    copyFileSync(seed, databaseFile)
    return `sqlite:${databaseFile}`
  }, bundle, env)
}

/**
 * The plain servers of bench/, each bundled into one file as the service is (NODE_BUNDLE) and
 * run by `node` alone, so that the two sides load their code the same way: through tsx, a
 * plain server would also load its TypeScript sources one by one and tsx's own loader.
 */
const PLAIN_SERVERS = ['baseline', 'fastify', 'fastify-sqlite', 'fastify-plugins'] as const
const plainBundles = join(root, 'dist/bench')
/** Bundles the plain servers, once before they start. */
export async function buildPlainServers (): Promise<void> {
  await build({ ...NODE_BUNDLE, entryPoints: PLAIN_SERVERS.map((name) => join(root, 'bench', `${name}.ts`)), outdir: plainBundles })
}

/** Starts one of the plain servers, given its port and then `args`. */
export async function startPlain (name: string, server: typeof PLAIN_SERVERS[number], ...args: string[]): Promise<Server & { startupMs: number }> {
  const port = await freePort()
  return await startServer(name, pin(0, [process.execPath, join(plainBundles, `${server}.js`), String(port), ...args]), port)
}

/** The service's bundle as built at another commit, for `--against`, and its source tree. */
export function buildAt (ref: string): { bundle: string, source: string } {
  const worktree = join(folder, 'against')
  const run = (command: string, args: string[], cwd: string) => execFileSync(command, args, { cwd, stdio: ['ignore', 'ignore', 'inherit'] })
  run('git', ['worktree', 'add', '--detach', worktree, ref], root)
  // The folder goes with the run's other files; git forgets the worktree once it is gone.
  process.on('exit', () => { spawnSync('git', ['worktree', 'prune'], { cwd: root }) })
  run('npm', ['ci', '--no-audit', '--no-fund'], worktree)
  run('npm', ['run', 'build'], worktree)
  return { bundle: join(worktree, SERVER_BUNDLE), source: worktree }
}

/**
 * How many users a server holds, from its X-Total-Count. On a connection of its own: one kept
 * from minutes before may have been closed by the server since.
 */
export async function storedUsers (server: Server): Promise<number> {
  const request = get({ host: '127.0.0.1', port: server.port, path: '/users?limit=1', agent: false })
  const [response] = await once(request, 'response') as [IncomingMessage]
  response.resume()
  return Number(response.headers['x-total-count'])
}
