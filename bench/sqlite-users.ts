/**
 * The user routes on SQLite written the simple way: better-sqlite3, WAL, `synchronous=FULL` (every
 * 201 is on disk), prepared statements, one statement per request and no batching. An empty file
 * is given 1,000 users. Used by bench/fastify-sqlite.ts and bench/fastify-plugins.ts.
 */
import Database from 'better-sqlite3'
import type { FastifyInstance } from 'fastify'
import { newUser, page, userShape } from './plain-fastify.js'

export function addSqliteUsers (app: FastifyInstance, file: string): void {
  const db = new Database(file)
  db.pragma('journal_mode = WAL')
  db.pragma('synchronous = FULL')
  db.exec('create table if not exists users (id integer primary key, name text not null, email text not null)')
  const insert = db.prepare<[string, string]>('insert into users (name, email) values (?, ?)')
  const count = db.prepare<[], { total: number }>('select count(*) as total from users')
  if (count.get()!.total === 0) {
    db.transaction(() => { for (let i = 1; i <= 1000; i++) insert.run(`user${i}`, `user${i}@example.com`) })()
  }
  const byId = db.prepare<[number], { name: string }>('select name from users where id = ?')
  const pageOf = db.prepare<[number, number], { id: number, name: string }>('select id, name from users order by id limit ? offset ?')

  app.get<{ Querystring: { limit: number, offset: number } }>('/users', { schema: page }, async (request, reply) => {
    reply.header('x-total-count', count.get()!.total)
    return pageOf.all(request.query.limit, request.query.offset)
  })
  app.get<{ Params: { id: string } }>('/users/:id', { schema: { response: { 200: userShape } } }, async (request, reply) => {
    const user = byId.get(Number(request.params.id))
    if (user === undefined) return reply.code(404).send({ error: 'User not found' })
    return { id: request.params.id, name: user.name }
  })
  app.post<{ Body: { name: string, email: string } }>('/users', { schema: { body: newUser } }, async (request, reply) => {
    const { lastInsertRowid } = insert.run(request.body.name, request.body.email)
    return reply.code(201).header('location', `/users/${lastInsertRowid}`).send(request.body)
  })
}
