/**
 * `npm run build` runs this after `tsc`: it bundles the server, from src/server.ts, into one
 * file, dist/bundle/server.js, which `npm start` runs. Loading the 1,100 modules of the
 * service and its dependencies one by one (typebox alone has about 700) took most of
 * start-up; the bundle starts in less than half the time and idles in less memory. See
 * README, "Build".
 *
 * Left outside, loaded from node_modules as usual: the native or optional database drivers;
 * pino, whose transports start worker threads from its own files; and Swagger UI, which
 * serves the files of its own folder.
 */
import { build } from 'esbuild'
import { fileURLToPath } from 'node:url'

const EXTERNAL = ['better-sqlite3', 'pg', 'pg-native', 'pino', 'pino-pretty', '@fastify/swagger-ui']

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
