/**
 * A fuzzer driven by the served document, as Schemathesis is (which does not install here: its
 * index is not reachable): for every operation, requests whose parameters and bodies come from the
 * document's own schemas, their bounds, patterns and examples, or break them; every answer must be
 * one the document declares for that operation: its status, its content type, its body.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Ajv2020 } from 'ajv/dist/2020.js'
import addFormats from 'ajv-formats'
import fc from 'fast-check'
import { createSigner } from 'fast-jwt'
import { OpenAPIBackend, type Document } from 'openapi-backend'
import { testApp } from '../helpers.js'

const secret = 'a-document-fuzzing-secret-of-32-bytes!'

interface Schema { type?: string, enum?: unknown[], examples?: unknown[], pattern?: string, format?: string, minimum?: number, maximum?: number, maxLength?: number, minLength?: number, properties?: Record<string, Schema>, required?: string[] }
interface Parameter { in: 'path' | 'query' | 'header', name: string, required?: boolean, schema: Schema }
interface Operation { operationId: string, parameters?: Parameter[], requestBody?: { content: Record<string, { schema: Schema }> }, responses: Record<string, { content?: Record<string, { schema: unknown }> }> }

const hostile = ['', ' ', '-1', '0', '1e400', '3.5', 'abc', 'null', '[]', '{"a":1}', '__proto__', '%', '%FF', 'x'.repeat(300), '\u00e9', '\u{1F600}', '"1.1"', '*']

/** Text for a parameter: what its schema allows, its edges, just past them, and what no schema allows. */
function textFor (schema: Schema): fc.Arbitrary<string> {
  const choices: Array<fc.Arbitrary<string>> = [fc.constantFrom(...hostile), fc.string({ maxLength: 30 })]
  const values = [...(schema.enum ?? []), ...(schema.examples ?? [])].map(String)
  if (values.length > 0) choices.push(fc.constantFrom(...values))
  if (schema.type === 'integer' || schema.type === 'number') {
    const edges = [schema.minimum, schema.maximum].filter((edge) => edge !== undefined).flatMap((edge) => [edge - 1, edge, edge + 1])
    choices.push(fc.integer({ min: schema.minimum ?? -1e6, max: Math.min(schema.maximum ?? 1e6, Number.MAX_SAFE_INTEGER) }).map(String))
    if (edges.length > 0) choices.push(fc.constantFrom(...edges.map(String)))
  }
  if (schema.pattern !== undefined) choices.push(fc.stringMatching(new RegExp(schema.pattern, 'u')).filter((text) => text.length <= 300))
  if (schema.format === 'email') choices.push(fc.emailAddress())
  if (schema.format === 'date-time') choices.push(fc.date({ noInvalidDate: true }).map((date) => date.toISOString()))
  return fc.oneof(...choices)
}

/** A JSON body: the schema's example, it with one member replaced by anything, members from the schema, or any JSON at all. */
function bodyFor (schema: Schema): fc.Arbitrary<unknown> {
  const example = (schema.examples?.[0] ?? {}) as Record<string, unknown>
  const members = Object.entries(schema.properties ?? {}).map(([name, property]) => [name, property.type === 'integer' ? fc.oneof(fc.integer(), fc.jsonValue()) : fc.oneof(textFor(property), fc.jsonValue())] as const)
  return fc.oneof(
    fc.constant(example),
    fc.tuple(fc.constantFrom(...Object.keys(example), 'extra'), fc.jsonValue()).map(([name, value]) => ({ ...example, [name]: value })),
    members.length === 0 ? fc.jsonValue() : fc.record(Object.fromEntries(members), { requiredKeys: [] }),
    fc.jsonValue()
  )
}

test('every answer to requests made from the served document\'s own schemas is one it declares: status, content type and body', async (t) => {
  const app = await testApp(t, { AUTH: 'writes', JWT_SECRET: secret, RATE_LIMIT_MAX: '1000000' })
  for (const name of ['Ada', 'Grace']) await app.inject({ method: 'POST', url: '/users', payload: { name, email: `${name}@example.com` }, headers: { authorization: `Bearer ${createSigner({ key: secret, expiresIn: 600_000 })({ sub: 'fuzz' })}` } })
  const document: Document = (await app.inject('/documentation/json')).json()
  const paths = document.paths as Record<string, Record<string, Operation>>
  const backend = new OpenAPIBackend({ definition: document, quick: true, validate: true, customizeAjv: (ajv) => addFormats.default(ajv) })
  await backend.init()
  const problems = new Ajv2020({ strict: false })
  addFormats.default(problems)
  problems.addSchema(document, 'document')

  const token = createSigner({ key: secret, expiresIn: 600_000 })({ sub: 'fuzz', scope: 'users:admin' })
  // GET /events answers a stream that does not end; contract.test.ts and events.test.ts check it.
  const operations = Object.entries(paths).flatMap(([path, methods]) => Object.entries(methods).map(([method, operation]) => ({ path, method, operation })))
    .filter(({ operation }) => operation.operationId !== 'followEvents')

  const request = fc.constantFrom(...operations).chain(({ path, method, operation }) => {
    const parameters = operation.parameters ?? []
    const values = fc.record(Object.fromEntries(parameters.map((parameter) => [`${parameter.in} ${parameter.name}`,
      // An empty path segment names another route, not this operation: a false positive, left out.
      parameter.in === 'path' ? textFor(parameter.schema).filter((text) => text !== '') : textFor(parameter.schema)])), { requiredKeys: [] })
    const bodySchema = operation.requestBody?.content['application/json']?.schema
    return fc.record({
      path: fc.constant(path),
      method: fc.constant(method.toUpperCase()),
      operation: fc.constant(operation),
      values,
      body: bodySchema === undefined ? fc.constant(undefined) : bodyFor(bodySchema),
      authorization: fc.constantFrom(`Bearer ${token}`, undefined, 'Bearer not-a-token'),
      accept: fc.constantFrom(undefined, 'application/json', 'application/problem+json')
    })
  })

  await fc.assert(fc.asyncProperty(request, async ({ path, method, operation, values, body, authorization, accept }) => {
    const entries = Object.entries(values as Record<string, string>)
    const url = path.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(String((values as Record<string, string>)[`path ${name}`] ?? '1')))
    const query = entries.filter(([key]) => key.startsWith('query ')).map(([key, value]) => `${key.slice(6)}=${encodeURIComponent(value)}`).join('&')
    const headers = Object.fromEntries(entries.filter(([key]) => key.startsWith('header ')).map(([key, value]) => [key.slice(7), value]))
    const answer = await app.inject({
      method: method as 'GET',
      url: query === '' ? url : `${url}?${query}`,
      headers: {
        ...headers,
        ...(authorization !== undefined && { authorization }),
        ...(accept !== undefined && { accept }),
        ...(body !== undefined && { 'content-type': 'application/json' })
      },
      ...(body !== undefined && { payload: JSON.stringify(body) })
    })
    const label = `${method} ${url}?${query} ${JSON.stringify(body)} → ${answer.statusCode} ${answer.body.slice(0, 300)}`
    assert.ok(answer.statusCode < 500, label)
    const declared = operation.responses[String(answer.statusCode)]
    assert.ok(declared !== undefined, `${label}: the status is declared`)
    const mediaTypes = Object.keys(declared.content ?? {})
    if (mediaTypes.length === 0) return
    const type = String(answer.headers['content-type']).split(';')[0]!
    assert.ok(mediaTypes.includes(type), `${label}: ${type} is declared`)
    if (type === 'application/json') {
      const checked = backend.validateResponse(answer.json(), operation.operationId, answer.statusCode)
      assert.deepEqual(checked.errors ?? [], [], label)
    } else if (type === 'application/problem+json') {
      const pointer = `document#/paths/${path.replaceAll('/', '~1')}/${method.toLowerCase()}/responses/${answer.statusCode}/content/application~1problem+json/schema`
      assert.ok(problems.validate({ $ref: pointer }, answer.json()), `${label}: ${JSON.stringify(problems.errors)}`)
    }
  }), { numRuns: 300 })
})
