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
 *
 * Small files are kept in memory for plain GETs and HEADs, with the headers `@fastify/send`
 * gives a whole file; conditional and range requests go to `@fastify/send`. Through it, every
 * request made four trips to the thread pool (stat, open, read, close), and
 * `GET /index.html` ran at a sixth of the speed of `GET /`. A kept file is compared with the
 * disk when it is asked for a second or more after the last comparison, and read again if
 * its size or modification time changed, so a changed file is served within a second.
 */
import { readdir, readFile, stat } from 'node:fs/promises'
import { join, relative, resolve, sep } from 'node:path'
import { isUtf8MimeType, mime } from '@fastify/send'
import fastifyStatic from '@fastify/static'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'

/** How long the listing and a kept file are trusted before the disk is looked at again. */
const TRUSTED_FOR_MS = 1000
const KEPT_FILE_MAX_BYTES = 64 * 1024
const KEPT_FILES_MAX_BYTES = 8 * 1024 * 1024

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

interface KeptFile {
  body: Buffer
  headers: Record<string, string | number>
  modified: number
}

/**
 * The file as `@fastify/send` would answer a plain GET for it, or undefined when it is not
 * one to keep: gone, larger than `room`, or of a type send names no content type for.
 */
async function readSmallFile (file: string, previous: KeptFile | undefined, room: number): Promise<KeptFile | undefined> {
  const stats = await stat(file).catch(() => undefined)
  if (stats === undefined || !stats.isFile() || stats.size > Math.min(room, KEPT_FILE_MAX_BYTES)) return undefined
  const modified = stats.mtime.getTime()
  if (previous !== undefined && previous.modified === modified && previous.body.length === stats.size) return previous
  const type = mime.getType(file)
  if (type === null) return undefined
  const body = await readFile(file).catch(() => undefined)
  // Changed while being read: send answers until the next comparison.
  if (body === undefined || body.length !== stats.size) return undefined
  return {
    body,
    modified,
    headers: {
      'accept-ranges': 'bytes',
      'cache-control': 'public, max-age=0',
      'last-modified': stats.mtime.toUTCString(),
      etag: `W/"${stats.size.toString(16)}-${modified.toString(16)}"`,
      'content-type': isUtf8MimeType(type) ? `${type}; charset=utf-8` : type,
      'content-length': stats.size
    }
  }
}

/** Small files of the folder, by URL path, within a budget of memory. */
class SmallFiles {
  /** The file as last read (undefined if not kept), and when it was last compared with the disk. */
  private readonly entries = new Map<string, { file: KeptFile | undefined, checkedAt: number }>()
  private readonly checking = new Map<string, Promise<KeptFile | undefined>>()
  private bytes = 0

  constructor (private readonly root: string) {}

  async get (path: string): Promise<KeptFile | undefined> {
    const entry = this.entries.get(path)
    if (entry !== undefined && Date.now() - entry.checkedAt < TRUSTED_FOR_MS) return entry.file
    let check = this.checking.get(path)
    if (check === undefined) {
      check = this.reread(path, entry?.file).finally(() => this.checking.delete(path))
      this.checking.set(path, check)
    }
    return await check
  }

  private async reread (path: string, previous: KeptFile | undefined): Promise<KeptFile | undefined> {
    const room = () => KEPT_FILES_MAX_BYTES - this.bytes + (previous?.body.length ?? 0)
    const read = await readSmallFile(join(this.root, path), previous, room())
    // Other files may have been kept while this one was read.
    const file = read !== undefined && read.body.length <= room() ? read : undefined
    this.bytes += (file?.body.length ?? 0) - (previous?.body.length ?? 0)
    this.entries.set(path, { file, checkedAt: Date.now() })
    return file
  }
}

const PARTIAL_OR_CONDITIONAL = ['range', 'if-range', 'if-match', 'if-none-match', 'if-modified-since', 'if-unmodified-since']
const isPlain = (request: FastifyRequest) => PARTIAL_OR_CONDITIONAL.every((header) => request.headers[header] === undefined)

async function staticFiles (app: FastifyInstance, options: { root: string }): Promise<void> {
  const root = resolve(options.root)
  await app.register(fastifyStatic, { root, serve: false, dotfiles: 'ignore' })

  const smallFiles = new SmallFiles(root)
  let files = await listFiles(root)
  let listedAt = Date.now()
  let relisting: Promise<void> | undefined

  async function isListed (path: string): Promise<boolean> {
    if (files.has(path)) return true
    if (Date.now() - listedAt < TRUSTED_FOR_MS) return false
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
      const kept = isPlain(request) ? await smallFiles.get(path) : undefined
      if (kept !== undefined) return reply.headers(kept.headers).send(kept.body)
      return reply.sendFile(path)
    }
  })
}

export default fp(staticFiles, { name: 'static-files' })
