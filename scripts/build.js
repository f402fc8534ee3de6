// @ts-check
/**
 * `npm run build` (also the `prepare` script): bundles the server, the CLI tools and the SQLite
 * worker into dist/, a file each and the chunks they share, with esbuild alone, so a production
 * install builds what it starts (docs/build.md).
 */
import { cp, readFile } from 'node:fs/promises'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

// esbuild is a dev dependency: an install without them (`npm ci --omit=dev`) cannot build.
const { build } = await import('esbuild').catch((/** @type {NodeJS.ErrnoException} */ error) => {
  if (error.code !== 'ERR_MODULE_NOT_FOUND') throw error
  console.error('npm run build needs esbuild, a dev dependency: install with `npm ci`, then `npm prune --omit=dev` for production (docs/build.md)')
  process.exit(1)
})

const repositoryRoot = fileURLToPath(new URL('..', import.meta.url))
const EXTERNAL = ['better-sqlite3', 'pg', 'pg-native', 'pino-pretty']

/** What `npm start`, `npm run migrate` and `npm run token` run, from the repository's root. */
export const SERVER_BUNDLE = 'dist/server.js'
const SERVER_ENTRY = 'src/process/server.ts'
const ENTRY_POINTS = [SERVER_ENTRY, 'src/process/cli/migrate.ts', 'src/process/cli/token.ts', 'src/process/cli/backup.ts']

/**
 * Swagger UI serves the files of its own folder, which it finds by `__dirname`. Bundled, it
 * shares the bundle's @fastify/static and yaml instead of loading a second copy of each, and its
 * files are copied to `swagger-ui/` beside the server's chunks, where `__dirname` points: the
 * package itself is a dev dependency, not needed to run.
 */
const SWAGGER_UI_PACKAGE = dirname(fileURLToPath(import.meta.resolve('@fastify/swagger-ui/package.json')))
const SWAGGER_UI_FILE = /^(.*[\\/]node_modules[\\/]@fastify[\\/]swagger-ui)[\\/].*\.js$/
const SWAGGER_UI_COPY = 'swagger-ui'
/** @type {import('esbuild').Plugin} */
const swaggerUiFolder = {
  name: 'swagger-ui-folder',
  setup (build) {
    build.onLoad({ filter: SWAGGER_UI_FILE }, async ({ path }) => {
      const packageRoot = /** @type {string} */ (SWAGGER_UI_FILE.exec(path)?.[1])
      // The bundle's `require` resolves from the chunk's own file (its banner).
      const folder = JSON.stringify(relative(packageRoot, dirname(path)))
      const copied = `require('node:path').join(require('node:path').dirname(require.resolve('./${SWAGGER_UI_COPY}/static/logo.svg')), '..', ${folder})`
      return { contents: (await readFile(path, 'utf8')).replaceAll('__dirname', copied), loader: 'js' }
    })
    build.onEnd(async (result) => {
      if (result.errors.length > 0 || build.initialOptions.outdir === undefined) return
      await cp(join(SWAGGER_UI_PACKAGE, 'static'), join(build.initialOptions.outdir, SWAGGER_UI_COPY, 'static'), { recursive: true })
    })
  }
}

/**
 * The SQLite worker, which src/storage/sqlite.ts starts from the file beside its own
 * (`./sqlite-worker.js`): beside the server's bundle, then, whatever else is bundled.
 */
const SQLITE_WORKER = { in: join(repositoryRoot, 'src/storage/sqlite-worker.ts'), out: 'sqlite-worker' }

/**
 * How a program of this repository becomes a bundle that `node` runs alone: the service's
 * entry points here, and the benchmark's plain servers (bench/run.ts), built the same way so
 * that their start-up and memory compare with the service's.
 * @type {import('esbuild').BuildOptions}
 */
export const NODE_BUNDLE = {
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node22',
  external: EXTERNAL,
  // Not tsconfig.json, which extends a dev dependency's: a production install has none.
  // Nothing in it changes what esbuild writes, since imports of types are marked as such.
  tsconfigRaw: { compilerOptions: { verbatimModuleSyntax: true } },
  // The CommonJS dependencies inside the bundle require Node's own modules.
  banner: { js: "import { createRequire as createRequireOfBundle } from 'node:module'; const require = createRequireOfBundle(import.meta.url);" },
  // Names are kept, so stack traces name their functions; `node --enable-source-maps`
  // maps them to the sources. Without comments and line breaks the bundle is smaller and
  // holds no character beyond Latin-1, so V8 keeps it in one byte a character, not two.
  minifyWhitespace: true,
  legalComments: 'external',
  sourcemap: true,
  logLevel: 'warning'
}

/**
 * Bundles each entry point (a path under src/process/) into `outdir`, keeping its place below it
 * (src/process/server.ts becomes `outdir`/server.js). The server and the SQLite worker beside it
 * share chunks, and what the server imports only when configured is a chunk of its own; the CLI
 * tools are one file each.
 * @param {{ entryPoints: string[], outdir: string }} options
 */
export async function bundle ({ entryPoints, outdir }) {
  const entry = (/** @type {string} */ path) => ({ in: join(repositoryRoot, path), out: path.replace(/^src\/process\//, '').replace(/\.ts$/, '') })
  const tools = entryPoints.filter((path) => path !== SERVER_ENTRY)
  const builds = []
  if (entryPoints.includes(SERVER_ENTRY)) {
    builds.push(build({
      ...NODE_BUNDLE,
      entryPoints: [entry(SERVER_ENTRY), SQLITE_WORKER],
      outdir,
      // What is imported only when configured (tracing, Redis) goes in chunks of its own, which
      // a process without that feature never loads.
      splitting: true,
      // Beside the server, where the SQLite worker is found from whichever file starts it.
      chunkNames: '[name]-[hash]',
      plugins: [swaggerUiFolder]
    }))
  }
  if (tools.length > 0) builds.push(build({ ...NODE_BUNDLE, entryPoints: tools.map(entry), outdir }))
  await Promise.all(builds)
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await bundle({ entryPoints: ENTRY_POINTS, outdir: join(repositoryRoot, 'dist') })
}
