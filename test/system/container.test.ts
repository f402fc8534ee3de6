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
import { after, before, describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { parseAllDocuments, stringify } from 'yaml'
import { postgresDatabase } from '../helpers.js'
import { freePort, installed, repositoryRoot } from '../process.js'

const BASE_IMAGE = 'docker.io/library/node:26-bookworm-slim'
const postgresUrl = process.env.TEST_DATABASE_URL
const redisUrl = process.env.TEST_REDIS_URL
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

/** The image's size and the base's, in bytes, as podman counts them (uncompressed). */
const imageSize = (image: string) => Number(podman('image', 'inspect', '--format', '{{.Size}}', image).trim())

describe('the container image', { skip }, () => {
  const tag = `localhost/user-records-test:${randomBytes(4).toString('hex')}`
  before(() => {
    ensureBaseImage()
    // This machine reaches the npm registry through a proxy with a CA of its own: the build's
    // npm is given the machine's CA bundle through npm's global config file, both mounted for
    // the build only, so the image keeps neither.
    const npmrc = join(mkdtempSync(join(tmpdir(), 'service-npmrc-')), 'npmrc')
    writeFileSync(npmrc, 'cafile=/etc/ssl/host-ca.crt\n')
    const trust = existsSync(HOST_CA_BUNDLE)
      ? ['--volume', `${HOST_CA_BUNDLE}:/etc/ssl/host-ca.crt:ro`, '--volume', `${npmrc}:/usr/local/etc/npmrc:ro`]
      : []
    try {
      // Docker's image format, as `docker build` makes it: podman's default (OCI) has no HEALTHCHECK.
      podman('build', '--format', 'docker', '--isolation', 'chroot', '--network', 'host', ...trust, '-f', 'Containerfile', '-t', tag, repositoryRoot)
    } finally {
      rmSync(dirname(npmrc), { recursive: true, force: true })
    }
  }, { timeout: 30 * 60_000 })
  after(() => { spawnSync('podman', ['rmi', '--force', tag]) })

  test('holds the bundle, its two packages and the static files: at most 40 MB over its base, run as user 1000', () => {
    const added = imageSize(tag) - imageSize(BASE_IMAGE)
    assert.ok(added <= 40 * 1024 * 1024, `${(added / 1024 / 1024).toFixed(1)} MB over the base`)
    assert.deepEqual(podman('run', '--rm', '--runtime', 'runc', '--ulimit', `nofile=${ownLimit('open files')}`, '--ulimit', 'nproc=4096:4096', '--entrypoint', 'ls', tag, 'node_modules').trim().split('\n').sort(),
      ['better-sqlite3', 'node-addon-api', 'pg', 'pg-cloudflare', 'pg-connection-string', 'pg-int8', 'pg-pool', 'pg-protocol', 'pg-types', 'pgpass',
        'postgres-array', 'postgres-bytea', 'postgres-date', 'postgres-interval', 'split2', 'xtend'])
    assert.equal(podman('image', 'inspect', '--format', '{{.Config.User}}', tag).trim(), '1000:1000')
  })

  test('builds from the Containerfile, runs as a non-root user with SQLite on a volume, stops cleanly on SIGTERM, runs with a read-only root filesystem and no capabilities, and passes its HEALTHCHECK on any PORT', { timeout: 10 * 60_000 }, async (t) => {
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

  test('plays deploy/kubernetes.yaml with `podman kube play`: migrates in its init container, reaches /ready, asks for a token, serves a write with one, and drains on stop', {
    skip: postgresUrl === undefined || redisUrl === undefined ? 'TEST_DATABASE_URL and TEST_REDIS_URL are not both set' : false,
    timeout: 5 * 60_000
  }, async (t) => {
    // The pod reaches this machine's loopback, where PostgreSQL and Redis listen, at slirp4netns's host address.
    const fromPod = (url: string) => { const moved = new URL(url); moved.hostname = '10.0.2.2'; return moved.href }
    const secrets: Record<string, string> = {
      'jwt-secret': randomBytes(32).toString('hex'),
      'database-url': fromPod((await postgresDatabase(t)).url),
      'redis-url': fromPod(redisUrl as string)
    }
    const port = await freePort()
    const folder = mkdtempSync(join(tmpdir(), 'service-kube-'))
    t.after(() => { rmSync(folder, { recursive: true, force: true }) })
    const manifest = join(folder, 'kubernetes.yaml')
    writeFileSync(manifest, asPodmanPlaysIt(readFileSync(join(repositoryRoot, 'deploy/kubernetes.yaml'), 'utf8'), { image: tag, port, secrets }))
    // The limits the machine allows, and runc, as the test above gives `podman run`.
    const containersConf = join(folder, 'containers.conf')
    writeFileSync(containersConf, `[containers]\ndefault_ulimits = ["nofile=${ownLimit('open files')}", "nproc=4096:4096"]\n[engine]\nruntime = "runc"\n`)
    const env = { ...process.env, CONTAINERS_CONF: containersConf }
    const pod = 'user-records-pod-0'
    spawnSync('podman', ['pod', 'rm', '--force', pod])
    t.after(() => { spawnSync('podman', ['pod', 'rm', '--force', pod]) })
    execFileSync('podman', ['kube', 'play', '--network', 'slirp4netns:allow_host_loopback=true', manifest], { env, stdio: 'pipe' })

    const base = `http://127.0.0.1:${port}`
    let ready = 0
    for (let waited = 0; ready !== 200 && waited < 60_000; waited += 250) {
      ready = await fetch(`${base}/ready`).then((response) => response.status, () => 0)
      if (ready !== 200) await sleep(250)
    }
    assert.equal(ready, 200, 'the pod becomes ready')
    // With MIGRATE=off it would have stopped on a database not yet migrated: the init container did.
    const opened = podman('logs', `${pod}-user-records`).split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line)).find((line) => line.msg === 'database open')
    assert.deepEqual(opened?.migrationsApplied, [], 'the service only checked the schema')

    const post = async (headers: Record<string, string>) => await fetch(`${base}/users`, {
      method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ name: 'Ada', email: 'ada@example.com' })
    })
    assert.equal((await post({})).status, 401, 'AUTH is set by the manifest: no token, no write')
    const token = podman('exec', `${pod}-user-records`, 'node', 'dist/cli/token.js', '--sub', 'deployer').trim()
    assert.equal((await post({ authorization: `Bearer ${token}` })).status, 201)

    podman('pod', 'stop', '--time', '30', pod)
    const inspected = JSON.parse(podman('inspect', `${pod}-user-records`))[0]
    assert.equal(inspected.State.ExitCode, 0, 'a stop ends it cleanly')
    assert.match(podman('logs', `${pod}-user-records`), /"shutting down: finishing requests in flight"/)
  })
})

/**
 * deploy/kubernetes.yaml as Debian's podman 4.3 plays it, changed only where podman needs it
 * (docs/deployment.md lists the same): the image built here; one replica, since podman starts
 * each replica as a pod of its own on the same host port; a `hostPort`, the only port podman
 * publishes; `restartPolicy: OnFailure`, since under `Always` podman restarts the init container
 * that has finished and then fails to remove it; and the Secret's values written in place, since
 * podman 4.3 cannot read a Secret into the environment (a `secretKeyRef` fails on the Secret its
 * own `kube play` stores) nor into files (a secret volume holds the base64 text).
 */
function asPodmanPlaysIt (manifest: string, { image, port, secrets }: { image: string, port: number, secrets: Record<string, string> }): string {
  const documents = parseAllDocuments(manifest).map((document) => document.toJS())
  const deployment = documents.find((document) => document.kind === 'Deployment')
  deployment.spec.replicas = 1
  const pod = deployment.spec.template.spec
  pod.restartPolicy = 'OnFailure'
  for (const container of [...pod.initContainers, ...pod.containers]) {
    container.image = image
    container.env = container.env.map((variable: { name: string, valueFrom?: { secretKeyRef: { key: string } } }) =>
      variable.valueFrom === undefined ? variable : { name: variable.name, value: secrets[variable.valueFrom.secretKeyRef.key] })
  }
  pod.containers[0].ports[0].hostPort = port
  return documents.map((document) => stringify(document)).join('---\n')
}
