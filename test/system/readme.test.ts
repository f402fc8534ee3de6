/** The README's examples and tables, checked against the running service so that they cannot go stale. */
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import test from 'node:test'
import { temporaryFolder } from '../helpers.js'
import { freePort, repositoryRoot, signalGroup, startService } from '../process.js'

const readme = readFileSync(join(repositoryRoot, 'README.md'), 'utf8')

interface Example { command: string, shown: string[] }

/** Every `$ ` command of the README's `sh` blocks, with the lines shown under it. */
function examples (markdown: string): Example[] {
  const found: Example[] = []
  for (const block of markdown.matchAll(/```sh\n([\s\S]*?)```/g)) {
    const lines = (block[1] ?? '').split('\n')
    const line = (at: number): string => lines[at] ?? ''
    for (let i = 0; i < lines.length; i++) {
      if (!line(i).startsWith('$ ')) continue
      let command = line(i).slice(2)
      while (command.endsWith('\\')) command = command.slice(0, -1) + line(++i).trim()
      const shown: string[] = []
      while (i + 1 < lines.length && !line(i + 1).startsWith('$ ') && line(i + 1) !== '') shown.push(line(++i))
      found.push({ command, shown })
    }
  }
  return found
}

/** What differs from one run to the next: tags, request ids, dates. */
const normalize = (line: string): string => line
  .replace(/\r$/, '')
  .replace(/^(etag: )"[A-Za-z0-9_-]{27}"/i, '$1"…"')
  .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '<uuid>')
  .replace(/\d{4}-\d{2}-\d{2}T[\d:.]+Z/g, '<date>')

/** The shown lines come in order among the printed ones, and the first and last are the first and last printed. */
function assertShows (printed: string[], shown: string[], command: string): void {
  const actual = printed.map(normalize).filter((line) => line !== '')
  const expected = shown.map(normalize)
  assert.equal(actual[0], expected[0], `${command}: first line`)
  assert.equal(actual.at(-1), expected.at(-1), `${command}: last line`)
  let at = 0
  for (const line of expected) {
    at = actual.indexOf(line, at)
    assert.notEqual(at, -1, `${command}: "${line}" is not printed in order, in:\n${actual.join('\n')}`)
    at++
  }
}

test('every README example with output prints what the README shows, run in order on a new database', async (t) => {
  const found = examples(readme)
  assert.ok(found.length >= 8, `found ${found.length} examples`)
  const folder = temporaryFolder(t)
  const service = await startService(t, { DATABASE_URL: `sqlite:${join(folder, 'app.db')}` })
  for (const { command, shown } of found) {
    assert.match(command, /^curl /, 'every example is a curl command')
    const run = spawnSync('bash', ['-c', command.replaceAll('localhost:3000', `127.0.0.1:${service.port}`)], { encoding: 'utf8' })
    assert.equal(run.status, 0, `${command}: ${run.stderr}`)
    assertShows(run.stdout.split('\n'), shown, command)
  }
})

test('the Tokens block of docs/tokens.md works when pasted as is: a 401 without the token, a 201 with it', async (t) => {
  const tokens = readFileSync(join(repositoryRoot, 'docs/tokens.md'), 'utf8')
  const block = /Mint a token[\s\S]*?```sh\n([\s\S]*?)```/.exec(tokens)?.[1]
  assert.ok(block !== undefined)
  const port = await freePort()
  const shell = spawn('bash', ['-c', block.replaceAll('localhost:3000', `localhost:${port}`)], {
    cwd: repositoryRoot,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, PORT: String(port), HOST: '127.0.0.1', DATABASE_URL: `sqlite:${join(temporaryFolder(t), 'app.db')}` },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true
  })
  t.after(() => { signalGroup(shell, 'SIGKILL') })
  let stdout = ''
  shell.stdout.on('data', (chunk) => { stdout += String(chunk) })
  const timer = setTimeout(() => signalGroup(shell, 'SIGKILL'), 60_000)
  const [code] = await once(shell, 'exit')
  clearTimeout(timer)
  assert.equal(code, 0)
  const expected = [...block.matchAll(/^# (.*)$/gm)].map((match) => match[1] ?? '')
  for (const line of expected) assert.ok(stdout.includes(line), `"${line}" not in:\n${stdout}`)
})
