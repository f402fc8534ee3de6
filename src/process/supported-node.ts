/**
 * Stops the process with one line when its Node is older than `engines` allows, rather than with a
 * stack trace from deep in a dependency. Every entry point imports it first.
 */
const NEEDED = 'Node.js 22.19 or later (22, 24 or 26; 26 recommended, see .nvmrc)'

const [major = 0, minor = 0] = process.versions.node.split('.').map(Number)
if (major < 22 || (major === 22 && minor < 19)) {
  process.stderr.write(`Node.js ${process.versions.node} is not supported: install ${NEEDED}.\n`)
  process.exit(1)
}
