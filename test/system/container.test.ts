/**
 * The Containerfile, built and run with podman (Debian's package) where it is installed and the
 * tests run as root (CI installs it and runs as root).
 *
 * No image registry is reachable here, so the test first builds a local stand-in for the base
 * image the Containerfile names, `node:26-bookworm-slim`: Debian bookworm (debootstrap's
 * minbase), the Node 26 binary of the npm package `node`, npm from the npm registry, and the
 * `node` user the official image has. It is imported under the official name, once; the
 * Containerfile does not know. On a machine that can pull the real image, it is used as is.
 */
import assert from 'node:assert/strict'
import { execFileSync, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { appendFileSync, chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { freePort, installed, repositoryRoot } from '../process.js'

const BASE_IMAGE = 'docker.io/library/node:26-bookworm-slim'
const HOST_CA_BUNDLE = '/etc/ssl/certs/ca-certificates.crt'
const skip = process.getuid?.() !== 0
  ? 'needs root, to build and run images with podman (CI runs as root)'
  : !installed('podman') || !installed('debootstrap')
      ? 'podman and debootstrap are not installed (CI installs Debian\'s packages)'
      : false

const run = (command: string, args: string[], options: { cwd?: string, input?: string } = {}) =>
  execFileSync(command, args, { encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'], maxBuffer: 64 * 1024 * 1024, ...options })
const podman = (...args: string[]) => run('podman', args)

/** The stand-in for the official base image, made unless an image of that name is there. */
function ensureBaseImage (): void {
  if (spawnSync('podman', ['image', 'exists', BASE_IMAGE]).status === 0) return
  const work = mkdtempSync(join(tmpdir(), 'service-base-image-'))
  try {
    const root = join(work, 'root')
    // libatomic1: the Node binary needs it, and the official slim image has it.
    run('debootstrap', ['--variant=minbase', '--include=libatomic1', 'bookworm', root, 'http://deb.debian.org/debian'])
    // Node 26 and npm, where the official image has them.
    const toolchain = join(work, 'toolchain')
    run('npm', ['install', '--prefix', toolchain, '--no-save', '--no-audit', '--no-fund', 'node@26', 'npm@11'])
    mkdirSync(join(root, 'usr/local/bin'), { recursive: true })
    copyFileSync(join(toolchain, 'node_modules/node/bin/node'), join(root, 'usr/local/bin/node'))
    chmodSync(join(root, 'usr/local/bin/node'), 0o755)
    mkdirSync(join(root, 'usr/local/lib/node_modules'), { recursive: true })
    run('cp', ['-a', join(toolchain, 'node_modules/npm'), join(root, 'usr/local/lib/node_modules/npm')])
    symlinkSync('../lib/node_modules/npm/bin/npm-cli.js', join(root, 'usr/local/bin/npm'))
    appendFileSync(join(root, 'etc/passwd'), 'node:x:1000:1000::/home/node:/bin/sh\n')
    appendFileSync(join(root, 'etc/group'), 'node:x:1000:\n')
    mkdirSync(join(root, 'home/node'), { recursive: true })
    run('chown', ['1000:1000', join(root, 'home/node')])
    const tarball = join(work, 'root.tar')
    run('tar', ['-C', root, '-cf', tarball, '.'])
    podman('import', '--change', 'ENV PATH=/usr/local/bin:/usr/bin:/bin', '--change', 'CMD ["node"]', tarball, BASE_IMAGE)
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
}

/**
 * This process's own limit, soft:hard, from /proc/self/limits: the container may not be given
 * more open files than the machine allows, and podman's default asks for more. (Processes are
 * capped at 4096, far above what the service starts, for this machine refuses more.)
 */
function ownLimit (name: 'open files'): string {
  const [, soft, hard] = new RegExp(`^Max ${name}\\s+(\\S+)\\s+(\\S+)`, 'm').exec(readFileSync('/proc/self/limits', 'utf8')) ?? []
  const value = (limit: string | undefined) => limit === undefined || limit === 'unlimited' ? '-1' : limit
  return `${value(soft)}:${value(hard)}`
}

async function waitForHealth (port: number): Promise<void> {
  for (let attempt = 0; attempt < 100; attempt++) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/health`)).status === 200) return
    } catch {}
    await sleep(100)
  }
  throw new Error('the container never answered /health')
}

describe('the container image', { skip }, () => {
  test('builds from the Containerfile, runs as a non-root user with SQLite on a volume, stops cleanly on SIGTERM, runs with a read-only root filesystem and no capabilities, and passes its HEALTHCHECK on any PORT', { timeout: 30 * 60_000 }, async (t) => {
    ensureBaseImage()
    const tag = `localhost/user-records-test:${randomBytes(4).toString('hex')}`
    // This machine reaches the npm registry through a proxy with a CA of its own: the build's
    // npm is given the machine's CA bundle through npm's global config file, both mounted for
    // the build only, so the image keeps neither.
    const npmrc = join(mkdtempSync(join(tmpdir(), 'service-npmrc-')), 'npmrc')
    writeFileSync(npmrc, 'cafile=/etc/ssl/host-ca.crt\n')
    t.after(() => { rmSync(dirname(npmrc), { recursive: true, force: true }) })
    const trust = existsSync(HOST_CA_BUNDLE)
      ? ['--volume', `${HOST_CA_BUNDLE}:/etc/ssl/host-ca.crt:ro`, '--volume', `${npmrc}:/usr/local/etc/npmrc:ro`]
      : []
    // Docker's image format, as `docker build` makes it: podman's default (OCI) has no HEALTHCHECK.
    podman('build', '--format', 'docker', '--isolation', 'chroot', '--network', 'host', ...trust, '-f', 'Containerfile', '-t', tag, repositoryRoot)
    t.after(() => { spawnSync('podman', ['rmi', '--force', tag]) })
    const volume = `user-records-test-${randomBytes(4).toString('hex')}`
    t.after(() => { spawnSync('podman', ['volume', 'rm', '--force', volume]) })

    const start = async (...options: string[]) => {
      const port = await freePort()
      const name = `user-records-test-${randomBytes(4).toString('hex')}`
      podman('run', '--detach', '--name', name, '--runtime', 'runc', '--network', 'host', ...options,
        '--ulimit', `nofile=${ownLimit('open files')}`, '--ulimit', 'nproc=4096:4096',
        '-v', `${volume}:/data`, '-e', `PORT=${port}`, '-e', 'HOST=127.0.0.1', '-e', `JWT_SECRET=${randomBytes(32).toString('hex')}`, tag)
      t.after(() => { spawnSync('podman', ['rm', '--force', name]) })
      await waitForHealth(port)
      return { port, name }
    }

    const first = await start()
    assert.equal(podman('exec', first.name, 'id', '-u').trim(), '1000', 'not root')
    const created = await fetch(`http://127.0.0.1:${first.port}/users`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'Ada', email: 'ada@example.com' })
    })
    assert.equal(created.status, 201)
    podman('stop', '--time', '30', first.name)
    const inspected = JSON.parse(podman('inspect', first.name))[0]
    assert.equal(inspected.State.ExitCode, 0, 'SIGTERM (the image\'s STOPSIGNAL) ends it cleanly')
    assert.ok([15, 'SIGTERM'].includes(inspected.Config.StopSignal), `stop signal ${inspected.Config.StopSignal}`)

    // Locked down as a careful Kubernetes pod is (readOnlyRootFilesystem, no capabilities, no
    // privilege escalation): only the volume is writable.
    const second = await start('--read-only', '--read-only-tmpfs=false', '--cap-drop', 'all', '--security-opt', 'no-new-privileges')
    const stored = await fetch(`http://127.0.0.1:${second.port}/users/1`)
    assert.deepEqual([stored.status, await stored.json()], [200, { id: '1', name: 'Ada' }], 'the user outlived its container, on the volume')
    const another = await fetch(`http://127.0.0.1:${second.port}/users`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'Grace', email: 'grace@example.com' })
    })
    assert.equal(another.status, 201, 'a read-only root filesystem costs nothing: the database is on the volume')
    const health = spawnSync('podman', ['healthcheck', 'run', second.name], { encoding: 'utf8' })
    assert.equal(health.status, 0, `the image's HEALTHCHECK passes on the port the container was given (${second.port}): ${health.stdout}${health.stderr}`)
  })
})
