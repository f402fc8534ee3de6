/**
 * The benchmark's floor: a bare node:http server answering the service's routes by hand, with
 * fixed JSON and hand-written checks, no framework, no storage, no logging, each request
 * answered the moment it has been read. It shows what the machine can do, not what a service
 * should be compared with: plain Fastify (bench/fastify.ts) is that.
 */
import { readFileSync } from 'node:fs'
import http from 'node:http'

const port = Number(process.argv[2] ?? 3001)
// From the working directory, the repository's root: run.ts runs this file bundled, from dist/.
const indexHtml = readFileSync('public/index.html')
const page = JSON.stringify(Array.from({ length: 10 }, (_, i) => ({ id: i + 1, name: `user${i + 1}` })))
const HEX24 = /^[0-9a-fA-F]{24}$/
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/
let nextId = 1001

function send (request: http.IncomingMessage, response: http.ServerResponse, status: number, body: string | Buffer, type = 'application/json; charset=utf-8', extra: Record<string, string> = {}): void {
  const origin = request.headers.origin
  response.writeHead(status, {
    'content-type': type,
    'content-length': Buffer.byteLength(body),
    ...(origin !== undefined && { 'access-control-allow-origin': origin, vary: 'Origin' }),
    ...extra
  })
  response.end(body)
}

function readJson (request: http.IncomingMessage, then: (body: Record<string, unknown> | undefined) => void): void {
  const chunks: Buffer[] = []
  request.on('data', (chunk: Buffer) => chunks.push(chunk))
  request.on('end', () => {
    try {
      const parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'))
      then(typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? parsed : undefined)
    } catch {
      then(undefined)
    }
  })
}

const validUser = (body: Record<string, unknown> | undefined) =>
  body !== undefined && typeof body.name === 'string' && typeof body.email === 'string' && EMAIL.test(body.email)

http.createServer((request, response) => {
  const [path = '/', query = ''] = (request.url ?? '/').split('?')
  if (request.method === 'GET' && path === '/') return send(request, response, 200, '{"hello":"world"}')
  if (request.method === 'GET' && path === '/health') return send(request, response, 200, '{"status":"ok"}')
  if (request.method === 'GET' && path === '/users') return send(request, response, 200, page, undefined, { 'x-total-count': '1000' })
  if (request.method === 'GET' && path === '/index.html') return send(request, response, 200, indexHtml, 'text/html; charset=utf-8')
  if (request.method === 'GET' && path === '/custom') {
    const params = new URLSearchParams(query)
    const age = params.get('age')
    if (age !== null && !/^-?\d+$/.test(age)) return send(request, response, 400, '{"error":"querystring/age must be integer"}')
    return send(request, response, 200, JSON.stringify({ hello: params.get('name') ?? 'world' }))
  }
  if (request.method === 'GET' && path.startsWith('/users/')) {
    return send(request, response, 200, JSON.stringify({ id: path.slice(7), name: 'user' }))
  }
  if (request.method === 'POST' && path === '/users') {
    return readJson(request, (body) => validUser(body)
      ? send(request, response, 201, JSON.stringify(body), undefined, { location: `/users/${nextId++}` })
      : send(request, response, 400, '{"error":"body is invalid"}'))
  }
  if (request.method === 'POST' && path.startsWith('/users/') && HEX24.test(path.slice(7))) {
    return readJson(request, (body) => validUser(body) && Object.keys(body!).every((key) => key === 'name' || key === 'email' || key === 'age')
      ? send(request, response, 200, JSON.stringify({ id: path.slice(7), name: body!.name, email: body!.email }))
      : send(request, response, 400, '{"error":"body is invalid"}'))
  }
  send(request, response, 404, '{"error":"Route not found"}')
}).listen(port, '127.0.0.1')
