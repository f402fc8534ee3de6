import assert from 'node:assert/strict'
import { once } from 'node:events'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import { test, type TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { askWhileUnavailable, listeningApp, postJsonOver, rawConnection, rawRequest, waitFor } from '../helpers.js'
import { fromSource, serverUnderOpenFileLimit, startService } from '../process.js'

const timeouts = { HEADERS_TIMEOUT_MS: '1000', REQUEST_TIMEOUT_MS: '2000', DATABASE_URL: 'sqlite::memory:' }

/**
 * The lines a service wrote about requests it refused before any route saw them, once there
 * are `count` of them or 2 s have passed: a line may reach standard output after its answer.
 */
async function refusals (service: { stdout: string[] }, count: number): Promise<Array<Record<string, any>>> {
  const lines = () => service.stdout.map((line) => JSON.parse(line)).filter((line) => line.msg === 'request refused before it reached a route')
  await waitFor(() => lines().length >= count, 2000)
  return lines()
}

test('headers trickled byte by byte are cut off with a JSON 408 once HEADERS_TIMEOUT_MS has passed', async (t) => {
  const service = await startService(t, timeouts)
  const { socket, closed } = await rawConnection(service.port)
  const started = Date.now()
  const request = 'GET /users HTTP/1.1\r\nHost: localhost\r\nX-Slow: ' + 'a'.repeat(100)
  let sent = 0
  const trickle = setInterval(() => { if (!socket.destroyed && sent < request.length) socket.write(request[sent++] as string) }, 50)
  t.after(() => clearInterval(trickle))

  const received = await closed
  const seconds = (Date.now() - started) / 1000
  assert.ok(seconds >= Number(timeouts.HEADERS_TIMEOUT_MS) / 1000, `cut off after ${seconds} s, before HEADERS_TIMEOUT_MS`)
  assert.ok(seconds < 5, `cut off after ${seconds} s`)
  assert.match(received, /^HTTP\/1\.1 408 Request Timeout\r\n/)
  assert.match(received, /\r\n\r\n\{"error":"Request timed out/)
})

test('a body trickled byte by byte is cut off once REQUEST_TIMEOUT_MS has passed', async (t) => {
  const service = await startService(t, timeouts)
  const { socket, closed } = await rawConnection(service.port)
  const started = Date.now()
  socket.write('POST /users HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n')
  const trickle = setInterval(() => { if (!socket.destroyed) socket.write(' ') }, 50)
  t.after(() => clearInterval(trickle))

  const received = await closed
  const seconds = (Date.now() - started) / 1000
  assert.ok(seconds >= Number(timeouts.REQUEST_TIMEOUT_MS) / 1000, `cut off after ${seconds} s, before REQUEST_TIMEOUT_MS`)
  assert.ok(seconds < 6, `cut off after ${seconds} s`)
  assert.match(received, /^HTTP\/1\.1 408 Request Timeout\r\n/)
})

const statusesIn = (received: string) => [...received.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((match) => Number(match[1]))

test('a client that sends its whole body before it reads gets the 413 of a body over BODY_LIMIT; the rest is dropped, and the connection takes the next request', async (t) => {
  const service = await startService(t, timeouts)
  const client = await rawConnection(service.port)
  // As Python's http.client, Java's HttpURLConnection and Node's http.request send: all of it, then read.
  const body = Buffer.alloc(20 * 1024 * 1024, ' ')
  client.socket.write(`POST /users HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`)
  await new Promise<void>((resolve, reject) => { client.socket.write(body, (error) => { if (error) reject(error); else resolve() }) })
  client.socket.write('GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n')
  const received = await client.closed
  assert.equal(client.wasReset(), false)
  assert.deepEqual(statusesIn(received), [413, 200])
  assert.match(received, /\{"error":"Request body is too large","code":"body_too_large"\}HTTP\/1\.1 200 /)
})

test('a body still arriving REQUEST_TIMEOUT_MS after its request was answered: the connection is closed, with no second answer', async (t) => {
  const service = await startService(t, timeouts)
  const { socket, closed } = await rawConnection(service.port)
  const started = Date.now()
  socket.write('POST /users HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n')
  socket.write(Buffer.alloc(2 * 1024 * 1024, ' '))
  const trickle = setInterval(() => { if (!socket.destroyed) socket.write(' ') }, 50)
  t.after(() => clearInterval(trickle))

  const received = await closed
  const seconds = (Date.now() - started) / 1000
  assert.ok(seconds > 1.5 && seconds < 6, `closed after ${seconds} s`)
  assert.deepEqual(statusesIn(received), [413], 'a 408 after it would be read as the answer to the client\'s next request')
})

test('oversized headers get a JSON 431', async (t) => {
  const service = await startService(t, timeouts)
  const { socket, closed } = await rawConnection(service.port)
  socket.write(`GET / HTTP/1.1\r\nHost: localhost\r\nX-Big: ${'x'.repeat(20_000)}\r\n\r\n`)
  const received = await closed
  assert.match(received, /^HTTP\/1\.1 431 Request Header Fields Too Large\r\n/)
  assert.match(received, /\{"error":"Request header fields are too large","code":"headers_too_large"\}$/)
})

test('garbage that is not HTTP gets a JSON 400, a log line, and the service carries on', async (t) => {
  const service = await startService(t, timeouts)
  const { socket, closed } = await rawConnection(service.port)
  socket.write('\x16\x03\x01\x02\x00 not http at all\r\n\r\n')
  assert.match(await closed, /^HTTP\/1\.1 400 Bad Request\r\n[\s\S]*\{"error":"Malformed HTTP request","code":"malformed_http"\}$/)
  assert.equal((await rawRequest(service.port, { path: '/health' })).statusCode, 200)
  assert.deepEqual((await refusals(service, 1)).map(({ statusCode, error, client }) => [statusCode, error, client]), [[400, 'Malformed HTTP request', '127.0.0.1']], 'a line tells of it')
})

test('a method Node does not know is the JSON 404 of any unknown route, not a malformed request', async (t) => {
  const service = await startService(t, timeouts)
  for (const path of ['/health', '/users', '/no/such/route']) {
    const { socket, closed } = await rawConnection(service.port)
    socket.write(`FOO ${path} HTTP/1.1\r\nHost: localhost\r\n\r\n`)
    assert.match(await closed, /^HTTP\/1\.1 404 Not Found\r\n[\s\S]*\{"error":"Route not found","code":"route_not_found"\}$/, path)
  }
  assert.equal((await rawRequest(service.port, { path: '/health' })).statusCode, 200)
})

test('an Expect other than 100-continue is a JSON 417, and the connection serves the next request', async (t) => {
  const service = await startService(t, timeouts)
  const { socket, closed } = await rawConnection(service.port)
  socket.write('GET /users HTTP/1.1\r\nHost: localhost\r\nExpect: something-else\r\n\r\n' +
    'GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n')
  const received = await closed
  assert.match(received, /^HTTP\/1\.1 417 Expectation Failed\r\n[\s\S]*content-type: application\/json; charset=utf-8\r\n/i)
  assert.match(received, /\r\n\r\n\{"error":"Expectation Failed: the only expectation met is Expect: 100-continue","code":"expectation_failed"\}HTTP\/1\.1 200 OK\r\n/)
  assert.deepEqual((await refusals(service, 1)).map(({ statusCode }) => statusCode), [417], 'a line tells of it')
})

test('a request with a Content-Type and no framing for a body (no Content-Length, no Transfer-Encoding) is answered as one with an empty body, on HTTP/1.1 and 1.0', async (t) => {
  const service = await startService(t, timeouts)
  for (const [requestLine, host, status, error, code] of [
    ['POST /users HTTP/1.1', 'Host: localhost\r\n', 400, 'Body is not valid JSON: it is empty', 'empty_json'],
    ['POST /users HTTP/1.0', '', 400, 'Body is not valid JSON: it is empty', 'empty_json'],
    ['POST /no/such/route HTTP/1.0', '', 404, 'Route not found', 'route_not_found']
  ] as const) {
    const { socket, closed } = await rawConnection(service.port)
    socket.write(`${requestLine}\r\n${host}Content-Type: application/json\r\nConnection: close\r\n\r\n`)
    const received = await Promise.race([closed, sleep(3000).then(() => 'no answer in 3 s')])
    assert.deepEqual(statusesIn(received), [status], `${requestLine}: ${received}`)
    assert.ok(received.endsWith(JSON.stringify({ error, code })), requestLine)
  }
})

test('Expect: 100-continue: a request answered before its body is read (over BODY_LIMIT, an unknown route) gets no 100 and its connection closes, so the body is never sent', async (t) => {
  const service = await startService(t, timeouts)
  for (const path of ['/users', '/no/such/route']) {
    const { socket, closed } = await rawConnection(service.port)
    socket.write(`POST ${path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 20000000\r\nExpect: 100-continue\r\n\r\n`)
    const received = await closed
    assert.deepEqual(statusesIn(received), [path === '/users' ? 413 : 404], path)
    assert.match(received, /\r\nConnection: close\r\n/i, path)
  }
})

test('Expect: 100-continue to a route that needs a token, sent without one: 401 and no 100, so the body is never sent', async (t) => {
  const service = await startService(t, { ...timeouts, AUTH: 'writes', JWT_SECRET: 'a-test-secret-that-is-long-enough-for-hs256' })
  const { socket, closed } = await rawConnection(service.port)
  socket.write('POST /users HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n')
  const received = await closed
  assert.deepEqual(statusesIn(received), [401])
})

test('Expect: 100-continue: a body the service will read gets 100 Continue first, then its answer; a request without a body gets its 100 at once and keeps its connection', async (t) => {
  const service = await startService(t, timeouts)
  const client = await rawConnection(service.port)
  const body = '{"name":"Ada","email":"ada@example.com"}'
  client.socket.write(`POST /users HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nExpect: 100-continue\r\n\r\n`)
  await waitFor(() => client.received().includes('HTTP/1.1 100 Continue\r\n\r\n'), 2000)
  client.socket.write(body)
  await waitFor(() => client.received().endsWith(body), 2000)
  client.socket.write('GET / HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\n\r\nGET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n')
  assert.deepEqual(statusesIn(await client.closed), [100, 201, 100, 200, 200])
})

test('CONNECT is the JSON 404 of any unknown route, and an abrupt client costs nothing', async (t) => {
  const service = await startService(t, timeouts)
  for (const target of ['example.com:443', '/users']) {
    const { socket, closed } = await rawConnection(service.port)
    socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: localhost\r\n\r\n`)
    assert.match(await closed, /^HTTP\/1\.1 404 Not Found\r\n[\s\S]*\r\n\r\n\{"error":"Route not found","code":"route_not_found"\}$/, target)
  }
  assert.deepEqual((await refusals(service, 2)).map(({ statusCode, error }) => [statusCode, error]), [[404, 'Route not found'], [404, 'Route not found']], 'a line tells of each')
  // Reset by the client as soon as it is sent: the service lives on.
  for (let i = 0; i < 20; i++) {
    const socket = net.connect(service.port, '127.0.0.1')
    socket.on('error', () => {})
    await once(socket, 'connect')
    socket.write('CONNECT example.com:443 HTTP/1.1\r\nHost: localhost\r\n\r\n')
    socket.resetAndDestroy()
  }
  await sleep(100)
  assert.equal((await rawRequest(service.port, { path: '/health' })).statusCode, 200)
})

test('an HTTP/1.1 request without Host is a JSON 400 with a request id; HTTP/1.0 needs none', async (t) => {
  const service = await startService(t, timeouts)
  for (const path of ['/users', '/health']) {
    const { socket, closed } = await rawConnection(service.port)
    socket.write(`GET ${path} HTTP/1.1\r\nConnection: close\r\n\r\n`)
    const received = await closed
    assert.match(received, /^HTTP\/1\.1 400 Bad Request\r\n[\s\S]*x-request-id: [\w-]+\r\n/i, path)
    assert.match(received, /\r\n\r\n\{"error":"Host header is required in an HTTP\/1\.1 request","code":"host_required"\}$/, path)
  }
  const { socket, closed } = await rawConnection(service.port)
  socket.write('GET /health HTTP/1.0\r\n\r\n')
  assert.match(await closed, /^HTTP\/1\.1 200 OK\r\n[\s\S]*\{"status":"ok"\}$/)
})

test('two thousand idle connections do not stop a new client from being served', async (t) => {
  const service = await startService(t, timeouts)
  const idle: net.Socket[] = []
  t.after(() => { for (const socket of idle) socket.destroy() })
  for (let i = 0; i < 2000; i++) {
    const socket = net.connect(service.port, '127.0.0.1')
    socket.on('error', () => {})
    idle.push(socket)
    if (i % 200 === 199) await sleep(20)
  }
  await Promise.all(idle.map((socket) => socket.readyState === 'open' ? undefined : once(socket, 'connect')))
  // Half of them start a request and stop mid-way, the rest send nothing at all.
  for (const socket of idle.slice(0, 1000)) socket.write('GET / HTTP/1.1\r\nHost: local')

  for (let i = 0; i < 5; i++) {
    const response = await rawRequest(service.port, { path: '/' })
    assert.equal(response.statusCode, 200)
  }
  const fresh = await postJsonOver(service.port, '/users', { name: 'Ada', email: 'ada@example.com' })
  assert.equal(fresh.statusCode, 201)
})

test('a client that aborts its upload is not logged as a database outage', async (t) => {
  const service = await startService(t, timeouts)
  const startUpLines = service.stdout.length
  const { socket, closed } = await rawConnection(service.port)
  socket.write('POST /users HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"name":')
  await sleep(100)
  socket.destroy()
  await closed
  // The service is still there and logs what it logs about the abort before this answer.
  assert.equal((await rawRequest(service.port, { path: '/health' })).statusCode, 200)
  await sleep(100)
  const lines = service.stdout.slice(startUpLines).map((line) => JSON.parse(line) as { msg: string, level: number })
  assert.deepEqual(lines.filter((line) => /database/i.test(line.msg)), [], 'no line speaks of the database')
  assert.deepEqual(lines.filter((line) => line.level >= 40), [], 'nothing is logged as a warning or worse')
})

/** How many descriptors a process has open, where Linux's /proc tells. */
const openDescriptors = (pid: number) => readdirSync(`/proc/${pid}/fd`).length
const noProc = existsSync('/proc/self/fd') ? false : 'no /proc/<pid>/fd here to count descriptors'

/** Connections that send nothing and read nothing, destroyed when the test ends. */
function silentConnections (t: TestContext, port: number, count: number): net.Socket[] {
  const sockets = Array.from({ length: count }, () => {
    const socket = net.connect(port, '127.0.0.1')
    socket.on('error', () => {})
    socket.pause()
    return socket
  })
  t.after(() => { for (const socket of sockets) socket.destroy() })
  return sockets
}

test('a connection that sends nothing and reads nothing is closed, its descriptor freed, once HEADERS_TIMEOUT_MS has passed', { skip: noProc }, async (t) => {
  const service = await startService(t, timeouts)
  const pid = service.child.pid as number
  const before = openDescriptors(pid)
  const silent = silentConnections(t, service.port, 50)
  await Promise.all(silent.map(async (socket) => await once(socket, 'connect')))
  await sleep(200)
  assert.ok(openDescriptors(pid) >= before + 50, 'the service holds a descriptor for each')
  await sleep(Number(timeouts.HEADERS_TIMEOUT_MS) + 1500)
  assert.ok(openDescriptors(pid) <= before + 2, `${openDescriptors(pid) - before} descriptors are still held`)
})

/** Connections each in the middle of sending a request's headers, destroyed when the test ends. */
async function sendingConnections (t: TestContext, port: number, count: number): Promise<net.Socket[]> {
  const sockets = silentConnections(t, port, count)
  await Promise.all(sockets.map(async (socket) => {
    await once(socket, 'connect')
    socket.write('GET /health HTTP/1.1\r\nHost: localhost\r\n')
  }))
  return sockets
}

/** GET /health on a new connection: its status, or the error that kept it from one. */
const healthOn = async (port: number) => await new Promise<number | string>((resolve) => {
  http.get({ host: '127.0.0.1', port, path: '/health', agent: false }, (response) => {
    response.resume()
    resolve(response.statusCode ?? 0)
  }).on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'))
})

test('under `ulimit -n 1024`, 1,100 silent connections do not keep a new client out: the oldest silent ones make room, those still sending a request stay', { skip: noProc }, async (t) => {
  const { nodeArgs, command } = serverUnderOpenFileLimit(1024)
  const service = await startService(t, { DATABASE_URL: 'sqlite::memory:' }, undefined, nodeArgs, command)
  const sending = await sendingConnections(t, service.port, 5)
  // Slowly, a header line at a time: never a second without a byte, so never stalled.
  const trickle = setInterval(() => { for (const socket of sending) socket.write('X-Slow: 1\r\n') }, 300)
  t.after(() => { clearInterval(trickle) })
  const silent = silentConnections(t, service.port, 1100)
  await Promise.all(silent.map(async (socket) => await Promise.race([once(socket, 'connect'), once(socket, 'close')])))
  // A connection is silent once it has sent nothing for a second; room is then made ahead of clients.
  await sleep(1500)
  // Asked again at once if refused, as a health check's retries would: a busy machine may fill the
  // kernel's queue of connections not yet taken.
  const askedAt = performance.now()
  let status: number | string
  do status = await healthOn(service.port)
  while (status !== 200 && performance.now() - askedAt < 3000)
  assert.equal(status, 200, 'a new client is served')
  assert.ok(performance.now() - askedAt < 2000, `answered in ${Math.round(performance.now() - askedAt)} ms`)

  // Those that were sending a request, the oldest of all, were never closed: they finish and are answered.
  clearInterval(trickle)
  const answers = sending.map((socket) => {
    let received = ''
    socket.on('data', (chunk: Buffer) => { received += chunk.toString() })
    socket.resume()
    socket.write('\r\n')
    return () => received
  })
  await waitFor(() => answers.every((received) => received().includes('{"status":"ok"}')), 2000)
  assert.deepEqual(answers.map((received) => received().split('\r\n')[0]), Array(5).fill('HTTP/1.1 200 OK'))
  const closing = service.stdout.map((line) => JSON.parse(line)).filter((line) => line.msg === 'closed connections holding a place unused, to make room for new ones')
  assert.ok(closing.length > 0, 'silent connections were closed')
  assert.ok(closing.every((line) => line.silent === line.closed), 'every connection closed was a silent one')
})

/** A newcomer's GET /health, tried once, on a connection of its own: its status, and how long it took. */
async function newcomerOnce (port: number): Promise<{ status: number | string, ms: number }> {
  const askedAt = performance.now()
  const status = await healthOn(port)
  return { status, ms: performance.now() - askedAt }
}

test('under `ulimit -n 1024`, 950 tokenless streams of GET /events from 119 addresses are bounded, and a new client, tried once, is answered within 2 s', { skip: noProc }, async (t) => {
  const { nodeArgs, command } = serverUnderOpenFileLimit(1024)
  const service = await startService(t, { DATABASE_URL: 'sqlite::memory:', AUTH: 'writes', JWT_SECRET: 'a-stream-flood-secret-of-at-least-32-bytes' }, undefined, nodeArgs, command)
  const statuses = new Map<number | string, number>()
  const requests: http.ClientRequest[] = []
  let streaming = 0
  t.after(() => { for (const request of requests) request.destroy() })
  await Promise.all(Array.from({ length: 950 }, async (_, i) => {
    const request = http.get({ host: '127.0.0.1', port: service.port, path: '/events', localAddress: `127.0.0.${2 + (i % 119)}`, agent: false })
    requests.push(request)
    const status = await new Promise<number | string>((resolve) => {
      request.on('response', (response) => {
        resolve(response.statusCode ?? 0)
        if (response.statusCode !== 200) response.resume()
        else { streaming++; response.on('close', () => { streaming-- }) }
      })
      request.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'))
    })
    statuses.set(status, (statuses.get(status) ?? 0) + 1)
  }))
  // MAX_CONNECTIONS is 1024 - 128 = 896, and streams at most half of it. Streams closed to make
  // room free their places for later ones, so more than that may have been answered 200.
  await sleep(200)
  assert.ok(streaming <= 448, `streams open: ${streaming}, answers: ${JSON.stringify([...statuses])}`)
  assert.ok((statuses.get(503) ?? 0) > 0, 'those past EVENTS_MAX_READERS are refused')
  const newcomer = await newcomerOnce(service.port)
  assert.equal(newcomer.status, 200, 'a new client is served at once')
  assert.ok(newcomer.ms < 2000, `answered in ${Math.round(newcomer.ms)} ms`)
  assert.equal(service.child.exitCode, null)
})

for (const kind of ['silent', 'kept alive after an answer']) {
  test(`under \`ulimit -n 1024\`, right after 1,100 connections (${kind}) open at once, a new client tried once is answered within 2 s`, { skip: noProc }, async (t) => {
    const { nodeArgs, command } = serverUnderOpenFileLimit(1024)
    const service = await startService(t, { DATABASE_URL: 'sqlite::memory:' }, undefined, nodeArgs, command)
    const sockets = silentConnections(t, service.port, 1100)
    await Promise.all(sockets.map(async (socket) => {
      await Promise.race([once(socket, 'connect'), once(socket, 'close')])
      if (kind !== 'silent' && !socket.destroyed) socket.write('GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n')
    }))
    const newcomer = await newcomerOnce(service.port)
    assert.equal(newcomer.status, 200, 'a new client is served without retrying')
    assert.ok(newcomer.ms < 2000, `answered in ${Math.round(newcomer.ms)} ms`)
    const closing = service.stdout.map((line) => JSON.parse(line)).filter((line) => line.msg === 'closed connections holding a place unused, to make room for new ones')
    assert.ok(closing.length > 0, 'connections holding a place were closed')
  })
}

/** How a connection of a flood begins, and then holds its place. */
const FLOOD_KINDS: Record<string, (socket: net.Socket) => void> = {
  silent: () => {},
  'halfway through its headers': (socket) => { socket.write('GET /health HTTP/1.1\r\nHost: localhost\r\n') },
  'one byte into a 100-byte body': (socket) => { socket.write('POST /users HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{') },
  'kept alive after an answer': (socket) => { socket.write('GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n') }
}

for (const kinds of [Object.keys(FLOOD_KINDS), ['halfway through its headers', 'one byte into a 100-byte body']]) {
  test(`under \`ulimit -n 1024\`, 1,000 connections (${kinds.join(', ')}) re-opened as they close keep a new client out for under 2 s`, { skip: noProc }, async (t) => {
    const { nodeArgs, command } = serverUnderOpenFileLimit(1024)
    const service = await startService(t, { DATABASE_URL: 'sqlite::memory:' }, undefined, nodeArgs, command)
    let flooding = true
    const held = new Set<net.Socket>()
    const hold = (kind: string) => {
      if (!flooding) return
      const socket = net.connect(service.port, '127.0.0.1')
      held.add(socket)
      socket.on('error', () => {})
      socket.on('connect', () => { FLOOD_KINDS[kind]!(socket) })
      socket.on('close', () => { held.delete(socket); setImmediate(hold, kind) })
    }
    t.after(() => { flooding = false; for (const socket of held) socket.destroy() })
    for (let i = 0; i < 1000; i++) hold(kinds[i % kinds.length]!)
    await sleep(2500)

    // Each new client asks again at once when refused, as a health check's retries would.
    const waits: number[] = []
    for (let client = 0; client < 10; client++) {
      const arrivedAt = performance.now()
      let status: number | string
      do status = await healthOn(service.port)
      while (status !== 200 && performance.now() - arrivedAt < 3000)
      assert.equal(status, 200, `client ${client}`)
      waits.push(performance.now() - arrivedAt)
      await sleep(100)
    }
    // Fresh partial requests may hold every place until they have stalled, a second after their
    // last byte, and the next check has seen it.
    assert.ok(waits.every((wait) => wait < 2000), `served after ${waits.map(Math.round).join(', ')} ms`)
    const closing = service.stdout.map((line) => JSON.parse(line)).filter((line) => line.msg === 'closed connections holding a place unused, to make room for new ones')
    assert.ok(closing.length > 0)
    // Besides stalled and silent ones, a connection answered and closing (a 408, a health check's)
    // waits until its client has hung up, longer on a busy machine: it holds its place unused too.
    assert.ok(closing.every((line) => line.streams === 0), 'no connection with a request being answered was there to close')
    if (!kinds.includes('silent')) assert.ok(closing.some((line) => line.stalled + line.silent > 0), 'stalled ones, and ones not sending yet, were closed')
    assert.equal(service.child.exitCode, null)
  })
}

test('connections beyond the open-file limit, all sending a request, are refused while those open are served, said once as it begins and once as it ends, and counted; the service lives on', { skip: noProc }, async (t) => {
  const { nodeArgs, command } = serverUnderOpenFileLimit(200)
  const service = await startService(t, timeouts, undefined, nodeArgs, command)
  const health = async () => await healthOn(service.port)
  assert.equal(await health(), 200)

  // Connections in the middle of a request are closed to make room only once they stall for a second.
  await sendingConnections(t, service.port, 300)
  await sleep(500)
  assert.notEqual(await health(), 200, 'a new one is refused while the limit is reached')
  // The flood's headers never end, so it is cut off once HEADERS_TIMEOUT_MS has passed.
  await sleep(Number(timeouts.HEADERS_TIMEOUT_MS) + 1500)
  assert.equal(await health(), 200, 'new connections are served again')
  assert.equal(service.child.exitCode, null, 'the service never exited')

  // Said once as it began and once as it ended (the line may follow the answer), and counted.
  const lines = () => service.stdout.map((line) => JSON.parse(line))
  const ended = () => lines().filter((line) => line.msg === 'accepting new connections again')
  await waitFor(() => ended().length > 0, 2000)
  const began = lines().filter((line) => line.msg.startsWith('refusing new connections: MAX_CONNECTIONS are open'))
  assert.deepEqual([began.length, began[0]?.level, began[0]?.maxConnections], [1, 40, 200 - 128])
  assert.equal(ended().length, 1)
  const refused = ended()[0]?.refusedConnections
  assert.ok(refused >= 1, `refusedConnections ${refused}`)
  const metrics = await rawRequest(service.port, { path: '/metrics' })
  const counted = Number(/^connections_refused_total (\d+)$/m.exec(metrics.body)?.[1])
  assert.ok(counted >= refused, `connections_refused_total ${counted}`)
})

test('near MAX_CONNECTIONS, kept-alive connections waiting for their next request are closed to make room: a new client (a health check) is served, one whose request is in flight is not cut off', async (t) => {
  const service = await startService(t, { ...timeouts, MAX_CONNECTIONS: '20' })
  const body = JSON.stringify({ name: 'Ada', email: 'ada@example.com' })
  const inFlight = await rawConnection(service.port)
  inFlight.socket.write(`POST /users HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, -1)}`)
  // 19 clients each ask once and keep their connection open, as browsers and pools do.
  const keptAlive: Array<Awaited<ReturnType<typeof rawConnection>>> = []
  for (let i = 0; i < 19; i++) {
    const client = await rawConnection(service.port)
    client.socket.write('GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n')
    await waitFor(() => client.received().endsWith('}'), 2000)
    keptAlive.push(client)
  }
  t.after(() => { for (const client of [inFlight, ...keptAlive]) client.socket.destroy() })

  const answer = await rawRequest(service.port, { path: '/health' })
  assert.equal(answer.statusCode, 200, 'a new client is served')
  // Room is kept two places below the limit of 20: the longest-waiting clients were closed, the latest kept.
  await sleep(300)
  const closed = keptAlive.filter((client) => client.socket.destroyed).length
  assert.ok(closed >= 2, `${closed} closed`)
  assert.deepEqual(keptAlive.map((client) => client.socket.destroyed), keptAlive.map((_, index) => index < closed), 'the longest-waiting first')
  const lines = service.stdout.map((line) => JSON.parse(line)).filter((line) => line.msg === 'closed connections holding a place unused, to make room for new ones')
  assert.ok(lines.length > 0)
  assert.deepEqual([...new Set(lines.map((line) => `${line.level} ${line.silent} ${line.stalled}`))], ['30 0 0'], 'none silent, none stalled')

  inFlight.socket.write(body.slice(-1))
  await waitFor(() => inFlight.received().endsWith(body), 2000).catch(() => {})
  assert.match(inFlight.received(), /^HTTP\/1\.1 201 Created\r\n/)
})

/** The listeners on the server's side of a connection that has been answered once, by event. */
async function listenersOnAnsweredConnection (server: net.Server, port: number): Promise<Record<string, number>> {
  const accepted = once(server, 'connection')
  const client = await rawConnection(port)
  const [socket] = await accepted as [net.Socket]
  client.socket.write('GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n')
  await waitFor(() => client.received().includes('\r\n\r\n'), 2000)
  const listeners = Object.fromEntries(socket.eventNames().map((name) => [String(name), socket.listenerCount(name)]))
  client.socket.destroy()
  return listeners
}

test('each connection carries only the listeners Node adds, so that a burst of connections cannot slow garbage collection for good', async (t) => {
  const { app, port } = await listeningApp(t)
  const bare = http.createServer((_request, response) => { response.end() })
  bare.listen(0, '127.0.0.1')
  await once(bare, 'listening')
  t.after(() => { bare.close() })
  const barePort = (bare.address() as net.AddressInfo).port
  assert.deepEqual(await listenersOnAnsweredConnection(app.server, port), await listenersOnAnsweredConnection(bare, barePort))
})

test('requests pipelined on one connection are answered in order, one at a time; a connection with more than 64 waiting is closed, and memory holds', async (t) => {
  // A small heap, so that answers piling up would run it out and end the process.
  const service = await startService(t, { DATABASE_URL: 'sqlite::memory:' }, undefined, ['--max-old-space-size=96', ...fromSource('server.ts')])
  // 1,000 users with long names: a full page is 220 kB.
  const name = 'n'.repeat(200)
  for (let i = 0; i < 1000; i += 50) {
    await Promise.all(Array.from({ length: 50 }, async () => await postJsonOver(service.port, '/users', { name, email: 'ada@example.com' })))
  }

  const get = (path: string, headers = '') => `GET ${path} HTTP/1.1\r\nHost: localhost\r\n${headers}\r\n`
  const body = JSON.stringify({ name: 'Grace', email: 'grace@example.com' })
  const pipelined = await rawConnection(service.port)
  pipelined.socket.write(get('/users/2') + get('/users/1') +
    `POST /users HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}` +
    get('/users/1001') + get('/', 'Connection: close\r\n'))
  const received = await pipelined.closed
  assert.deepEqual(statusesIn(received), [200, 200, 201, 200, 200])
  assert.deepEqual([...received.matchAll(/"id":"(\d+)"/g)].map((match) => match[1]), ['2', '1', '1001'], 'each answer in its request\'s place')

  // 2,000 requests for full pages in one go, whose answers are never read.
  const flood = net.connect(service.port, '127.0.0.1', () => { flood.write(get('/users?limit=1000').repeat(2000)) })
  flood.pause()
  flood.on('error', () => {})
  t.after(() => flood.destroy())
  const closing = () => service.stdout.map((line) => JSON.parse(line)).filter((line) => line.msg === 'closing a connection that pipelined more requests than are handled in turn')
  await waitFor(() => closing().length > 0 || service.child.exitCode !== null, 10_000)
  assert.equal(service.child.exitCode, null, 'the process lives on, its heap within bounds')
  assert.deepEqual(closing().map((line) => [line.level, line.maxWaiting]), [[30, 64]])
  flood.resume()
  await new Promise((resolve) => flood.once('close', resolve))
  assert.equal((await rawRequest(service.port, { path: '/users?limit=1000' })).statusCode, 200, 'other clients are answered')
})

/** The resident memory of a process, in bytes. */
const residentBytes = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) * 1024

test('request bodies take at most 64 MB at once: past it a body is refused with 503 and Retry-After, memory holds, and once they go bodies are taken again', async (t) => {
  // Without shedding on a late event loop, which a slow machine may set off, and whose 503 says so.
  const service = await startService(t, { DATABASE_URL: 'sqlite::memory:', OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0' })
  const pid = service.child.pid as number
  const before = residentBytes(pid)
  // 300 clients each send a body of 1 MB but its last byte, and wait: 300 MB, were they all kept.
  const size = 1024 * 1024
  const clients = await Promise.all(Array.from({ length: 300 }, async () => {
    const client = await rawConnection(service.port)
    client.socket.write(`POST /users HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${size}\r\n\r\n`)
    client.socket.write(Buffer.alloc(size - 1, ' '))
    return client
  }))
  t.after(() => { for (const client of clients) client.socket.destroy() })
  const refused = () => clients.filter((client) => client.received() !== '')
  await waitFor(() => refused().length >= 300 - 64, 30_000).catch(() => {})
  await sleep(500)
  const unsent = clients.filter((client) => client.socket.writableLength > 0).length
  assert.equal(refused().length, 300 - 64, `the bodies of 64 clients are held, and no more (${unsent} clients have bytes not yet sent)`)
  for (const client of refused()) {
    assert.match(client.received(), /^HTTP\/1\.1 503 Service Unavailable\r\n/)
    assert.match(client.received(), /\r\nretry-after: 1\r\n/)
    assert.match(client.received(), /\r\n\r\n\{"error":"Too many request bodies are being received: try again shortly","code":"too_many_bodies"\}$/)
  }
  assert.equal(clients.filter((client) => client.wasReset() || client.socket.destroyed).length, 0, 'no connection is reset or closed: a refused client may send the rest of its body')
  // The 64 MB held, and the refused bodies, read and dropped, that the heap has not yet collected.
  const grown = residentBytes(pid) - before
  assert.ok(grown < 200 * 1024 * 1024, `memory grew by ${Math.round(grown / 1024 / 1024)} MB`)
  assert.equal((await rawRequest(service.port, { path: '/' })).statusCode, 200, 'requests without a body are answered')

  // Once the clients are gone (their connections' ends reach the service in a moment), a body
  // as large as BODY_LIMIT is taken again.
  for (const client of clients) client.socket.destroy()
  const large = { name: 'Ada', email: 'ada@example.com', note: 'x'.repeat(size - 100) }
  const created = await askWhileUnavailable(async () => await postJsonOver(service.port, '/users', large))
  assert.equal(created.statusCode, 201)
})

test('many large bodies at once do not run the heap out: POST /users keeps a body\'s bytes, not its parsed form, while it waits for the database', async (t) => {
  // A small heap: 40 parsed megabytes of `[],` waiting for a commit together would run it out.
  const service = await startService(t, { DATABASE_URL: 'sqlite::memory:' }, undefined, ['--max-old-space-size=96', ...fromSource('server.ts')])
  const body = '{"name":"Ada","email":"ada@example.com","x":[' + '[],'.repeat(340_000) + '[]]}'
  const answers = await Promise.all(Array.from({ length: 40 }, async () => {
    const statuses: number[] = []
    for (let i = 0; i < 3; i++) {
      const answer = await rawRequest(service.port, { method: 'POST', path: '/users', body, headers: { 'content-type': 'application/json' } })
      if (answer.statusCode === 201) assert.equal(answer.body, body)
      statuses.push(answer.statusCode)
    }
    return statuses
  }))
  assert.equal(service.child.exitCode, null, 'the process lives on')
  const statuses = answers.flat()
  assert.ok(statuses.every((status) => status === 201 || status === 503), JSON.stringify(statuses))
  assert.ok(statuses.includes(201), JSON.stringify(statuses))
  // Overload protection, sampling once a second, may still shed for a moment after the load.
  const lookup = await askWhileUnavailable(async () => await rawRequest(service.port, { path: '/users/1' }))
  assert.equal(lookup.statusCode, 200)
})
