/**
 * The service against its own OpenAPI document: requests that cause every status every
 * operation declares, each answer checked against the document by openapi-backend (body
 * schema, header types), and by this file for what openapi-backend leaves out (a status the
 * document does not declare, the content type, a header declared as always sent but missing).
 * An operation or a declared status no case below causes fails the last test.
 */
import assert from 'node:assert/strict'
import { describe, test, type TestContext } from 'node:test'
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify'
import { createSigner } from 'fast-jwt'
import addFormats from 'ajv-formats'
import { OpenAPIBackend, type Document } from 'openapi-backend'
import { DatabaseUnavailableError, UserIdsExhaustedError } from '../../src/storage/observed-queries.js'
import { getUntil, testApp } from '../helpers.js'

const secret = 'a-test-secret-that-is-long-enough-for-hs256'
// Minted as the file loads, so valid for as long as its tests may take on a busy machine.
const authorization = `Bearer ${createSigner({ key: secret, expiresIn: 900_000 })({ sub: 'contract' })}`
const ada = { name: 'Ada', email: 'ada@example.com' }
const hex = '507f1f77bcf86cd799439011'
const json = { 'content-type': 'application/json' }

type AppName = 'main' | 'limited' | 'overloaded' | 'strict'
const settings: Record<AppName, Record<string, string>> = {
  main: { AUTH: 'writes', JWT_SECRET: secret, BODY_LIMIT: '1024', RATE_LIMIT_MAX: '100000' },
  limited: { RATE_LIMIT_MAX: '1' },
  overloaded: { OVERLOAD_MAX_HEAP_MB: '1' },
  strict: { REQUIRE_IF_MATCH: 'on' }
}

/**
 * A request that causes `status` on `operationId`, on one of the apps above; `before` is sent
 * first, and with `ifUnchanged` the request names the ETag of the answer to `before`; with
 * `atCreated`, it goes to the `Location` of that answer; with `twice`, the request is sent twice at
 * once, and the answer with `status` is the one checked.
 */
interface Case {
  operationId: string
  status: number
  app?: AppName
  request: InjectOptions
  before?: InjectOptions
  ifUnchanged?: true
  atCreated?: true
  twice?: true
  /** Run on the app first, for what no request can do (events past their retention). */
  setUp?: (app: FastifyInstance) => Promise<void>
}

/**
 * Faults no client can cause, raised inside the real request lifecycle so that the real error
 * mapper answers them: what the client sees is what it would see in a real outage or bug.
 */
function addFaults (app: FastifyInstance): void {
  app.addHook('preHandler', async (request) => {
    const fault = request.headers['x-test-fault']
    if (fault === 'database') throw new DatabaseUnavailableError(new Error('injected by the test'))
    if (fault === 'ids') throw new UserIdsExhaustedError(new Error('injected by the test'))
    if (fault === 'bug') throw new Error('injected by the test')
  })
}
const fault = (kind: 'database' | 'ids' | 'bug', request: InjectOptions): InjectOptions => ({ ...request, headers: { ...request.headers, 'x-test-fault': kind } })

const valid: Record<string, InjectOptions> = {
  hello: { url: '/' },
  customHello: { url: '/custom?name=Ada&age=36' },
  listUsers: { url: '/users?limit=10' },
  createUser: { method: 'POST', url: '/users', headers: { ...json, authorization }, payload: JSON.stringify(ada) },
  getUser: { url: '/users/1' },
  updateUser: { method: 'PATCH', url: '/users/1', headers: { 'content-type': 'application/merge-patch+json', authorization }, payload: '{"name":"Grace"}' },
  deleteUser: { method: 'DELETE', url: '/users/1', headers: { authorization } },
  validateUser: { method: 'POST', url: `/users/${hex}?limit=5`, headers: { ...json, authorization }, payload: JSON.stringify({ ...ada, age: 36 }) },
  health: { url: '/health' },
  ready: { url: '/ready' },
  metrics: { url: '/metrics' },
  followEvents: { url: '/events' },
  createEventsTicket: { method: 'POST', url: '/events/tickets' },
  getProblemType: { url: '/problems/user_not_found' }
}

/** A request whose answer, a stream that does not end, is checked as its headers arrive. */
const streamed = (request: InjectOptions): InjectOptions => ({ ...request, payloadAsStream: true })

const keyed = (key: string, body: object): InjectOptions =>
  ({ ...valid.createUser, headers: { ...valid.createUser!.headers, 'idempotency-key': key }, payload: JSON.stringify(body) })

const cases: Case[] = [
  ...Object.entries(valid).map(([operationId, request]): Case => ({
    operationId,
    status: ['createUser', 'createEventsTicket'].includes(operationId) ? 201 : operationId === 'deleteUser' ? 204 : 200,
    request: operationId === 'followEvents' ? streamed(request) : request,
    ...(['getUser', 'updateUser', 'deleteUser'].includes(operationId) && { before: valid.createUser, atCreated: true as const })
  })),
  ...Object.entries(valid).map(([operationId, request]): Case => ({ operationId, status: 500, request: fault('bug', request) })),
  { operationId: 'customHello', status: 400, request: { url: '/custom?age=abc' } },
  { operationId: 'listUsers', status: 400, request: { url: '/users?limit=0' } },
  { operationId: 'listUsers', status: 401, request: { url: '/users?email=ada@example.com' } },
  { operationId: 'getUser', status: 400, request: { url: '/users/%zz' } },
  { operationId: 'getUser', status: 404, request: { url: '/users/999' } },
  { operationId: 'getUser', status: 304, before: valid.getUser, ifUnchanged: true, request: valid.getUser! },
  { operationId: 'listUsers', status: 304, before: valid.listUsers, ifUnchanged: true, request: valid.listUsers! },
  { operationId: 'createUser', status: 400, request: { ...valid.createUser, payload: JSON.stringify({ name: 'Ada' }) } },
  { operationId: 'createUser', status: 401, request: { ...valid.createUser, headers: json } },
  { operationId: 'createUser', status: 409, twice: true, request: keyed('in-flight', ada) },
  { operationId: 'createUser', status: 422, before: keyed('reused', ada), request: keyed('reused', { ...ada, name: 'Grace' }) },
  { operationId: 'createUser', status: 413, request: { ...valid.createUser, payload: JSON.stringify({ ...ada, name: 'x'.repeat(2000) }) } },
  { operationId: 'createUser', status: 415, request: { ...valid.createUser, headers: { authorization, 'content-type': 'text/plain' } } },
  { operationId: 'validateUser', status: 400, request: { ...valid.validateUser, payload: JSON.stringify({ ...ada, role: 'admin' }) } },
  { operationId: 'validateUser', status: 401, request: { ...valid.validateUser, headers: json } },
  { operationId: 'validateUser', status: 413, request: { ...valid.validateUser, payload: JSON.stringify({ ...ada, name: 'x'.repeat(2000) }) } },
  { operationId: 'validateUser', status: 415, request: { ...valid.validateUser, headers: { authorization, 'content-type': 'text/plain' } } },
  { operationId: 'updateUser', status: 400, request: { ...valid.updateUser, payload: '{"name":null}' } },
  { operationId: 'updateUser', status: 401, request: { ...valid.updateUser, headers: json } },
  { operationId: 'updateUser', status: 404, request: { ...valid.updateUser, url: '/users/999' } },
  { operationId: 'updateUser', status: 412, request: { ...valid.updateUser, headers: { ...valid.updateUser!.headers, 'if-match': '"1.999"' } } },
  { operationId: 'updateUser', status: 413, request: { ...valid.updateUser, payload: JSON.stringify({ name: 'x'.repeat(2000) }) } },
  { operationId: 'updateUser', status: 415, request: { ...valid.updateUser, headers: { authorization, 'content-type': 'text/plain' } } },
  { operationId: 'updateUser', status: 428, app: 'strict', request: valid.updateUser! },
  { operationId: 'deleteUser', status: 400, request: { ...valid.deleteUser, url: '/users/%zz' } },
  { operationId: 'deleteUser', status: 401, request: { ...valid.deleteUser, headers: {} } },
  { operationId: 'deleteUser', status: 404, request: { ...valid.deleteUser, url: '/users/999' } },
  { operationId: 'deleteUser', status: 412, request: { ...valid.deleteUser, headers: { authorization, 'if-match': '"1.999"' } } },
  { operationId: 'deleteUser', status: 428, app: 'strict', request: valid.deleteUser! },
  { operationId: 'createUser', status: 507, request: fault('ids', valid.createUser!) },
  { operationId: 'followEvents', status: 400, request: { url: '/events', headers: { 'last-event-id': 'yesterday' } } },
  {
    operationId: 'followEvents',
    status: 410,
    // Every event but the newest purged: the position after the first is gone.
    setUp: async (app) => {
      const { newest } = await app.db.selectFrom('events').select((eb) => eb.fn.max('position').as('newest')).executeTakeFirstOrThrow()
      await app.db.deleteFrom('events').where('position', '<', Number(newest)).execute()
    },
    before: valid.createUser,
    request: { url: '/events?after=1' }
  },
  { operationId: 'getProblemType', status: 400, request: { url: '/problems/Not%20a%20code' } },
  { operationId: 'getProblemType', status: 404, request: { url: '/problems/no_such_code' } },
  ...['getUser', 'updateUser', 'deleteUser', 'validateUser', 'getProblemType'].map((operationId): Case => {
    const request = valid[operationId]!
    return { operationId, status: 414, request: { ...request, url: String(request.url).replace(/[^/]+(?=\?|$)/, '1'.repeat(101)) } }
  }),
  ...['listUsers', 'createUser', 'getUser', 'updateUser', 'deleteUser', 'ready', 'followEvents', 'createEventsTicket'].map((operationId): Case => ({ operationId, status: 503, request: fault('database', valid[operationId]!) })),
  ...['hello', 'customHello', 'validateUser', 'getProblemType'].map((operationId): Case => ({ operationId, status: 503, app: 'overloaded', request: valid[operationId]! }))
]

/** Every operation of the API with a limiter in front, twice: the second is over the limit. */
const rateLimited = ['hello', 'customHello', 'listUsers', 'getUser', 'createUser', 'updateUser', 'deleteUser', 'validateUser', 'followEvents', 'createEventsTicket', 'getProblemType']
cases.push(...rateLimited.map((operationId): Case => ({
  operationId, status: 429, app: 'limited', before: operationId === 'followEvents' ? streamed(valid[operationId]!) : valid[operationId], request: valid[operationId]!
})))

interface DocumentedResponse { content?: Record<string, unknown>, headers?: Record<string, { required?: boolean }> }

async function apps (t: TestContext): Promise<Record<AppName, FastifyInstance>> {
  const built = {} as Record<AppName, FastifyInstance>
  for (const name of Object.keys(settings) as AppName[]) {
    built[name] = await testApp(t, settings[name])
    addFaults(built[name])
  }
  return built
}

/** The document as the service serves it under each app's settings: they differ (401, 429). */
async function documents (built: Record<AppName, FastifyInstance>): Promise<Record<AppName, Document>> {
  const entries = await Promise.all(Object.entries(built).map(async ([name, app]) => [name, (await app.inject('/documentation/json')).json()]))
  return Object.fromEntries(entries)
}

describe('the service keeps every promise of its OpenAPI document', () => {
  const covered = new Set<string>()

  test('every answer to every case is one the document describes: status, content type, body, headers', async (t) => {
    const built = await apps(t)
    const served = await documents(built)
    const validators = Object.fromEntries(await Promise.all(Object.entries(served).map(async ([name, definition]) => {
      // quick: openapi-backend's own check of documents knows OpenAPI 3.0 only, and this one
      // is 3.1; Redocly's rules validate it (openapi.test.ts).
      const backend = new OpenAPIBackend({ definition, quick: true, validate: true, customizeAjv: (ajv) => addFormats.default(ajv) })
      await backend.init()
      return [name, backend]
    }))) as Record<AppName, OpenAPIBackend>

    // The load shedder samples the heap once a second.
    await getUntil(built.overloaded, '/', 503, 4000, 100)

    for (const { operationId, status, app = 'main', request, before, ifUnchanged, atCreated, twice, setUp } of cases) {
      const label = `${operationId} ${status} (${request.method ?? 'GET'} ${request.url})`
      const earlier = before === undefined ? undefined : await built[app].inject(before)
      if (before?.payloadAsStream === true) earlier?.stream().destroy()
      await setUp?.(built[app])
      const headers = ifUnchanged === true ? { ...request.headers, 'if-none-match': String(earlier?.headers.etag) } : request.headers
      const url = atCreated === true ? String(earlier?.headers.location) : request.url
      const send = async () => await built[app].inject({ ...request, url, headers })
      const answers: LightMyRequestResponse[] = twice === true ? await Promise.all([send(), send()]) : [await send()]
      const response = answers.find((answer) => answer.statusCode === status) ?? answers[0]!
      const streamed = request.payloadAsStream === true
      // A stream's body is not read: it does not end. What it holds is tested in events.test.ts.
      if (streamed) response.stream().destroy()
      assert.equal(response.statusCode, status, `${label}: ${streamed ? '(a stream)' : response.body}`)

      const backend = validators[app]
      const operation = backend.getOperation(operationId)
      assert.ok(operation, `${operationId} is in the document`)
      const documented = (operation.responses as Record<string, DocumentedResponse>)[String(status)]
      assert.ok(documented, `${label}: the document declares ${status}`)

      const [mediaType] = Object.keys(documented.content ?? {})
      if (mediaType === undefined) {
        assert.equal(response.body, '', `${label}: the document declares no body`)
      } else if (streamed) {
        assert.equal(String(response.headers['content-type']).split(';')[0], mediaType, `${label}: content type`)
      } else {
        assert.equal(String(response.headers['content-type']).split(';')[0], mediaType, `${label}: content type`)
      }
      if (mediaType === 'application/json' && !streamed) {
        const body = backend.validateResponse(response.json(), operation, status)
        assert.deepEqual(body.errors ?? [], [], `${label}: body ${response.body}`)
      }
      const headerCheck = backend.validateResponseHeaders(response.headers, operation, { statusCode: status })
      assert.deepEqual(headerCheck.errors ?? [], [], `${label}: headers`)
      for (const [name, header] of Object.entries(documented.headers ?? {})) {
        if (header.required === true) assert.ok(response.headers[name.toLowerCase()] !== undefined, `${label}: header ${name} is declared as always sent`)
      }
      covered.add(`${operationId} ${status}`)
    }

    // Every operation and every status the document declares has a case above.
    const declared = Object.values(validators).flatMap((backend) => backend.getOperations().flatMap((operation) =>
      Object.keys(operation.responses ?? {}).map((status) => `${operation.operationId} ${status}`)))
    const missing = [...new Set(declared)].filter((key) => !covered.has(key))
    assert.deepEqual(missing, [], 'declared statuses no case causes')
  })
})
