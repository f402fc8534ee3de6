/** Part 6 of `npm run bench`: POST /users with the outbox, without it, with a reader of the feed, and with many. */
import { once } from 'node:events'
import { copyFileSync } from 'node:fs'
import { get, type ClientRequest, type IncomingMessage } from 'node:http'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import Sqlite from 'better-sqlite3'
import { compare, medianRatio, rssMegabytes, type Sample, summarise } from './measure.js'
import { folder, values } from './options.js'
import { mark, write } from './report.js'
import { postgresSchema } from './seeds.js'
import { type Server, startBundle, startService, stop } from './servers.js'
import { chosen, workload } from './workloads.js'

const EVENTS_TARGET = 0.8
const MANY_READERS = 500
/** The bounds on streams raised for the many readers, all from one address. */
const MANY_READERS_ENV = { EVENTS_MAX_READERS: String(MANY_READERS), EVENTS_MAX_READERS_PER_CLIENT: String(MANY_READERS) }
const eventsWorkload = { ...workload('POST /users'), name: 'POST /users with events' }

/** A copy of the seeded SQLite database with the outbox's triggers (migration 2026-12-02-user-events) dropped: writes without events. */
function withoutEventsSqlite (seed: string): string {
  const file = join(folder, 'seed-without-events.db')
  copyFileSync(seed, file)
  const database = new Sqlite(file)
  for (const trigger of ['user_created_event', 'user_updated_event', 'user_deleted_event']) database.exec(`drop trigger ${trigger}`)
  database.close()
  return file
}

/** What each reader of /events costs its server in memory, from the RSS before and after they attach. */
interface Readers { close: () => void, kilobytesEach: () => number }

/**
 * Gives `server` `count` readers of /events from each start of its process on, which read every
 * event as it comes; `close` ends them.
 */
function withEventsReaders (server: Server, count = 1): Server & Readers {
  let readers: ClientRequest[] = []
  let kilobytesEach = Number.NaN
  const attach = async () => {
    const before = rssMegabytes(server.process.pid!)
    readers = await Promise.all(Array.from({ length: count }, async () => {
      const reader = get({ host: '127.0.0.1', port: server.port, path: '/events', headers: { accept: 'text/event-stream' }, agent: false })
      reader.on('error', () => {})
      const [response] = await once(reader, 'response') as [IncomingMessage]
      if (response.statusCode !== 200) throw new Error(`GET /events answered ${response.statusCode}`)
      response.resume()
      return reader
    }))
    await sleep(500)
    kilobytesEach = (rssMegabytes(server.process.pid!) - before) * 1024 / count
  }
  const restart = server.restart
  server.restart = async () => {
    for (const reader of readers) reader.destroy()
    await restart()
    await attach()
  }
  return Object.assign(server, { close: () => { for (const reader of readers) reader.destroy() }, kilobytesEach: () => kilobytesEach })
}

export async function writesWithEvents (seed: string): Promise<void> {
  if (!chosen(eventsWorkload)) return
  type Reading = Server & Readers
  const databases: Array<{ name: string, on: Server, off: Server, read: Reading, many: Reading, close?: () => Promise<void> }> = []
  databases.push({
    name: 'SQLite',
    on: await startService('events on', seed),
    off: await startService('events off', withoutEventsSqlite(seed)),
    read: withEventsReaders(await startService('events on, a reader', seed)),
    many: withEventsReaders(await startService(`events on, ${MANY_READERS} readers`, seed, undefined, MANY_READERS_ENV), MANY_READERS)
  })
  if (values.postgres !== undefined) {
    const schemas = await Promise.all(['on', 'off', 'read', 'many'].map(async (kind) => await postgresSchema(values.postgres!, `bench_events_${kind}`)))
    const [on, off, read, many] = schemas as [typeof schemas[0], typeof schemas[0], typeof schemas[0], typeof schemas[0]]
    await off.admin.query('drop trigger user_events on users')
    databases.push({
      name: 'PostgreSQL',
      on: await startBundle('events on', () => on.serviceUrl),
      off: await startBundle('events off', () => off.serviceUrl),
      read: withEventsReaders(await startBundle('events on, a reader', () => read.serviceUrl)),
      many: withEventsReaders(await startBundle(`events on, ${MANY_READERS} readers`, () => many.serviceUrl, undefined, MANY_READERS_ENV), MANY_READERS),
      close: async () => { for (const schema of schemas) await schema.drop() }
    })
  }
  write('## Writes with events', '',
    'POST /users on the service as shipped (events on), on the same build with the outbox\'s triggers dropped from its database (events off), ' +
    `as shipped with a reader of /events attached, and with ${MANY_READERS} (the bounds on streams raised for them)` +
    `${values.postgres === undefined ? ' (on SQLite; `--postgres <url>` adds PostgreSQL)' : ''}. Memory per reader is the RSS its readers added, over their number.`, '',
    `| database | events off req/s | events on req/s | on ÷ off (target ≥ ${EVENTS_TARGET}×) | a reader req/s | a reader ÷ off (target ≥ ${EVENTS_TARGET}×) | ` +
    `${MANY_READERS} readers req/s | ${MANY_READERS} readers ÷ on (target ≥ ${EVENTS_TARGET}×) | memory per reader, KB |`,
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|')
  for (const { name, on, off, read, many, close } of databases) {
    const [offSamples, onSamples, readSamples, manySamples] = await compare([off, on, read, many].map((server) => ({ server, workload: eventsWorkload }))) as [Sample[], Sample[], Sample[], Sample[]]
    write(`| ${name} | ${summarise(offSamples).rps.toFixed(0)} | ${summarise(onSamples).rps.toFixed(0)} | ${mark(medianRatio(onSamples, offSamples), EVENTS_TARGET)} | ` +
      `${summarise(readSamples).rps.toFixed(0)} | ${mark(medianRatio(readSamples, offSamples), EVENTS_TARGET)} | ` +
      `${summarise(manySamples).rps.toFixed(0)} | ${mark(medianRatio(manySamples, onSamples), EVENTS_TARGET)} | ${many.kilobytesEach().toFixed(1)} |`)
    read.close()
    many.close()
    for (const server of [on, off, read, many]) await stop(server)
    await close?.()
  }
  write('')
}
