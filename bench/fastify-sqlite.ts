/**
 * Plain Fastify (bench/plain-fastify.ts) with SQLite written the simple way (bench/sqlite-users.ts).
 * `node bench/fastify-sqlite.ts <port> <database file>`.
 */
import { plainFastify } from './plain-fastify.js'
import { addSqliteUsers } from './sqlite-users.js'

const app = await plainFastify()
addSqliteUsers(app, process.argv[3]!)
await app.listen({ port: Number(process.argv[2]), host: '127.0.0.1' })
