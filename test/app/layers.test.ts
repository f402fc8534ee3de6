/**
 * The source's layers (src/README.md): each folder imports only from the layers below it, and no
 * module imports itself through others, type imports included; plugins declare what they need.
 */
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { test } from 'node:test'
import Fastify, { type FastifyPluginAsync } from 'fastify'
import events from '../../src/events/index.js'
import metricsCollection from '../../src/http/request/metrics.js'
import health from '../../src/routes/health.js'
import metricsRoute from '../../src/routes/metrics.js'
import root from '../../src/routes/root.js'
import users from '../../src/users/index.js'
import { repositoryRoot } from '../process.js'

const source = join(repositoryRoot, 'src')

/** What each top-level part of src/ may import besides itself; `app.ts` is the part named `.`. */
const MAY_IMPORT: Record<string, string[]> = {
  validation: [],
  config: ['validation'],
  storage: ['config'],
  http: ['config', 'storage', 'validation'],
  users: ['config', 'storage', 'http', 'validation'],
  events: ['config', 'storage', 'http'],
  routes: ['config', 'http'],
  '.': ['config', 'storage', 'http', 'users', 'events', 'routes', 'validation'],
  process: ['.', 'config', 'storage', 'http', 'validation']
}

/** Every module of src/ (relative to it), with the modules of src/ it imports. */
function importGraph (): Map<string, string[]> {
  const graph = new Map<string, string[]>()
  const files = readdirSync(source, { recursive: true, encoding: 'utf8' }).filter((file) => file.endsWith('.ts'))
  for (const file of files) {
    const text = readFileSync(join(source, file), 'utf8')
    const specifiers = [...text.matchAll(/(?:\bfrom\s+|\bimport\s*\(\s*|\bimport\s+)'(\.{1,2}\/[^']+)'/g)].map((match) => match[1]!)
    graph.set(file, specifiers.map((specifier) => relative(source, resolve(dirname(join(source, file)), specifier)).replace(/\.js$/, '.ts')))
  }
  return graph
}

const partOf = (file: string): string => file.includes('/') ? file.split('/')[0]! : '.'

test('each part of src/ imports only from the parts below it', () => {
  const graph = importGraph()
  const crossings = [...graph].flatMap(([file, imports]) => imports
    .filter((target) => partOf(target) !== partOf(file) && !MAY_IMPORT[partOf(file)]!.includes(partOf(target)))
    .map((target) => `${file} imports ${target}`))
  assert.deepEqual(crossings, [])
  assert.deepEqual([...new Set([...graph.keys()].map(partOf))].sort(), Object.keys(MAY_IMPORT).sort(), 'every part has its place')
})

test('no module of src/ imports itself through others', () => {
  const graph = importGraph()
  const cycles: string[] = []
  const done = new Set<string>()
  const visit = (file: string, path: string[]) => {
    if (path.includes(file)) {
      cycles.push([...path.slice(path.indexOf(file)), file].join(' > '))
      return
    }
    if (done.has(file)) return
    for (const target of graph.get(file) ?? []) visit(target, [...path, file])
    done.add(file)
  }
  for (const file of graph.keys()) visit(file, [])
  assert.deepEqual(cycles, [])
})

test('src/http/ keeps a folder per stage a request passes, each named in src/README.md and docs/layout.md, and few files beside them', () => {
  const entries = readdirSync(join(source, 'http'), { withFileTypes: true })
  const folders = entries.filter((entry) => entry.isDirectory()).map((entry) => entry.name)
  assert.ok(folders.length >= 3, `folders: ${folders.join(', ')}`)
  assert.ok(entries.filter((entry) => entry.isFile()).length <= 8, 'at most eight files directly in src/http/')
  for (const page of ['src/README.md', 'docs/layout.md']) {
    const text = readFileSync(join(repositoryRoot, page), 'utf8')
    assert.deepEqual(folders.filter((folder) => !text.includes(`\`${folder}/\``)), [], `${page} names every folder of src/http/`)
  }
})

test('a plugin registered without what it needs stops start-up, naming the plugin it needs', async () => {
  const needs: Array<[FastifyPluginAsync<any>, string]> = [
    [users, 'guards'], [events, 'storage'], [root, 'guards'], [health, 'storage'], [metricsRoute, 'guards'], [metricsCollection, 'edge']
  ]
  for (const [plugin, dependency] of needs) {
    const app = Fastify()
    await assert.rejects(async () => { await app.register(plugin, {}).ready() }, (error: Error) => error.message.includes(`'${dependency}'`), `it names ${dependency}`)
    await app.close()
  }
})
