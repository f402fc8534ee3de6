/**
 * `npm run build` runs this after `tsc`: it bundles the server, from src/server.ts, into one
 * file, dist/bundle/server.js, which `npm start` runs. Loading the 1,100 modules of the
 * service and its dependencies one by one (typebox alone has about 700) took most of
 * start-up; the bundle starts in less than half the time and idles in less memory. See
 * README, "Build".
 *
 * Left outside, loaded from node_modules as usual: the native or optional database drivers,
 * and pino-pretty, a dev dependency for terminals. (pino is bundled; the service uses none of
 * its transports, which start worker threads from pino's own files.)
 */
import { build, type Plugin } from 'esbuild'
import { readFile } from 'node:fs/promises'
import { dirname, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

const EXTERNAL = ['better-sqlite3', 'pg', 'pg-native', 'pino-pretty']

/**
 * Swagger UI serves the files of its own folder, which it finds by `__dirname`; inside the
 * bundle that folder is looked up where the package is installed. Bundled rather than loaded
 * apart, it shares the bundle's @fastify/static and yaml instead of loading a second copy of
 * each, which took about 50 ms of start-up.
 */
const SWAGGER_UI_FILE = /^(.*[\\/]node_modules[\\/]@fastify[\\/]swagger-ui)[\\/].*\.js$/
const swaggerUiFolder: Plugin = {
  name: 'swagger-ui-folder',
  setup (build) {
    build.onLoad({ filter: SWAGGER_UI_FILE }, async ({ path }) => {
      const packageRoot = SWAGGER_UI_FILE.exec(path)![1]!
      const folder = JSON.stringify(relative(packageRoot, dirname(path)))
      const installed = `require('node:path').join(require('node:path').dirname(require.resolve('@fastify/swagger-ui/package.json')), ${folder})`
      return { contents: (await readFile(path, 'utf8')).replaceAll('__dirname', installed), loader: 'js' }
    })
  }
}

/** The bundle `npm run build` writes and `npm start` runs, from the repository's root. */
export const SERVER_BUNDLE = 'dist/bundle/server.js'

export async function bundleServer (outfile: string): Promise<void> {
  await build({
    entryPoints: [fileURLToPath(new URL('../src/server.ts', import.meta.url))],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    external: EXTERNAL,
    plugins: [swaggerUiFolder],
    // The CommonJS dependencies inside the bundle require Node's own modules.
    banner: { js: "import { createRequire as createRequireOfBundle } from 'node:module'; const require = createRequireOfBundle(import.meta.url);" },
    // Names are kept, so stack traces name their functions; `node --enable-source-maps`
    // maps them to the sources. Without comments and line breaks the bundle is 2.2 MB instead
    // of 3.4, and holds no character beyond Latin-1, so V8 keeps it in one byte a character
    // instead of two: idle RSS 79 MB instead of 84. (Full minifying cost 4 MB more.)
    minifyWhitespace: true,
    legalComments: 'external',
    sourcemap: true,
    logLevel: 'warning'
  })
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await bundleServer(fileURLToPath(new URL(`../${SERVER_BUNDLE}`, import.meta.url)))
}
