/**
 * `node scripts/test-in-shards.js <test files…>`: runs the files through node:test in two
 * processes at once, each importing its half of the files one after another
 * (`--test-isolation=none --test-shard`), and prints each half's report as it ends. A process
 * of its own for every file loads the service and warms up its code once a file, which costs
 * more than the tests themselves (docs/decisions/0028-in-process-tests-in-two-shards.md).
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'

const SHARDS = 2
const files = process.argv.slice(2)
// Node 22 knows the option by its experimental name only.
const isolation = Number(process.versions.node.split('.')[0]) >= 23 ? '--test-isolation=none' : '--experimental-test-isolation=none'

const shards = Array.from({ length: SHARDS }, async (_, index) => {
  const child = spawn(process.execPath, [
    '--import', 'tsx', '--test', isolation, `--test-shard=${index + 1}/${SHARDS}`, '--test-reporter=spec', ...files
  ], { stdio: ['ignore', 'pipe', 'pipe'] })
  /** @type {Buffer[]} */
  const output = []
  child.stdout.on('data', (chunk) => output.push(chunk))
  child.stderr.on('data', (chunk) => output.push(chunk))
  const [code, signal] = await once(child, 'close')
  process.stdout.write(`# shard ${index + 1} of ${SHARDS}\n`)
  process.stdout.write(Buffer.concat(output))
  return code === 0 && signal === null
})
const passed = await Promise.all(shards)
process.exitCode = passed.every(Boolean) ? 0 : 1
