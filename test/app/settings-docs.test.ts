/**
 * The settings are documented in one table, docs/configuration.md's, checked here against the
 * configuration's schema; the README's short table copies its rows, and no other page keeps one.
 */
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { EnvSchema, FILE_SETTINGS, SETTINGS } from '../../src/config/config.js'
import { repositoryRoot } from '../process.js'

const read = (page: string) => readFileSync(join(repositoryRoot, page), 'utf8')

interface Row { name: string, line: string, defaultText: string, meaning: string }

/** The rows of every table whose first cell is one variable, by name; a header row is none. */
function settingRows (markdown: string): Map<string, Row> {
  const rows = new Map<string, Row>()
  for (const match of markdown.matchAll(/^\| `([A-Z_]+)`(?: \(or `[A-Z_]+`\))? \| (.*?) \| (.*) \|$(?!\n\|---)/gm)) {
    rows.set(match[1]!, { name: match[1]!, line: match[0], defaultText: match[2]!, meaning: match[3]! })
  }
  return rows
}

const documented = settingRows(read('docs/configuration.md'))
const schema = EnvSchema.properties as Record<string, { default?: unknown, enum?: string[] }>

test('docs/configuration.md has one row for every variable the service reads, and no other', () => {
  // Named in a row shared with another variable, or in the paragraph on secrets in files.
  const alternatives = ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', ...FILE_SETTINGS]
  assert.deepEqual([...documented.keys()].sort(), SETTINGS.filter((name) => !alternatives.includes(name)).sort())
  for (const name of alternatives) assert.match(read('docs/configuration.md'), new RegExp(`\`${name}\``))
})

test('each row gives its variable\'s default as the schema has it, and names every value an enumerated one takes', () => {
  for (const [name, property] of Object.entries(schema)) {
    const row = documented.get(name)
    if (row === undefined) continue
    if (property.default !== undefined) {
      assert.ok(row.defaultText.startsWith(`\`${String(property.default)}\``), `${name}'s default is \`${String(property.default)}\`, the row says ${row.defaultText}`)
    }
    for (const value of property.enum ?? []) assert.ok(`${row.defaultText} ${row.meaning}`.includes(`\`${value}\``), `${name}'s row names \`${value}\``)
  }
})

test('the README\'s short table copies docs/configuration.md\'s rows word for word, and links there', () => {
  const readme = read('README.md')
  const section = readme.slice(readme.indexOf('## Configuration'), readme.indexOf('## Read on'))
  const short = settingRows(section)
  assert.ok(short.size >= 5, `the README shows ${short.size} settings`)
  for (const [name, row] of short) assert.equal(row.line, documented.get(name)?.line, `${name}: the README's row is configuration.md's`)
  assert.match(section, /\(docs\/configuration\.md\)/)
})

test('no other page of docs/ keeps a table of settings: they link to the one table', () => {
  for (const page of readdirSync(join(repositoryRoot, 'docs')).filter((file) => file.endsWith('.md') && file !== 'configuration.md')) {
    const rows = [...settingRows(read(join('docs', page))).keys()].filter((name) => SETTINGS.includes(name))
    assert.deepEqual(rows, [], `docs/${page} has rows for settings`)
  }
})
