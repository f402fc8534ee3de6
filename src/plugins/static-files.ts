/**
 * Files from `STATIC_DIR` (seed §4.8), answered by a wildcard route, so every API route, being
 * more specific, wins over a file of the same path. `@fastify/send` keeps paths inside the
 * folder and answers ETag/Last-Modified with 304s; there is no directory listing, and a miss
 * falls through to the JSON not-found handler.
 *
 * The route serves only files it has seen in a listing of the folder, so a request for one
 * that is not there (any unknown URL) is answered without touching the disk. @fastify/static's
 * own wildcard route read every directory on the path, then stat-ed the file, for every
 * request: unknown URLs ran at a sixth of the speed of `GET /`. The folder is listed again
 * when a miss comes a second or more after the last listing, so a file added while running
 * is served within a second; one listing a second at most, however many misses arrive.
 */
import { readdir, stat } from 'node:fs/promises'
import { join, relative, resolve, sep } from 'node:path'
import fastifyStatic from '@fastify/static'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

const RELIST_AFTER_MS = 1000

/** URL paths (`/docs/guide.txt`) of the regular files under root, dotfiles and dot-folders left out. */
async function listFiles (root: string): Promise<Set<string>> {
  const files = new Set<string>()
  const entries = await readdir(root, { recursive: true, withFileTypes: true }).catch(() => [])
  for (const entry of entries) {
    const path = join(entry.parentPath, entry.name)
    const segments = relative(root, path).split(sep)
    if (segments.some((segment) => segment.startsWith('.'))) continue
    const isFile = entry.isFile() || (entry.isSymbolicLink() && (await stat(path).catch(() => undefined))?.isFile() === true)
    if (isFile) files.add('/' + segments.join('/'))
  }
  return files
}

/** The decoded path of a request's URL, or undefined when it cannot be decoded. */
function pathOf (url: string): string | undefined {
  const queryStart = url.indexOf('?')
  try {
    return decodeURIComponent(queryStart === -1 ? url : url.slice(0, queryStart))
  } catch {
    return undefined
  }
}

async function staticFiles (app: FastifyInstance, options: { root: string }): Promise<void> {
  const root = resolve(options.root)
  await app.register(fastifyStatic, { root, serve: false, dotfiles: 'ignore' })

  let files = await listFiles(root)
  let listedAt = Date.now()
  let relisting: Promise<void> | undefined

  async function isListed (path: string): Promise<boolean> {
    if (files.has(path)) return true
    if (Date.now() - listedAt < RELIST_AFTER_MS) return false
    relisting ??= listFiles(root).then((listed) => {
      files = listed
      listedAt = Date.now()
    }).finally(() => { relisting = undefined })
    await relisting
    return files.has(path)
  }

  app.route({
    method: ['GET', 'HEAD'],
    url: '/*',
    schema: { hide: true },
    async handler (request, reply) {
      const path = pathOf(request.url)
      if (path === undefined || !(await isListed(path))) return reply.callNotFound()
      return reply.sendFile(path)
    }
  })
}

export default fp(staticFiles, { name: 'static-files' })
