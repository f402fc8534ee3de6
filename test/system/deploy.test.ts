/**
 * What deploy/ gives a team to copy must work with the service as it is: every variable set
 * is one the service reads and accepts, the probes and ports are the service's, and the time
 * given to stop covers the drain and the grace that follows it.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { test } from 'node:test'
import { parse, parseAllDocuments } from 'yaml'
import { loadConfig, SETTINGS, SHUTDOWN_GRACE_MS } from '../../src/config/config.js'
import { installed } from '../process.js'

const deploy = (file: string) => readFileSync(new URL(`../../deploy/${file}`, import.meta.url), 'utf8')

/** Values a Secret would hold, in the shape the service expects. */
const SECRETS: Record<string, string> = {
  JWT_SECRET: 'a-secret-of-at-least-thirty-two-bytes!',
  DATABASE_URL: 'postgres://app:secret@db:5432/users',
  REDIS_URL: 'redis://redis:6379'
}

test('the Kubernetes manifest sets only variables the service reads, probes /health and /ready on its port, and waits out drain and grace', () => {
  const [deployment, service] = parseAllDocuments(deploy('kubernetes.yaml')).map((document) => document.toJS())
  const pod = deployment.spec.template.spec
  const [container] = pod.containers
  const env: Record<string, string> = Object.fromEntries(container.env.map((variable: { name: string, value?: string }) =>
    [variable.name, variable.value ?? SECRETS[variable.name]]))
  for (const name of Object.keys(env)) assert.ok(SETTINGS.includes(name), `${name} is a setting of the service`)
  const config = loadConfig(env)

  const port = container.ports.find((entry: { name: string }) => entry.name === 'http').containerPort
  assert.equal(port, config.port)
  assert.deepEqual(container.livenessProbe.httpGet, { path: '/health', port: 'http' })
  assert.deepEqual(container.readinessProbe.httpGet, { path: '/ready', port: 'http' })
  assert.ok(pod.terminationGracePeriodSeconds * 1000 > config.shutdownDrainMs + SHUTDOWN_GRACE_MS,
    `${pod.terminationGracePeriodSeconds} s covers the drain (${config.shutdownDrainMs} ms) and the grace (${SHUTDOWN_GRACE_MS} ms)`)
  assert.ok(container.env.some((variable: { name: string, valueFrom?: { secretKeyRef?: object } }) =>
    variable.name === 'JWT_SECRET' && variable.valueFrom?.secretKeyRef !== undefined), 'the secret comes from a Secret')
  assert.ok(container.resources.requests.cpu && container.resources.requests.memory)
  assert.deepEqual(container.securityContext, { readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
    'locked down as test/container.test.ts runs the image')
  assert.equal(service.spec.ports[0].targetPort, 'http')
})

test('the Kubernetes manifest is what a team copies: every route behind a token, a numeric non-root user the image has, a startup probe, readiness that rides out a blip, one migration before the service, spread replicas and a disruption budget', () => {
  const documents = parseAllDocuments(deploy('kubernetes.yaml')).map((document) => document.toJS())
  const deployment = documents.find((document) => document.kind === 'Deployment')
  const pod = deployment.spec.template.spec
  const [container] = pod.containers
  const value = (name: string, of = container) => of.env.find((variable: { name: string }) => variable.name === name)?.value
  assert.equal(value('AUTH'), 'all')
  assert.equal(value('MIGRATE'), 'off', 'the service only checks the schema its init container migrated')
  const [migrate] = pod.initContainers
  assert.deepEqual([migrate.command, migrate.image], [['npm', 'run', 'migrate'], container.image])
  assert.ok(migrate.env.some((variable: { name: string, valueFrom?: object }) => variable.name === 'DATABASE_URL' && variable.valueFrom !== undefined))
  assert.deepEqual(migrate.securityContext, container.securityContext)

  assert.equal(pod.securityContext.runAsNonRoot, true)
  assert.deepEqual(pod.securityContext.seccompProfile, { type: 'RuntimeDefault' })
  assert.equal(pod.automountServiceAccountToken, false)
  // A kubelet holds only a numeric user to runAsNonRoot: the image's own user must be one.
  const imageUser = [...readFileSync(new URL('../../Containerfile', import.meta.url), 'utf8').matchAll(/^USER (\S+)$/gm)].at(-1)?.[1]
  assert.match(imageUser ?? '', /^[1-9]\d*(:\d+)?$/, `the Containerfile's USER (${imageUser}) is numeric and not root`)
  assert.equal(`${pod.securityContext.runAsUser}:${pod.securityContext.runAsGroup}`, imageUser)

  assert.deepEqual(container.startupProbe.httpGet, { path: '/health', port: 'http' })
  const { periodSeconds, failureThreshold } = container.readinessProbe
  assert.ok(periodSeconds * failureThreshold >= 10, `readiness fails after ${periodSeconds * failureThreshold} s of failed checks, not one`)
  assert.deepEqual(pod.topologySpreadConstraints.map((constraint: { topologyKey: string }) => constraint.topologyKey), ['kubernetes.io/hostname', 'topology.kubernetes.io/zone'])
  const budget = documents.find((document) => document.kind === 'PodDisruptionBudget')
  assert.deepEqual([budget.spec.maxUnavailable, budget.spec.selector], [1, deployment.spec.selector])
})

test('the compose file runs three instances, PostgreSQL, Redis and HAProxy, with settings the service accepts and HAProxy pointed at them', () => {
  const compose = parse(deploy('compose.yaml'), { merge: true })
  const instances = Object.entries<any>(compose.services).filter(([name]) => name.startsWith('users-'))
  assert.equal(instances.length, 3)
  for (const name of ['postgres', 'redis', 'haproxy']) assert.ok(compose.services[name], name)
  assert.deepEqual([compose.services.postgres.environment.POSTGRES_PASSWORD, compose.services.postgres.environment.POSTGRES_PASSWORD_FILE],
    [undefined, '/run/secrets/postgres-password'], 'the database password is a secret\'s file too')

  const haproxy = deploy('haproxy.cfg')
  assert.match(haproxy, /option httpchk GET \/ready/)
  assert.match(haproxy, /^\s+http-request disable-l7-retry unless METH_GET \|\| METH_OPTIONS$/m, 'only GET, HEAD and OPTIONS are sent again once they may have arrived')
  for (const [name, instance] of instances) {
    for (const variable of Object.keys(instance.environment)) assert.ok(SETTINGS.includes(variable), `${name}: ${variable} is a setting of the service`)
    assert.equal(instance.environment.AUTH, 'all', `${name}: every route behind a token`)
    for (const secret of ['JWT_SECRET', 'DATABASE_URL']) {
      assert.equal(instance.environment[secret], undefined, `${name}: ${secret} is not written in the file`)
      const file = instance.environment[`${secret}_FILE`]
      assert.ok(instance.secrets.some((used: string) => file === `/run/secrets/${used}` && compose.secrets[used].file.startsWith('./secrets/')), `${name}: ${secret}_FILE is a secret's file`)
    }
    const config = loadConfig({ ...instance.environment, ...SECRETS })
    assert.match(haproxy, new RegExp(`server ${name} ${name}:${config.port} check`), `HAProxy checks ${name} on its port`)
    const graceSeconds = Number(/^(\d+)s$/.exec(instance.stop_grace_period)?.[1])
    assert.ok(graceSeconds * 1000 > config.shutdownDrainMs + SHUTDOWN_GRACE_MS, `${name}: stop_grace_period covers drain and grace`)
  }
})

test('HAProxy accepts haproxy.cfg as it is, and starts with no instance up yet, looking them up by name as it runs', {
  skip: installed('haproxy') ? false : 'haproxy is not installed (CI installs Debian\'s package)'
}, () => {
  const haproxy = deploy('haproxy.cfg')
  assert.match(haproxy, /^resolvers compose\n\s+parse-resolv-conf$/m, 'names are looked up again in the compose network\'s DNS')
  assert.match(haproxy, /default-server resolvers compose init-addr last,libc,none/)
  const check = spawnSync('haproxy', ['-c', '-f', fileURLToPath(new URL('../../deploy/haproxy.cfg', import.meta.url))], { encoding: 'utf8' })
  assert.equal(check.status, 0, check.stdout + check.stderr)
})
