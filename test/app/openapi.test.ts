import assert from 'node:assert/strict'
import { test } from 'node:test'
import { createConfig, lintFromString } from '@redocly/openapi-core'
import { ERRORS, type ErrorCode } from '../../src/http/error-catalogue.js'
import { openApiDocument, testApp } from '../helpers.js'

const operations = [
  ['get', '/'], ['get', '/custom'], ['get', '/users'], ['post', '/users'],
  ['get', '/users/{id}'], ['patch', '/users/{id}'], ['delete', '/users/{id}'], ['post', '/users/{id}'],
  ['get', '/health'], ['get', '/ready'], ['get', '/metrics'], ['get', '/events'], ['post', '/events/tickets'], ['get', '/problems/{code}']
] as const

/** The problems Redocly's recommended rules find in a document, as `redocly lint` prints them: its `struct` rule validates it against the OpenAPI schema. */
async function redoclyProblems (document: object): Promise<Array<{ severity: string, rule: string, at: string, message: string }>> {
  const problems = await lintFromString({ source: JSON.stringify(document), config: await createConfig({ extends: ['recommended'] }) })
  return problems.map((problem) => ({ severity: problem.severity, rule: problem.ruleId, at: problem.location[0]?.pointer ?? '', message: problem.message }))
}

test('the OpenAPI document is OpenAPI 3 at version 1.0.0, and one the validator refuses when broken', async (t) => {
  const document = await openApiDocument(t)
  assert.match(document.openapi, /^3\./)
  assert.equal(document.info.version, '1.0.0')
  const broken = structuredClone(document)
  delete broken.info.title
  broken.paths['/users'].get.responses['200'].content = 'none'
  const errors = (await redoclyProblems(broken)).filter((problem) => problem.severity === 'error')
  assert.deepEqual(errors.map((problem) => [problem.rule, problem.at]), [['struct', '#/info'], ['struct', '#/paths/~1users/get/responses/200/content']])
})

test('every route is documented with a summary, an operationId, a tag, and its error responses as the named Error or Problem, with the codes each can carry', async (t) => {
  const document = await openApiDocument(t)
  const documented = Object.entries(document.paths).flatMap(([path, methods]) =>
    Object.keys(methods as object).map((method) => `${method} ${path}`))
  assert.deepEqual(documented.sort(), operations.map(([method, path]) => `${method} ${path}`).sort())

  for (const [method, path] of operations) {
    const operation = document.paths[path][method]
    assert.ok(operation.summary, `${method} ${path} has a summary`)
    assert.ok(operation.operationId, `${method} ${path} has an operationId`)
    assert.equal(operation.tags?.length, 1, `${method} ${path} has a tag`)
    for (const [status, response] of Object.entries<any>(operation.responses)) {
      assert.ok(response.description, `${method} ${path} ${status} is described`)
      assert.equal(response.headers['X-Request-Id'].required, true, `${method} ${path} ${status} carries X-Request-Id`)
      if (Number(status) >= 400) {
        const [json, problem] = [response.content['application/json'].schema, response.content['application/problem+json'].schema]
        assert.deepEqual(json.allOf[0], { $ref: '#/components/schemas/Error' }, `${method} ${path} ${status}`)
        assert.deepEqual(problem.allOf[0], { $ref: '#/components/schemas/Problem' }, `${method} ${path} ${status}`)
        const codes: ErrorCode[] = json.allOf[1].properties.code.enum
        assert.deepEqual(problem.allOf[1].properties.code.enum, codes)
        for (const code of codes) assert.equal(ERRORS[code].status, Number(status), `${method} ${path} ${status} can carry ${code}`)
      }
    }
  }
  const statuses = (method: string, path: string) => Object.keys(document.paths[path][method].responses).sort()
  assert.deepEqual(statuses('post', '/users'), ['201', '400', '409', '413', '415', '422', '500', '503', '507'])
  assert.deepEqual(statuses('get', '/users/{id}'), ['200', '304', '400', '404', '414', '500', '503'])
  assert.deepEqual(statuses('patch', '/users/{id}'), ['200', '400', '404', '412', '413', '414', '415', '500', '503'])
  assert.deepEqual(statuses('delete', '/users/{id}'), ['204', '400', '404', '412', '414', '500', '503'])
  assert.deepEqual(statuses('get', '/'), ['200', '500', '503'])
  assert.deepEqual(statuses('get', '/ready'), ['200', '500', '503'])
  assert.deepEqual(statuses('get', '/health'), ['200', '500'])
})

test('rate limiting and tokens, when on, are declared on the operations they guard, with their headers', async (t) => {
  const document = await openApiDocument(t, { RATE_LIMIT_MAX: '10', AUTH: 'writes', JWT_SECRET: 'a-test-secret-that-is-long-enough-for-hs256' })
  const responses = (method: string, path: string) => document.paths[path][method].responses
  for (const [method, path] of operations.filter(([, path]) => !['/health', '/ready', '/metrics'].includes(path))) {
    const limited = responses(method, path)['429']
    assert.ok(limited, `${method} ${path} declares 429`)
    assert.equal(limited.headers['Retry-After'].required, true)
    assert.equal(limited.headers['RateLimit-Remaining'].required, false, 'a request shed for overload never reaches the limiter')
  }
  assert.equal(responses('get', '/health')['429'], undefined, 'health is not rate-limited')
  assert.equal(responses('post', '/users')['401'].headers['WWW-Authenticate'].required, true)
  assert.equal(responses('get', '/users/{id}')['401'], undefined, 'reads need no token under AUTH=writes')
  assert.equal(responses('get', '/users')['401'].headers['WWW-Authenticate'].required, true, 'unless they read addresses')
})

test('the document names its schemas, closes the answers the contract fixes, and links a 201 to what can be done with its user', async (t) => {
  const document = await openApiDocument(t)
  const schemas = document.components.schemas
  assert.deepEqual(Object.keys(schemas).sort(), ['Error', 'Greeting', 'NewUser', 'Problem', 'ProblemType', 'Status', 'User', 'UserEvent', 'UserPatch', 'UserSummary', 'UserToValidate', 'ValidatedUser'])
  for (const name of ['Error', 'Problem', 'ProblemType', 'User', 'UserEvent', 'UserPatch', 'UserSummary', 'UserToValidate', 'ValidatedUser']) {
    assert.equal(schemas[name].additionalProperties, false, `${name} is closed`)
  }
  assert.notEqual(schemas.NewUser.additionalProperties, false, 'a new user may carry other properties, echoed back')
  for (const [name, schema] of Object.entries<any>(schemas)) assert.ok(schema.examples?.length > 0, `${name} has an example`)

  const create = document.paths['/users'].post
  assert.deepEqual(create.requestBody.content['application/json'].schema, { $ref: '#/components/schemas/NewUser' })
  assert.equal(create.responses['201'].headers.Location.required, true)
  assert.equal(create.responses['201'].headers.ETag.required, true)
  const links = Object.values<any>(create.responses['201'].links).map((link) => link.operationId)
  assert.deepEqual(links, ['getUser', 'updateUser', 'deleteUser'])
  assert.deepEqual(document.paths['/users'].get.responses['200'].content['application/json'].schema.items, { $ref: '#/components/schemas/UserSummary' })
  assert.equal(document.paths['/users'].get.responses['200'].headers['X-Total-Count'].required, false, 'a filtered page counts only with count=exact')
  assert.deepEqual(document.paths['/users/{id}'].post.responses['200'].content['application/json'].schema, { $ref: '#/components/schemas/ValidatedUser' })
  assert.match(schemas.NewUser.description, /`__proto__` key.*refused/)
  assert.match(schemas.NewUser.properties.email.description, /RFC 5321/)
})

test('PATCH and DELETE /users/{id} declare their body, If-Match and the user\'s ETag', async (t) => {
  const document = await openApiDocument(t)
  const update = document.paths['/users/{id}'].patch
  const erase = document.paths['/users/{id}'].delete
  assert.deepEqual(Object.keys(update.requestBody.content), ['application/merge-patch+json', 'application/json'])
  for (const media of Object.values<any>(update.requestBody.content)) assert.deepEqual(media.schema, { $ref: '#/components/schemas/UserPatch' })
  assert.deepEqual(document.components.schemas.UserPatch.required, undefined, 'every field of a patch may be left out')
  for (const operation of [update, erase]) {
    const ifMatch = operation.parameters.find((parameter: any) => parameter.in === 'header' && parameter.name === 'if-match')
    assert.equal(ifMatch.required, false)
    assert.equal(operation.responses['428'], undefined, 'nothing is 428 unless REQUIRE_IF_MATCH=on')
  }
  assert.equal(update.responses['200'].headers.ETag.required, true)
  assert.equal(document.paths['/users/{id}'].get.responses['200'].headers.ETag.description, update.responses['200'].headers.ETag.description)
  assert.equal(erase.responses['204'].content, undefined, 'a 204 has no body')
})

test('with REQUIRE_IF_MATCH=on, the document requires If-Match on PATCH and DELETE and declares their 428', async (t) => {
  const app = await testApp(t, { REQUIRE_IF_MATCH: 'on' })
  const document = (await app.inject('/documentation/json')).json()
  for (const operation of [document.paths['/users/{id}'].patch, document.paths['/users/{id}'].delete]) {
    const ifMatch = operation.parameters.find((parameter: any) => parameter.in === 'header' && parameter.name === 'if-match')
    assert.equal(ifMatch.required, true)
    assert.ok(operation.responses['428'] !== undefined)
  }
})

test('the request schemas of POST /users/{id} are in the document as validated', async (t) => {
  const document = await openApiDocument(t)
  const operation = document.paths['/users/{id}'].post
  const parameters = Object.fromEntries(operation.parameters.map((parameter: any) => [`${parameter.in}:${parameter.name}`, parameter.schema]))
  assert.equal(parameters['path:id'].pattern, '^[0-9a-fA-F]{24}$')
  assert.equal(parameters['query:limit'].default, 10)
  assert.equal(parameters['query:offset'].default, 0)
  const required = Object.fromEntries(operation.parameters.map((parameter: any) => [parameter.name, parameter.required]))
  assert.deepEqual(required, { id: true, limit: false, offset: false }, 'a parameter with a default may be left out')
  assert.deepEqual(operation.requestBody.content['application/json'].schema, { $ref: '#/components/schemas/UserToValidate' })
  const body = document.components.schemas.UserToValidate
  assert.deepEqual(body.required, ['name', 'email'])
  assert.equal(body.additionalProperties, false)
  assert.equal(body.properties.email.format, 'email')
  assert.equal(body.properties.age.minimum, 0)
})

/** The document under each setting that changes it: tokens and rate limiting off, and on. */
const documentSettings: Array<Record<string, string>> = [{ AUTH: 'off' }, { AUTH: 'all', JWT_SECRET: 'a-test-secret-that-is-long-enough-for-hs256', RATE_LIMIT_MAX: '10' }]

test('the OpenAPI document is valid and free of errors under Redocly\'s recommended rules, whatever the settings', async (t) => {
  for (const settings of documentSettings) {
    const problems = await redoclyProblems(await openApiDocument(t, settings))
    assert.deepEqual(problems.filter((problem) => problem.severity === 'error'), [], JSON.stringify(settings))
    // The one warning: an operation with no client error to declare (health, readiness, the
    // greeting and the tickets without tokens) is not given one it never answers.
    assert.deepEqual(problems.filter((problem) => problem.rule !== 'operation-4xx-response'), [], JSON.stringify(settings))
  }
})

test('the docs UI is served by the service itself, with no asset from elsewhere', async (t) => {
  const app = await testApp(t)
  const page = await app.inject('/documentation/')
  assert.equal(page.statusCode, 200)
  assert.match(String(page.headers['content-type']), /^text\/html/)
  const assets = [...page.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((match) => match[1] as string)
  assert.ok(assets.length > 0)
  for (const asset of assets) {
    assert.doesNotMatch(asset, /^(https?:)?\/\//, `${asset} is served locally`)
    const loaded = await app.inject(new URL(asset, 'http://localhost/documentation/').pathname)
    assert.equal(loaded.statusCode, 200, asset)
  }
  const initializer = await app.inject('/documentation/static/swagger-initializer.js')
  assert.match(initializer.body, /validatorUrl: null/)
  assert.equal((await app.inject('/documentation')).statusCode, 200)
})

test('the docs page\'s former address, /documentation/static/index.html, leads to it in one redirect, with or without a query', async (t) => {
  const app = await testApp(t)
  for (const url of ['/documentation/static/index.html', '/documentation/static/index.html?utm_source=mail']) {
    const former = await app.inject(url)
    assert.deepEqual([former.statusCode, former.headers.location], [302, '/documentation/'], url)
  }
})

test('the docs page fills in no Idempotency-Key: the document offers no value for it, so each person sends their own', async (t) => {
  const document = await openApiDocument(t)
  const parameter = document.paths['/users'].post.parameters.find((candidate: { name: string }) => candidate.name === 'idempotency-key')
  assert.ok(parameter !== undefined)
  for (const field of ['example', 'examples']) {
    assert.equal(parameter[field], undefined, field)
    assert.equal(parameter.schema[field], undefined, `schema.${field}`)
  }
})
