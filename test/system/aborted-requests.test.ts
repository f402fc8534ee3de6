import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { test, type TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { captureLogs, type Env, rawConnection, temporaryFolder, testApp, waitFor } from '../helpers.js'

/**
 * Sends `request` on a raw connection to an app logging at `info`, closes it after `afterMs`, and
 * returns the log line of the request whose `X-Request-Id` is `id`.
 */
async function lineOfClientThatLeaves (t: TestContext, env: Env, request: string, id: string, afterMs: number, reading = true) {
  const logs = captureLogs()
  const app = await testApp(t, { LOG_LEVEL: 'info', ...env }, logs.stream)
  await app.listen({ host: '127.0.0.1', port: 0 })
  const { socket, closed } = await rawConnection((app.server.address() as AddressInfo).port)
  if (!reading) socket.pause()
  socket.write(request)
  await sleep(afterMs)
  socket.destroy()
  await closed
  const line = () => logs.lines.find((entry) => entry.reqId === id)
  await waitFor(() => line() !== undefined, 1000)
  return line()
}

test('a request whose client leaves before it is answered writes a line saying so', async (t) => {
  // Ten bytes of the hundred announced, then gone.
  const line = await lineOfClientThatLeaves(t, {}, 'POST /users HTTP/1.1\r\nHost: x\r\nX-Request-Id: gone-1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"name":"A', 'gone-1', 100)
  assert.equal(line?.msg, 'request aborted: its connection closed before it was answered')
  assert.deepEqual([line?.method, line?.url, line?.route, line?.client], ['POST', '/users', '/users', '127.0.0.1'])
  assert.equal(typeof line?.responseTime, 'number')
})

test('a GET whose client leaves while its answer is being sent writes a line saying so, with its status (a request without a body has no stream events of its own to tell it)', async (t) => {
  const staticDir = temporaryFolder(t)
  writeFileSync(join(staticDir, 'large.bin'), Buffer.alloc(64 * 1024 * 1024))
  // A client that asks for a file larger than the sockets' buffers, reads none of it, and goes.
  const line = await lineOfClientThatLeaves(t, { STATIC_DIR: staticDir }, 'GET /large.bin HTTP/1.1\r\nHost: x\r\nX-Request-Id: gone-2\r\n\r\n', 'gone-2', 200, false)
  assert.equal(line?.msg, 'connection closed while its answer was being sent')
  assert.deepEqual([line?.method, line?.url, line?.statusCode], ['GET', '/large.bin', 200])
})

test('an events stream its reader closes is logged as an answer being sent, not as a request never answered', async (t) => {
  const line = await lineOfClientThatLeaves(t, {}, 'GET /events HTTP/1.1\r\nHost: x\r\nX-Request-Id: reader-1\r\n\r\n', 'reader-1', 200)
  assert.equal(line?.msg, 'connection closed while its answer was being sent')
  assert.deepEqual([line?.route, line?.statusCode], ['/events', 200])
})
