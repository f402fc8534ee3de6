import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { captureLogs, rawConnection, temporaryFolder, testApp, waitFor } from '../helpers.js'

test('a request whose client leaves before it is answered writes a line saying so', async (t) => {
  const logs = captureLogs()
  const app = await testApp(t, { LOG_LEVEL: 'info' }, logs.stream)
  await app.listen({ host: '127.0.0.1', port: 0 })
  const { socket, closed } = await rawConnection((app.server.address() as AddressInfo).port)
  // Ten bytes of the hundred announced, then gone.
  socket.write('POST /users HTTP/1.1\r\nHost: x\r\nX-Request-Id: gone-1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"name":"A')
  await sleep(100)
  socket.destroy()
  await closed
  const aborted = () => logs.lines.find((entry) => entry.reqId === 'gone-1')
  await waitFor(() => aborted() !== undefined, 1000)
  const line = aborted()
  assert.equal(line?.msg, 'request aborted: its connection closed before it was answered')
  assert.deepEqual([line?.method, line?.url, line?.route, line?.client], ['POST', '/users', '/users', '127.0.0.1'])
  assert.equal(typeof line?.responseTime, 'number')
})

test('a GET whose client leaves before its answer is all sent writes a line saying so (a request without a body has no stream events of its own to tell it)', async (t) => {
  const logs = captureLogs()
  const staticDir = temporaryFolder(t)
  writeFileSync(join(staticDir, 'large.bin'), Buffer.alloc(64 * 1024 * 1024))
  const app = await testApp(t, { LOG_LEVEL: 'info', STATIC_DIR: staticDir }, logs.stream)
  await app.listen({ host: '127.0.0.1', port: 0 })
  // A client that asks for a file larger than the sockets' buffers, reads none of it, and goes.
  const { socket, closed } = await rawConnection((app.server.address() as AddressInfo).port)
  socket.pause()
  socket.write('GET /large.bin HTTP/1.1\r\nHost: x\r\nX-Request-Id: gone-2\r\n\r\n')
  await sleep(200)
  socket.destroy()
  await closed
  const aborted = () => logs.lines.find((entry) => entry.reqId === 'gone-2')
  await waitFor(() => aborted() !== undefined, 1000)
  assert.equal(aborted()?.msg, 'request aborted: its connection closed before it was answered')
  assert.deepEqual([aborted()?.method, aborted()?.url], ['GET', '/large.bin'])
})
