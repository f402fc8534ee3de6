import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { promisify } from 'node:util'
import SwaggerParser from '@apidevtools/swagger-parser'
import { testApp } from './helpers.js'

const operations = [
  ['get', '/'], ['get', '/custom'], ['get', '/users'], ['post', '/users'],
  ['get', '/users/{id}'], ['post', '/users/{id}'], ['get', '/health'], ['get', '/ready'], ['get', '/metrics']
] as const

async function openApiDocument (t: Parameters<typeof testApp>[0], env: Record<string, string> = {}) {
  const app = await testApp(t, env)
  const response = await app.inject('/documentation/json')
  assert.equal(response.statusCode, 200)
  return response.json()
}

test('the OpenAPI document is valid OpenAPI 3 at version 1.0.0', async (t) => {
  const document = await openApiDocument(t)
  assert.match(document.openapi, /^3\./)
  assert.equal(document.info.version, '1.0.0')
  await SwaggerParser.validate(structuredClone(document))
})

test('every route is documented with a summary, an operationId, a tag and its error responses', async (t) => {
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
      if (Number(status) >= 400) {
        assert.deepEqual(response.content['application/json'].schema.required, ['error'], `${method} ${path} ${status}`)
      }
    }
  }
  const statuses = (method: string, path: string) => Object.keys(document.paths[path][method].responses)
  assert.deepEqual(statuses('post', '/users'), ['201', '400', '413', '415', '500'])
  assert.deepEqual(statuses('get', '/users/{id}'), ['200', '404', '500'])
  assert.deepEqual(statuses('get', '/ready'), ['200', '503'])
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
  const body = operation.requestBody.content['application/json'].schema
  assert.deepEqual(body.required, ['name', 'email'])
  assert.equal(body.additionalProperties, false)
  assert.equal(body.properties.email.format, 'email')
  assert.equal(body.properties.age.minimum, 0)
})

test('the OpenAPI document has no errors under Redocly\'s recommended rules, with and without tokens', async (t) => {
  const folder = mkdtempSync(join(tmpdir(), 'openapi-'))
  t.after(() => rmSync(folder, { recursive: true, force: true }))
  const redocly = createRequire(import.meta.url).resolve('@redocly/cli/bin/cli.js')

  for (const auth of ['off', 'all']) {
    const file = join(folder, `openapi-${auth}.json`)
    writeFileSync(file, JSON.stringify(await openApiDocument(t, { AUTH: auth, JWT_SECRET: 'a-secret' })))
    const { stdout } = await promisify(execFile)(process.execPath, [redocly, 'lint', file, '--extends=recommended', '--format=json'], {
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' }
    })
    const errors = JSON.parse(stdout).problems.filter((problem: { severity: string }) => problem.severity === 'error')
    assert.deepEqual(errors, [], `AUTH=${auth}`)
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
