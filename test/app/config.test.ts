import assert from 'node:assert/strict'
import { generateKeyPairSync } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { ConfigError, describeDatabase, FILE_SETTINGS, loadConfig, readSecretFiles } from '../../src/config/config.js'
import { temporaryFolder } from '../helpers.js'

const STRONG = 'a-test-secret-that-is-long-enough-for-hs256'

test('defaults: port 3000 on all interfaces, SQLite under data/, no auth, any origin', () => {
  const config = loadConfig({})
  assert.equal(config.port, 3000)
  assert.equal(config.host, '0.0.0.0')
  assert.deepEqual(config.database, { dialect: 'sqlite', filename: 'data/app.db' })
  assert.equal(config.auth, 'off')
  assert.equal(config.corsOrigin, true)
  assert.equal(config.logLevel, 'info')
  assert.equal(config.bodyLimit, 1048576)
  assert.equal(config.staticDir, 'public')
  assert.equal(config.production, false)
})

test('values are read from the environment and converted', () => {
  const config = loadConfig({
    PORT: '8080',
    HOST: '127.0.0.1',
    DATABASE_URL: 'postgres://app:secret@db.internal:5432/users',
    CORS_ORIGIN: 'https://a.example.com,https://b.example.com:8443',
    LOG_LEVEL: 'debug',
    BODY_LIMIT: '2048',
    STATIC_DIR: 'assets'
  })
  assert.equal(config.port, 8080)
  assert.equal(config.host, '127.0.0.1')
  assert.deepEqual(config.database, { dialect: 'postgres', connectionString: 'postgres://app:secret@db.internal:5432/users', poolSize: 10 })
  assert.deepEqual(loadConfig({ DATABASE_URL: 'postgres://db/users', DATABASE_POOL_SIZE: '25' }).database,
    { dialect: 'postgres', connectionString: 'postgres://db/users', poolSize: 25 })
  assert.deepEqual(config.corsOrigin, ['https://a.example.com', 'https://b.example.com:8443'])
  assert.equal(config.bodyLimit, 2048)
  assert.deepEqual(loadConfig({ DATABASE_URL: 'sqlite::memory:' }).database, { dialect: 'sqlite', filename: ':memory:' })
})

test('AUTH=writes or all needs JWT_SECRET, for with a generated one no client could get a token', () => {
  for (const mode of ['writes', 'all']) {
    assert.throws(() => loadConfig({ AUTH: mode }), /^ConfigError: JWT_SECRET \(or JWT_ISSUER, JWT_JWKS_URL or JWT_PUBLIC_KEY\) is required when AUTH is on$/)
    assert.equal(loadConfig({ AUTH: mode, JWT_SECRET: STRONG }).auth, mode)
  }
})

test('with AUTH on, in every environment, or in production, JWT_SECRET must be 32 bytes or more and not one character repeated', () => {
  for (const environment of [{ AUTH: 'writes' }, { AUTH: 'all', NODE_ENV: 'development' }, { AUTH: 'writes', NODE_ENV: 'Production' }, { NODE_ENV: 'production' }]) {
    assert.throws(() => loadConfig({ ...environment, JWT_SECRET: 'abc' }), /^ConfigError: JWT_SECRET must be at least 32 bytes: /, JSON.stringify(environment))
    assert.throws(() => loadConfig({ ...environment, JWT_SECRET: 's'.repeat(30) + 't' }), /at least 32 bytes/, '31 bytes')
    assert.throws(() => loadConfig({ ...environment, JWT_SECRET: 's'.repeat(48) }), /^ConfigError: JWT_SECRET must not be one character repeated$/)
    assert.equal(loadConfig({ ...environment, JWT_SECRET: STRONG }).jwt.keys.kind, 'secret')
  }
  assert.deepEqual(loadConfig({ AUTH: 'writes', JWT_SECRET: 'é'.repeat(15) + 'è' }).jwt.keys, { kind: 'secret', secret: 'é'.repeat(15) + 'è', generated: false }, 'bytes, not characters')
  assert.equal(loadConfig({ JWT_SECRET: 'short' }).auth, 'off', 'with AUTH off outside production no route checks a token, so any secret starts')
})

test('an empty variable counts as unset', () => {
  assert.equal(loadConfig({ PORT: '' }).port, 3000)
})

test('a bad value is refused with one line naming the variable', () => {
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ PORT: 'abc' }, /^PORT must be integer \(got "abc"\)$/],
    [{ PORT: '70000' }, /^PORT must be <= 65535/],
    [{ PORT: '-1' }, /^PORT must be >= 0/],
    [{ PORT: '80.5' }, /^PORT must be integer/],
    [{ DATABASE_URL: 'mysql://localhost/db' }, /^DATABASE_URL must be sqlite:<path>/],
    [{ DATABASE_URL: 'sqlite:' }, /^DATABASE_URL must be/],
    [{ DATABASE_URL: 'postgres://' }, /^DATABASE_URL must be/],
    [{ AUTH: 'sometimes' }, /^AUTH must be one of off, writes, all \(got "sometimes"\)$/],
    [{ LOG_LEVEL: 'loud' }, /^LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent/],
    [{ BODY_LIMIT: '0' }, /^BODY_LIMIT must be >= 1/],
    [{ DATABASE_POOL_SIZE: '0' }, /^DATABASE_POOL_SIZE must be >= 1/],
    [{ BODY_LIMIT: '1MB' }, /^BODY_LIMIT must be integer/],
    [{ CORS_ORIGIN: 'example.com' }, /^CORS_ORIGIN must be a comma-separated list of origins/],
    [{ CORS_ORIGIN: 'https://example.com/path' }, /^CORS_ORIGIN /],
    [{ TRUST_PROXY: 'yes' }, /^TRUST_PROXY must be off, a hop count from 1 to 99, or a comma-separated list of addresses and networks/],
    [{ TRUST_PROXY: '10.0.0.0/33' }, /^TRUST_PROXY must be/],
    [{ TRUST_PROXY: '0' }, /^TRUST_PROXY must be/]
  ]
  for (const [env, message] of cases) {
    assert.throws(() => loadConfig(env), (error: Error) => {
      assert.ok(error instanceof ConfigError)
      assert.match(error.message, message)
      assert.doesNotMatch(error.message, /\n/)
      return true
    }, JSON.stringify(env))
  }
})

test('SHUTDOWN_DRAIN_MS is 5000 in production and 0 elsewhere, unless set', () => {
  assert.equal(loadConfig({}).shutdownDrainMs, 0)
  assert.equal(loadConfig({ NODE_ENV: 'production', JWT_SECRET: STRONG }).shutdownDrainMs, 5000)
  assert.equal(loadConfig({ NODE_ENV: 'production', JWT_SECRET: STRONG, SHUTDOWN_DRAIN_MS: '0' }).shutdownDrainMs, 0)
  assert.equal(loadConfig({ SHUTDOWN_DRAIN_MS: '250' }).shutdownDrainMs, 250)
})

test('TRUST_PROXY is off by default, or a hop count, or addresses and networks', () => {
  assert.equal(loadConfig({}).trustProxy, false)
  assert.equal(loadConfig({ TRUST_PROXY: '2' }).trustProxy, 2)
  assert.deepEqual(loadConfig({ TRUST_PROXY: '10.0.0.0/8, 127.0.0.1,::1' }).trustProxy, ['10.0.0.0/8', '127.0.0.1', '::1'])
})

test('a database URL, a Redis URL or a secret is never echoed back in a refusal, for it may hold a password', () => {
  const refusals: Array<Record<string, string>> = [
    { DATABASE_URL: 'mysql://root:hunter2@db/x' },
    { DATABASE_URL: 'postgres://root:hunter2@' },
    { DATABASE_URL: 'postgresql://root:hunter2@:5432/x' },
    { DATABASE_URL: 'postgres:root:hunter2@db/x' },
    { DATABASE_URL: 'hunter2' },
    { DATABASE_URL: 'postgres://root:hunter2@db/x', DATABASE_POOL_SIZE: '0' },
    { REDIS_URL: 'http://:hunter2@redis:6379', RATE_LIMIT_MAX: '10' },
    { REDIS_URL: 'hunter2', RATE_LIMIT_MAX: '10' },
    { NODE_ENV: 'production', JWT_SECRET: 'hunter2' }
  ]
  for (const environment of refusals) {
    assert.throws(() => loadConfig(environment), (error: Error) => error instanceof ConfigError && !error.message.includes('hunter2'), JSON.stringify(environment))
  }
})

test('a secret is read from the file its *_FILE setting names, without the line break that ends the file', (t) => {
  const folder = temporaryFolder(t)
  writeFileSync(join(folder, 'jwt-secret'), `${STRONG}\n`)
  writeFileSync(join(folder, 'database-url'), 'postgres://app:secret@db:5432/users\r\n')
  const environment = readSecretFiles({ JWT_SECRET_FILE: join(folder, 'jwt-secret'), DATABASE_URL_FILE: join(folder, 'database-url'), AUTH: 'all' })
  const config = loadConfig(environment)
  assert.deepEqual(config.jwt.keys, { kind: 'secret', secret: STRONG, generated: false })
  assert.deepEqual(config.database, { dialect: 'postgres', connectionString: 'postgres://app:secret@db:5432/users', poolSize: 10 })
  assert.deepEqual(FILE_SETTINGS.sort(), ['DATABASE_URL_FILE', 'JWT_SECRET_FILE', 'REDIS_URL_FILE', 'WEBHOOK_SECRET_FILE', 'WEBHOOK_URLS_FILE'])
})

test('a *_FILE setting beside its variable, or naming a file that cannot be read, is refused, naming the setting and never the secret', (t) => {
  const folder = temporaryFolder(t)
  writeFileSync(join(folder, 'jwt-secret'), STRONG)
  assert.throws(() => readSecretFiles({ JWT_SECRET: STRONG, JWT_SECRET_FILE: join(folder, 'jwt-secret') }),
    new ConfigError('JWT_SECRET and JWT_SECRET_FILE are both set: set one of them'))
  const missing = join(folder, 'missing')
  assert.throws(() => readSecretFiles({ REDIS_URL_FILE: missing }),
    new ConfigError(`REDIS_URL_FILE names a file that cannot be read (${missing}): ENOENT`))
  assert.deepEqual(readSecretFiles({ JWT_SECRET_FILE: '' }), { JWT_SECRET_FILE: '' }, 'an empty setting counts as unset')
})

test('MIGRATE is on unless set off', () => {
  assert.equal(loadConfig({}).migrate, true)
  assert.equal(loadConfig({ MIGRATE: 'off' }).migrate, false)
})

test('production requires JWT_SECRET or public keys; elsewhere a random per-process secret is generated', () => {
  assert.throws(() => loadConfig({ NODE_ENV: 'production' }), /^ConfigError: JWT_SECRET \(or JWT_ISSUER, JWT_JWKS_URL or JWT_PUBLIC_KEY\) is required when NODE_ENV=production$/)
  assert.deepEqual(loadConfig({ NODE_ENV: 'production', JWT_SECRET: STRONG }).jwt.keys, { kind: 'secret', secret: STRONG, generated: false })
  assert.equal(loadConfig({ NODE_ENV: 'production', JWT_JWKS_URL: 'https://idp.example/jwks' }).jwt.keys.kind, 'jwks')

  const first = loadConfig({}).jwt.keys
  const second = loadConfig({}).jwt.keys
  assert.ok(first.kind === 'secret' && second.kind === 'secret')
  assert.equal(first.generated, true)
  assert.ok(first.secret.length >= 32)
  assert.notEqual(first.secret, second.secret)
})

test('public keys: an issuer to discover, a JWKS URL or a PEM file, with algorithms of public keys only, and never beside JWT_SECRET', (t) => {
  const jwks = loadConfig({ AUTH: 'writes', JWT_JWKS_URL: 'https://idp.example/realms/x/certs', JWT_ISSUER: 'https://idp.example', JWT_AUDIENCE: 'users-api, admin' }).jwt
  assert.deepEqual(jwks, {
    keys: { kind: 'jwks', url: 'https://idp.example/realms/x/certs', algorithms: ['RS256', 'ES256', 'EdDSA', 'Ed25519'] },
    types: ['at+jwt'],
    issuer: 'https://idp.example',
    audience: ['users-api', 'admin'],
    maxLifetimeMs: 86_400_000,
    scopeClaims: ['scope', 'scp']
  })
  assert.deepEqual(loadConfig({ AUTH: 'writes', JWT_ISSUER: 'https://idp.example/', JWT_ALGORITHMS: 'Ed25519' }).jwt.keys,
    { kind: 'discovery', issuer: 'https://idp.example/', algorithms: ['Ed25519'] }, 'the issuer alone is discovered')
  assert.deepEqual(loadConfig({ NODE_ENV: 'production', JWT_ISSUER: 'https://idp.example' }).jwt.keys.kind, 'discovery')
  assert.deepEqual(loadConfig({ JWT_ISSUER: 'https://idp.example' }).jwt.keys.kind, 'secret', 'with AUTH off outside production nothing is fetched')
  assert.deepEqual(loadConfig({ AUTH: 'writes', JWT_SECRET: STRONG }).jwt.types, ['at+jwt', 'jwt'])
  assert.deepEqual(loadConfig({ AUTH: 'writes', JWT_SECRET: STRONG, JWT_TYP: 'JWT, application/AT+JWT' }).jwt.types, ['jwt', 'at+jwt'])
  assert.equal(loadConfig({ JWT_MAX_LIFETIME: '15m' }).jwt.maxLifetimeMs, 900_000)
  const folder = temporaryFolder(t)
  const pem = join(folder, 'key.pem')
  writeFileSync(pem, generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }))
  assert.equal(loadConfig({ AUTH: 'all', JWT_PUBLIC_KEY: pem, JWT_ALGORITHMS: 'EdDSA' }).jwt.keys.kind, 'public-key')
  const secretPem = join(folder, 'private.pem')
  writeFileSync(secretPem, generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }))

  const refusals: Array<[Record<string, string>, RegExp]> = [
    [{ JWT_JWKS_URL: 'https://a/j', JWT_PUBLIC_KEY: pem }, /^set JWT_JWKS_URL or JWT_PUBLIC_KEY, not both$/],
    [{ JWT_JWKS_URL: 'https://a/j', JWT_SECRET: STRONG }, /^JWT_SECRET is not used when tokens are verified with public keys/],
    [{ JWT_JWKS_URL: 'https://a/j', JWT_ALGORITHMS: 'RS256,HS256' }, /^JWT_ALGORITHMS must list algorithms of public keys, from RS256, .* \(got HS256\)$/],
    [{ JWT_JWKS_URL: 'https://a/j', JWT_ALGORITHMS: 'none' }, /\(got none\)$/],
    [{ JWT_SECRET: STRONG, JWT_ALGORITHMS: 'RS256' }, /^JWT_ALGORITHMS is for public keys/],
    [{ JWT_JWKS_URL: 'ftp://a/j' }, /^JWT_JWKS_URL must match pattern/],
    [{ JWT_PUBLIC_KEY: join(folder, 'missing.pem') }, /^JWT_PUBLIC_KEY cannot be read: ENOENT/],
    [{ JWT_PUBLIC_KEY: secretPem }, /^JWT_PUBLIC_KEY must be a PEM file holding a public key/],
    [{ JWT_MAX_LIFETIME: 'forever' }, /^JWT_MAX_LIFETIME must be a duration/],
    [{ JWT_MAX_LIFETIME: '100000d' }, /^JWT_MAX_LIFETIME must be at most 30d \(got "100000d"\)$/],
    [{ JWT_MAX_LIFETIME: '721h' }, /^JWT_MAX_LIFETIME must be at most 30d/],
    [{ JWT_SCOPE_CLAIMS: 'scope,' }, /^JWT_SCOPE_CLAIMS must match pattern/],
    [{ AUTH_SCOPES: 'on' }, /^AUTH_SCOPES=on needs AUTH=writes or AUTH=all/],
    [{ AUTH: 'writes', JWT_ISSUER: 'acme' }, /^JWT_ISSUER must be an http\(s\) URL for its keys to be discovered/],
    [{ METRICS_PORT: '3000' }, /^METRICS_PORT must differ from PORT/]
  ]
  for (const [environment, message] of refusals) {
    assert.throws(() => loadConfig(environment), (error: Error) => error instanceof ConfigError && message.test(error.message), JSON.stringify(environment))
  }
})

test('a database URL as logged shows no credential: the password and every credential-bearing parameter are masked', () => {
  const shown = describeDatabase(loadConfig({
    DATABASE_URL: 'postgres://app:pw1@db.internal:5432/users?password=pw2&sslpassword=pw3&sslkey=/keys/pw4.key&sslmode=verify-full&application_name=api'
  }).database)
  for (const secret of ['pw1', 'pw2', 'pw3', 'pw4']) assert.ok(!shown.includes(secret), `${secret} in ${shown}`)
  assert.equal(shown, 'postgres://app:***@db.internal:5432/users?password=***&sslpassword=***&sslkey=***&sslmode=verify-full&application_name=api')
})
