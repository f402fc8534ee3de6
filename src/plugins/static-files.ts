/**
 * Files from `STATIC_DIR` (seed §4.8). Registered as a wildcard, so every API route, being
 * more specific, wins over a file of the same path; files added while running are served.
 * `@fastify/send` keeps paths inside the folder and answers ETag/Last-Modified with 304s;
 * there is no directory listing, and a miss falls through to the JSON not-found handler.
 */
import { resolve } from 'node:path'
import fastifyStatic from '@fastify/static'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

async function staticFiles (app: FastifyInstance, options: { root: string }): Promise<void> {
  await app.register(fastifyStatic, {
    root: resolve(options.root),
    wildcard: true,
    list: false,
    decorateReply: false,
    dotfiles: 'ignore'
  })
}

export default fp(staticFiles, { name: 'static-files' })
