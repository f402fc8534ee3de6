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

/**
 * What the disk held when last looked at, trusted for a while; asked for after that, it is
 * read again, once, however many ask meanwhile.
 */
class DiskView<T> {
  private reading: Promise<T> | undefined

  constructor (
    private value: T,
    private readonly read: (previous: T) => Promise<T>,
    private readAt = Date.now()
  ) {}

  get lastRead (): T {
    return this.value
  }

  async current (): Promise<T> {
    if (Date.now() - this.readAt < TRUSTED_FOR_MS) return this.value
    this.reading ??= this.read(this.value).then((value) => {
      this.value = value
      this.readAt = Date.now()
      return value
    }).finally(() => { this.reading = undefined })
    return await this.reading
  }
}

/** Small files of the folder, by URL path, within a budget of memory. */
class SmallFiles {
  private readonly views = new Map<string, DiskView<KeptFile | undefined>>()
  private bytes = 0

  constructor (private readonly root: string) {}

  async get (path: string): Promise<KeptFile | undefined> {
    let view = this.views.get(path)
    if (view === undefined) {
      // Read at the first request, not when the folder is listed.
      view = new DiskView<KeptFile | undefined>(undefined, async (previous) => await this.reread(path, previous), 0)
      this.views.set(path, view)
    }
    return await view.current()
  }

  private async reread (path: string, previous: KeptFile | undefined): Promise<KeptFile | undefined> {
    const room = () => KEPT_FILES_MAX_BYTES - this.bytes + (previous?.body.length ?? 0)
    const read = await readSmallFile(join(this.root, path), previous, room())
    // Other files may have been kept while this one was read.
    const file = read !== undefined && read.body.length <= room() ? read : undefined
    this.bytes += (file?.body.length ?? 0) - (previous?.body.length ?? 0)
    return file
  }
}

const PARTIAL_OR_CONDITIONAL = ['range', 'if-range', 'if-match', 'if-none-match', 'if-modified-since', 'if-unmodified-since']
const isPlain = (request: FastifyRequest) => PARTIAL_OR_CONDITIONAL.every((header) => request.headers[header] === undefined)

async function staticFiles (app: FastifyInstance, options: { root: string }): Promise<void> {
  const root = resolve(options.root)
  await app.register(fastifyStatic, { root, serve: false, dotfiles: 'ignore' })

  const smallFiles = new SmallFiles(root)
  const listing = new DiskView(await listFiles(root), async () => await listFiles(root))
  // A listed file is served without looking again; only a miss may relist the folder.
  const isListed = async (path: string) => listing.lastRead.has(path) || (await listing.current()).has(path)

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
