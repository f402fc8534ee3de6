/**
 * Stops the process with one line, before anything else runs, when the Node.js running it is
 * older than the lines the service supports (`engines` in package.json): the alternative is
 * a stack trace from deep inside a dependency. Every entry point imports this module first.
 */
const NEEDED = 'Node.js 22.13 or later (22, 24 or 26; 26 recommended, see .nvmrc)'

const [major = 0, minor = 0] = process.versions.node.split('.').map(Number)
if (major < 22 || (major === 22 && minor < 13)) {
  process.stderr.write(`Node.js ${process.versions.node} is not supported: install ${NEEDED}.\n`)
  process.exit(1)
}
