/**
 * Files from `STATIC_DIR`, a route each
 * (docs/decisions/0018-static-files-one-route-per-file.md). An API route wins over a file, paths
 * stay inside the folder, and dotfiles and folders are not served.
 */
import { readdirSync, realpathSync, statSync } from 'node:fs'
import { join, relative, resolve, sep } from 'node:path'
import fastifyStatic from '@fastify/static'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

/**
 * The first segments of the paths of the routes registered after this call, for the static files
 * plugin.
 */
export function apiPathSegments (app: FastifyInstance): Set<string> {
  const segments = new Set<string>()
  app.addHook('onRoute', (route) => {
    // A literal segment: CORS's catch-all OPTIONS route (`*`) claims no file.
    const [segment = ''] = route.url.split('/').filter(Boolean)
    if (/^[\w.-]+$/.test(segment)) segments.add(segment)
  })
  return segments
}

/** The entries under `root` whose real path leaves it (symbolic links out), relative to it; never served. */
function linksOut (root: string): string[] {
  const realRoot = realpathSync(root)
  const outside: string[] = []
  for (const entry of readdirSync(root, { recursive: true, withFileTypes: true })) {
    if (!entry.isSymbolicLink()) continue
    const path = join(entry.parentPath, entry.name)
    let real: string
    try {
      real = realpathSync(path)
    } catch {
      real = ''
    }
    if (real !== realRoot && !real.startsWith(realRoot + sep)) outside.push(relative(root, path))
  }
  return outside
}

async function staticFiles (app: FastifyInstance, options: { root: string, apiSegments: Set<string> }): Promise<void> {
  // A relative STATIC_DIR is from the folder the process was started in: started from
  // another (a service manager without a working directory), `public` is not there.
  const root = resolve(options.root)
  if (!statSync(root, { throwIfNoEntry: false })?.isDirectory()) {
    app.log.warn({ staticDir: root }, 'STATIC_DIR is not a folder: no static files are served (a relative one is from the folder the service was started in)')
    return
  }
  const skipped = linksOut(root)
  if (skipped.length > 0) app.log.warn({ staticDir: root, skipped }, 'STATIC_DIR has links that lead out of it: they are not served')
  await app.register(fastifyStatic, {
    root,
    wildcard: false,
    globIgnore: [...options.apiSegments, ...skipped].flatMap((path) => [path, `${path}/**`]),
    index: false,
    dotfiles: 'ignore',
    redirect: false,
    list: false
  })
}

export default fp(staticFiles, { name: 'static-files' })
