/** Part 4 of `npm run bench`: the same workloads on a small and a big table, side by side. */
import { compare, medianRatio, type Sample, summarise } from './measure.js'
import { bigUsers, TABLE_TARGET, users } from './options.js'
import { latency, mark, write } from './report.js'
import { startService, stop } from './servers.js'
import { tableWorkloads } from './workloads.js'

export async function tableSize (seed: string, bigSeed: string): Promise<void> {
  const small = await startService(`${users} users`, seed)
  const big = await startService(`${bigUsers} users`, bigSeed)
  write(`## Table size: ${users.toLocaleString('en')} and ${bigUsers.toLocaleString('en')} users`, '',
    `A lookup and a keyset page ${bigUsers > 20_000 ? '10,000 users from the end of the table' : 'halfway through the table'}; POST /users last, so that the others see the tables as seeded.`, '',
    `| workload | ${users} users req/s | p50 / p99 ms | ${bigUsers} users req/s | p50 / p99 ms | big ÷ small (target ≥ ${TABLE_TARGET}×) |`,
    '|---|---:|---:|---:|---:|---:|')
  const smallWorkloads = tableWorkloads(users)
  const bigWorkloads = tableWorkloads(bigUsers)
  for (const [index, smallWorkload] of smallWorkloads.entries()) {
    const [smallSamples, bigSamples] = await compare([{ server: small, workload: smallWorkload }, { server: big, workload: bigWorkloads[index]! }]) as [Sample[], Sample[]]
    const [smallSample, bigSample] = [summarise(smallSamples), summarise(bigSamples)]
    write(`| ${smallWorkload.name} | ${smallSample.rps.toFixed(0)} | ${latency(smallSample)} | ${bigSample.rps.toFixed(0)} | ${latency(bigSample)} | ${mark(medianRatio(bigSamples, smallSamples), TABLE_TARGET)} |`)
  }
  write('')
  await stop(small)
  await stop(big)
}
