/**
 * Rate limits shared by instances through Redis (REDIS_URL), against the Redis that
 * TEST_REDIS_URL names (CI starts the machine's, on 127.0.0.1:6379).
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { randomInt } from 'node:crypto'
import { describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { captureLogs, temporaryFolder, testApp, waitFor } from '../helpers.js'
import { freePort, installed } from '../process.js'
import { startTcpProxy } from '../tcp-proxy.js'

const redisUrl = process.env.TEST_REDIS_URL

/** Waits up to 5 s for as many log lines matching `pattern` as `count`; returns how many there are. */
async function linesMatching (lines: Array<Record<string, any>>, pattern: RegExp, count = 1): Promise<number> {
  const matching = () => lines.filter((line) => pattern.test(line.msg)).length
  await waitFor(() => matching() >= count, 5000, 100)
  return matching()
}

/** A client address of its own for each test, so that runs never share a counter in Redis. */
const someClient = () => `10.${randomInt(256)}.${randomInt(256)}.${randomInt(1, 255)}`

describe('rate limits shared through Redis', { skip: redisUrl === undefined ? 'TEST_REDIS_URL is not set' : false }, () => {
  test('two instances with the same REDIS_URL share one budget per client', async (t) => {
    const env = { RATE_LIMIT_MAX: '3', REDIS_URL: redisUrl as string }
    const instances = [await testApp(t, env), await testApp(t, env)]
    const client = someClient()
    const statuses = []
    for (let i = 0; i < 5; i++) statuses.push((await instances[i % 2]!.inject({ url: '/', remoteAddress: client })).statusCode)
    assert.deepEqual(statuses, [200, 200, 200, 429, 429])
    const answer = await instances[1]!.inject({ url: '/', remoteAddress: someClient() })
    assert.deepEqual([answer.statusCode, answer.headers['ratelimit-remaining']], [200, '2'], 'another client has a budget of its own')
  })

  test('while Redis is unreachable, requests are served without limiting and one warning is logged; limiting comes back by itself', async (t) => {
    const redis = new URL(redisUrl as string)
    const proxy = await startTcpProxy(t, { host: redis.hostname, port: Number(redis.port || 6379) })
    const logs = captureLogs()
    const app = await testApp(t, { RATE_LIMIT_MAX: '2', REDIS_URL: `redis://127.0.0.1:${proxy.port}`, LOG_LEVEL: 'info' }, logs.stream)
    const requests = async (client: string, count: number) => {
      const statuses = []
      for (let i = 0; i < count; i++) statuses.push((await app.inject({ url: '/', remoteAddress: client })).statusCode)
      return statuses
    }
    assert.deepEqual(await requests(someClient(), 3), [200, 200, 429])

    proxy.cut()
    const started = performance.now()
    assert.deepEqual(await requests(someClient(), 20), Array(20).fill(200))
    const ms = performance.now() - started
    assert.ok(ms < 3000, `20 requests took ${ms.toFixed(0)} ms without Redis`)
    await sleep(1500)
    assert.equal(logs.lines.filter((line) => /^Redis unavailable/.test(line.msg)).length, 1, 'one warning, not one a request or a reconnection')

    proxy.restore()
    let limited = false
    for (let attempt = 0; attempt < 50 && !limited; attempt++) {
      await sleep(100)
      limited = (await requests(someClient(), 3))[2] === 429
    }
    assert.ok(limited, 'limiting is back once Redis is')
    assert.equal(await linesMatching(logs.lines, /^Redis available again/), 1)
  })

  test('a Redis connection that stops answering (its server gone without a word, or hung) is replaced within seconds; meanwhile requests are served', async (t) => {
    const redis = new URL(redisUrl as string)
    const proxy = await startTcpProxy(t, { host: redis.hostname, port: Number(redis.port || 6379) })
    const logs = captureLogs()
    const app = await testApp(t, { RATE_LIMIT_MAX: '2', REDIS_URL: `redis://127.0.0.1:${proxy.port}`, LOG_LEVEL: 'info' }, logs.stream)
    const timed = async (client: string) => {
      const started = performance.now()
      const { statusCode } = await app.inject({ url: '/', remoteAddress: client })
      return { statusCode, ms: performance.now() - started }
    }
    assert.equal((await timed(someClient())).statusCode, 200)

    proxy.freeze()
    const stalled = await timed(someClient())
    assert.equal(stalled.statusCode, 200, 'served while Redis does not answer')
    // Limiting again, on a new connection, and no request waiting on the dead one.
    let after: Array<{ statusCode: number, ms: number }> = []
    const back = (answers: typeof after) => answers.map(({ statusCode }) => statusCode).join() === '200,200,429' && answers.every(({ ms }) => ms < 200)
    for (let attempt = 0; attempt < 50 && !back(after); attempt++) {
      await sleep(100)
      const client = someClient()
      after = [await timed(client), await timed(client), await timed(client)]
    }
    assert.ok(back(after), `still waiting on the dead connection 5 s on: ${JSON.stringify(after)}`)
    assert.equal(logs.lines.filter((line) => /^Redis cannot keep the counts now/.test(line.msg)).length, 1)
    assert.equal(await linesMatching(logs.lines, /^Redis available again/), 1)
  })

  test('a Redis that takes no writes (the old primary, once a failover has moved it): one warning, requests served; limiting back once it takes writes', {
    skip: installed('redis-server') ? false : 'redis-server is not installed'
  }, async (t) => {
    const port = await freePort()
    // Its own folder: a replica writes the copy it receives from its primary to disk.
    const server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', temporaryFolder(t)], { stdio: 'ignore' })
    t.after(() => server.kill('SIGKILL'))
    const admin = new Redis(port, '127.0.0.1', { retryStrategy: () => 50 })
    admin.on('error', () => {}) // refused until the server listens; it retries
    t.after(() => admin.disconnect())
    const primary = new URL(redisUrl as string)
    await admin.replicaof(primary.hostname, primary.port || '6379')

    const logs = captureLogs()
    const app = await testApp(t, { RATE_LIMIT_MAX: '2', REDIS_URL: `redis://127.0.0.1:${port}`, LOG_LEVEL: 'info' }, logs.stream)
    const warning = /^Redis cannot keep the counts now/
    assert.equal(await linesMatching(logs.lines, warning), 1)
    assert.match(logs.lines.find((line) => warning.test(line.msg))?.err?.message, /^READONLY/, 'the warning says why')
    const client = someClient()
    const statuses = []
    for (let i = 0; i < 4; i++) statuses.push((await app.inject({ url: '/', remoteAddress: client })).statusCode)
    assert.deepEqual(statuses, [200, 200, 200, 200], 'served, unlimited, while counts cannot be kept')

    await admin.replicaof('NO', 'ONE')
    let limited = false
    for (let attempt = 0; attempt < 50 && !limited; attempt++) {
      await sleep(100)
      const other = someClient()
      limited = [await app.inject({ url: '/', remoteAddress: other }), await app.inject({ url: '/', remoteAddress: other }), await app.inject({ url: '/', remoteAddress: other })][2]!.statusCode === 429
    }
    assert.ok(limited, 'limiting is back once Redis takes writes')
    assert.equal(logs.lines.filter((line) => warning.test(line.msg)).length, 1, 'one warning, however many reconnections')
    assert.equal(await linesMatching(logs.lines, /^Redis available again/), 1)
  })

  test('a service whose Redis is down at start-up starts all the same, unlimited, with one warning', async (t) => {
    const redis = new URL(redisUrl as string)
    const proxy = await startTcpProxy(t, { host: redis.hostname, port: Number(redis.port || 6379) })
    proxy.cut()
    const logs = captureLogs()
    const started = performance.now()
    const app = await testApp(t, { RATE_LIMIT_MAX: '1', REDIS_URL: `redis://127.0.0.1:${proxy.port}`, LOG_LEVEL: 'info' }, logs.stream)
    const client = someClient()
    assert.deepEqual([(await app.inject({ url: '/', remoteAddress: client })).statusCode, (await app.inject({ url: '/', remoteAddress: client })).statusCode], [200, 200])
    assert.ok(performance.now() - started < 3000)
    assert.equal(logs.lines.filter((line) => /^Redis unavailable/.test(line.msg)).length, 1)
  })
})
