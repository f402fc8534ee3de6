/**
 * Files from `STATIC_DIR` (seed §4.8), with @fastify/static. Its wildcard route is less
 * specific than every API route, so an API route wins over a file of the same path. Paths
 * stay inside the folder, ETag and Last-Modified are answered with 304s, dotfiles and folders
 * are not served and nothing is listed, and a miss falls through to the JSON not-found
 * handler. Every request looks at the disk, so a file added or changed is served at once.
 */
import { resolve } from 'node:path'
import fastifyStatic from '@fastify/static'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

async function staticFiles (app: FastifyInstance, options: { root: string }): Promise<void> {
  await app.register(fastifyStatic, {
    root: resolve(options.root),
    index: false,
    dotfiles: 'ignore',
    redirect: false,
    list: false,
    // A folder's URL is no file's: a miss like any other, not send's 403.
    allowedPath: (path) => !path.endsWith('/')
  })
}

export default fp(staticFiles, { name: 'static-files' })
