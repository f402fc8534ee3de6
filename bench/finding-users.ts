/** Part 5 of `npm run bench`: on each database, an order's page near its start beside its page at its last users. */
import Sqlite from 'better-sqlite3'
import { nextAfter, type Sort } from '../src/users/list-query.js'
import { compare, medianRatio, type Sample, summarise } from './measure.js'
import { bigUsers, TABLE_TARGET, values } from './options.js'
import { mark, write } from './report.js'
import { postgresSchema } from './seeds.js'
import { type Server, startBundle, startService, stop } from './servers.js'
import type { Workload } from './workloads.js'

/** The `after` of a page near the start and of one at the last 10 users, in each order part 5 measures. */
type Positions = Record<'name' | '-created_at', { near: string, deep: string }>
const SEARCHES = ['sort=name (after the 10th user, after the 999,990th)', 'sort=-created_at (the same)', 'email= (the first user, the last)'] as const

interface ListedRow { id: number, name: string, created_at: string }

/** The cursors after the 10th user and the 11th from the end of each order, found by `userAt(order by, offset)`. */
async function positions (userAt: (order: string, offset: number) => Promise<ListedRow>): Promise<Positions> {
  const after = async (sort: Sort, order: string) => ({
    near: nextAfter({ sort, filters: {} }, await userAt(order, 9)),
    deep: nextAfter({ sort, filters: {} }, await userAt(order, bigUsers - 11))
  })
  return { name: await after('name', 'name, id'), '-created_at': await after('-created_at', 'created_at desc, id desc') }
}

/** Each search's page near the start and its page at the end: both after a cursor, so that only the depth differs. */
function searchWorkloads (size: number, at: Positions): Array<[Workload, Workload]> {
  const page = (name: string, path: string): Workload => ({ name, method: 'GET', path, expect: 200 })
  const sorted = (sort: 'name' | '-created_at'): [Workload, Workload] => [
    page(`sort=${sort}, near the start`, `/users?limit=10&sort=${sort}&after=${at[sort].near}`),
    page(`sort=${sort}, at the end`, `/users?limit=10&sort=${sort}&after=${at[sort].deep}`)
  ]
  return [
    sorted('name'),
    sorted('-created_at'),
    [page('email=, the first user', '/users?email=user1@example.com'), page('email=, the last user', `/users?email=user${size}@example.com`)]
  ]
}

/**
 * `size` users in a schema of PostgreSQL's own at `url`, seeded as an operator loads users in bulk
 * (docs/api.md): in one transaction with the count's trigger off, then counted, vacuumed and
 * analysed; and the service on them.
 */
async function seededPostgres (url: string, size: number) {
  const { admin, serviceUrl, drop } = await postgresSchema(url, 'bench_find_users')
  await admin.query(`begin; alter table users disable trigger count_users;
    insert into users (name, email, created_at) select 'user' || i, 'user' || i || '@example.com',
      to_char(timestamp '2026-01-01' + i * interval '1 millisecond', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') from generate_series(1, ${size}) as i;
    alter table users enable trigger count_users;
    update user_counts set total = (select count(*) from users where users.id % 16 = user_counts.shard); commit`)
  await admin.query('vacuum analyze users, user_counts')
  const at = await positions(async (order, offset) =>
    (await admin.query<ListedRow>(`select id, name, created_at from users order by ${order} limit 1 offset ${offset}`)).rows[0]!)
  return { name: 'PostgreSQL', server: await startBundle('PostgreSQL', () => serviceUrl), at, close: drop }
}

export async function findingUsers (bigSeed: string): Promise<void> {
  const databases: Array<{ name: string, server: Server, at: Positions, close?: () => Promise<void> }> = []
  const seeded = new Sqlite(bigSeed, { readonly: true })
  const at = await positions(async (order, offset) => seeded.prepare<[], ListedRow>(`select id, name, created_at from users order by ${order} limit 1 offset ${offset}`).get()!)
  seeded.close()
  databases.push({ name: 'SQLite', server: await startService(`${bigUsers} users`, bigSeed), at })
  if (values.postgres !== undefined) databases.push(await seededPostgres(values.postgres, bigUsers))
  write(`## Finding users: ${bigUsers.toLocaleString('en')} users`, '',
    'Each order\'s page of 10 after the 10th user beside its page at the last 10 users (both after a cursor, so that only the depth differs), ' +
    'and a search by address for the first user beside one for the last' +
    `${values.postgres === undefined ? ' (on SQLite; `--postgres <url>` adds PostgreSQL)' : ''}.`, '',
    `| workload | ${databases.map(({ name }) => `${name} near req/s | ${name} end req/s | end ÷ near (target ≥ ${TABLE_TARGET}×)`).join(' | ')} |`,
    `|---|${databases.map(() => '---:|---:|---:|').join('')}`)
  for (const [index, name] of SEARCHES.entries()) {
    const cells: string[] = []
    for (const { server, at } of databases) {
      const [first, last] = searchWorkloads(bigUsers, at)[index]!
      const [firstSamples, lastSamples] = await compare([{ server, workload: first }, { server, workload: last }]) as [Sample[], Sample[]]
      cells.push(`${summarise(firstSamples).rps.toFixed(0)} | ${summarise(lastSamples).rps.toFixed(0)} | ${mark(medianRatio(lastSamples, firstSamples), TABLE_TARGET)}`)
    }
    write(`| ${name} | ${cells.join(' | ')} |`)
  }
  write('')
  for (const { server, close } of databases) {
    await stop(server)
    await close?.()
  }
}
