/** What the parts measure: each workload's request, its expected status, and its yardstick and targets. */
import { values } from './options.js'

export const user = JSON.stringify({ name: 'Ada', email: 'ada@example.com' })
const hex = '507f1f77bcf86cd799439011'

export type YardstickName = 'plain Fastify + headers' | 'plain Fastify + SQLite'
export interface Workload {
  name: string
  method: 'GET' | 'POST'
  path: string
  body?: string
  expect: number
  /** The plain server that is the limit for the same work, and the least ratio to it. */
  yardstick?: YardstickName
  target?: number
  /** The least ratio to what a user would build with Fastify's plugins. */
  pluginsTarget?: number
  /** The least ratio to the yardstick at one connection, in the concurrency sweep. */
  oneConnectionTarget?: number
}
const allWorkloads: Workload[] = [
  { name: 'GET /', method: 'GET', path: '/', expect: 200, yardstick: 'plain Fastify + headers', target: 0.95, pluginsTarget: 1.5 },
  { name: 'GET /custom', method: 'GET', path: '/custom?name=a&age=3', expect: 200, yardstick: 'plain Fastify + headers', target: 0.95, pluginsTarget: 1.5 },
  { name: 'POST /users/{24hex}', method: 'POST', path: `/users/${hex}?limit=5`, body: JSON.stringify({ name: 'Ada', email: 'ada@example.com', age: 36 }), expect: 200, yardstick: 'plain Fastify + headers', target: 0.9, pluginsTarget: 1.5 },
  { name: 'POST /users/{24hex} invalid', method: 'POST', path: `/users/${hex}`, body: JSON.stringify({ name: 'Ada', email: 'not-an-email' }), expect: 400, yardstick: 'plain Fastify + headers', target: 0.9, pluginsTarget: 1.5 },
  { name: 'GET /users/{id}', method: 'GET', path: '/users/500', expect: 200, yardstick: 'plain Fastify + SQLite', target: 0.9, pluginsTarget: 1.5, oneConnectionTarget: 0.75 },
  { name: 'GET /users?limit=10', method: 'GET', path: '/users?limit=10', expect: 200, yardstick: 'plain Fastify + SQLite', target: 0.9, pluginsTarget: 1.5, oneConnectionTarget: 0.75 },
  { name: 'POST /users', method: 'POST', path: '/users', body: user, expect: 201, yardstick: 'plain Fastify + SQLite', pluginsTarget: 3 },
  { name: 'unknown route (404)', method: 'GET', path: '/no/such/route', expect: 404, yardstick: 'plain Fastify + headers' },
  { name: 'GET /index.html', method: 'GET', path: '/index.html', expect: 200 }
]
const only = values.only?.split(',')
export const chosen = (workload: Workload) => only === undefined || only.some((text) => workload.name.includes(text))
export const workloads = allWorkloads.filter(chosen)
export const workload = (name: string) => allWorkloads.find((candidate) => candidate.name === name)!
export const sweepWorkloads = [workload('GET /'), workload('GET /users/{id}'), workload('GET /users?limit=10'), workload('POST /users')].filter(chosen)

/** The table-size sweep's workloads, for a table of `size` users. */
export function tableWorkloads (size: number): Workload[] {
  // 10,000 users from the end of the table, or halfway in a small one.
  const deep = size > 20_000 ? size - 10_000 : Math.floor(size / 2)
  const table: Workload[] = [
    { name: 'GET /users/{id}', method: 'GET', path: `/users/${deep}`, expect: 200 },
    { name: 'GET /users?limit=10 (first page)', method: 'GET', path: '/users?limit=10', expect: 200 },
    { name: 'GET /users?limit=10&after= (keyset page, deep)', method: 'GET', path: `/users?limit=10&after=${deep}`, expect: 200 },
    { name: 'POST /users', method: 'POST', path: '/users', body: user, expect: 201 }
  ]
  return table.filter(chosen)
}
