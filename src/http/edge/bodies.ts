/**
 * JSON bodies, read within BODY_LIMIT and MAX_BODY_BYTES for all held at once, counted as they
 * arrive, kept as sent for the echo, bounded in depth, then parsed (docs/decisions/0007-json-body-parser.md). A
 * refusal fails the request after parsing, so the connection stays open.
 */
import { isUtf8 } from 'node:buffer'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { errorCodes, type FastifyInstance, type FastifyReply, type FastifyRequest, type HookHandlerDoneFunction } from 'fastify'
import { AppError } from '../errors.js'
import { hasDuplicateKeys } from './duplicate-keys.js'

const MAX_BODY_BYTES = 64 * 1024 * 1024

declare module 'fastify' {
  interface FastifyRequest {
    /** The JSON body as it arrived; null without one. */
    bodyBytes: Buffer | null
    /** How many bytes of this request's body have arrived. */
    bodyBytesReceived: number
    /** Why this request's body was refused, if it was. */
    bodyRefusal: Error | null
  }
}

/** A JSON Merge Patch (RFC 7396): JSON that only `PATCH` takes; elsewhere it is refused as any other type. */
const MERGE_PATCH = 'application/merge-patch+json'

/**
 * The deepest nesting of arrays and objects a body may have, as Jackson's default bounds it: a
 * deeper one costs the parser and the checks after it more than its size says, and no record needs it.
 */
export const MAX_JSON_DEPTH = 1000

/** Whether a JSON text opens more than `max` arrays and objects inside one another; strings are skipped. */
function nestedDeeperThan (text: string, max: number): boolean {
  let depth = 0
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x22) { // a string, to its closing quote
      for (i++; i < text.length && text.charCodeAt(i) !== 0x22; i++) if (text.charCodeAt(i) === 0x5c) i++
    } else if (c === 0x5b || c === 0x7b) { // [ {
      if (++depth > max) return true
    } else if (c === 0x5d || c === 0x7d) { // ] }
      depth--
    }
  }
  return false
}

/**
 * Bodies are never decompressed: one with a content coding is refused rather than read as something
 * its header says it is not (RFC 9110 §8.4).
 */
const isIdentity = (contentEncoding: string | undefined): boolean =>
  contentEncoding === undefined || ['', 'identity'].includes(contentEncoding.trim().toLowerCase())

function isJson (text: string): boolean {
  try {
    JSON.parse(text)
    return true
  } catch {
    return false
  }
}

/** Whether the request's framing announces a body (RFC 9112 §6.3). */
const announcesBody = ({ headers }: IncomingMessage): boolean =>
  headers['transfer-encoding'] !== undefined || (headers['content-length'] !== undefined && headers['content-length'] !== '0')

function failIfBodyRefused (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void {
  if (request.bodyRefusal === null) done()
  else done(request.bodyRefusal)
}

/** Reads every request's JSON body within its bounds; called by the edge plugin. */
export function readJsonBodies (app: FastifyInstance, bodyLimit: number): void {
  // A body as large as BODY_LIMIT always fits, once no other body is held.
  const maxBytes = Math.max(MAX_BODY_BYTES, bodyLimit)
  let held = 0
  app.decorateRequest('bodyBytes', null)
  app.decorateRequest('bodyBytesReceived', 0)
  app.decorateRequest('bodyRefusal', null)

  // The answers whose `100 Continue` waits until their body is read. One without a body gets
  // it at once, as from Node, so that its connection is kept.
  const continueDeferred = new WeakMap<IncomingMessage, ServerResponse>()
  app.server.on('checkContinue', (request: IncomingMessage, response: ServerResponse) => {
    if (announcesBody(request)) continueDeferred.set(request, response)
    else response.writeContinue()
    app.server.emit('request', request, response)
  })

  // A refused body fails its request here, after parsing, so that the connection stays open.
  app.addHook('preValidation', failIfBodyRefused)

  // What a body holds is given back once its answer is done (sent, or its connection gone).
  // Only a request that names its content type has its body read.
  app.addHook('preParsing', (request, reply, payload, done) => {
    if (request.headers['content-type'] !== undefined) reply.raw.once('close', () => { held -= request.bodyBytesReceived })
    done(null, payload)
  })

  const parseJson = app.getDefaultJsonParser('error', 'error')
  // Without this, text/plain would be parsed as a string.
  app.removeContentTypeParser(['application/json', 'text/plain'])
  app.addContentTypeParser(['application/json', MERGE_PATCH], (request, payload, done) => {
    const fail = (error: Error) => {
      request.bodyRefusal = error
      done(null, undefined)
    }
    if (request.method !== 'PATCH' && request.headers['content-type']?.toLowerCase().startsWith(MERGE_PATCH) === true) {
      fail(new errorCodes.FST_ERR_CTP_INVALID_MEDIA_TYPE(MERGE_PATCH))
      return
    }
    if (!isIdentity(request.headers['content-encoding'])) {
      fail(new AppError('unsupported_content_encoding'))
      return
    }
    if (Number(request.headers['content-length']) > bodyLimit) {
      fail(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE())
      return
    }
    const chunks: Buffer[] = []
    /** Stops reading; what is left of the body is dropped as it arrives. */
    const stop = () => {
      payload.removeListener('data', onData)
      payload.removeListener('end', onEnd)
      payload.removeListener('error', onAbort)
    }
    const refuse = (error: Error) => {
      stop()
      fail(error)
    }
    function onData (chunk: Buffer) {
      if (request.bodyBytesReceived + chunk.length > bodyLimit) return refuse(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE())
      if (held + chunk.length > maxBytes) return refuse(new AppError('too_many_bodies'))
      held += chunk.length
      request.bodyBytesReceived += chunk.length
      chunks.push(chunk)
    }
    function onAbort () {
      refuse(new AppError('body_incomplete'))
    }
    function onEnd () {
      stop()
      // A copy, never a view of the connection's read buffer.
      const bytes = Buffer.concat(chunks)
      if (!isUtf8(bytes)) {
        fail(new AppError('json_not_utf8'))
        return
      }
      request.bodyBytes = bytes
      const text = bytes.toString('utf8')
      if (nestedDeeperThan(text, MAX_JSON_DEPTH)) {
        fail(new AppError('json_too_deep', { depth: MAX_JSON_DEPTH }))
        return
      }
      parseJson(request, text, (error, body) => {
        // Valid JSON that the parser refused holds a key it guards against (prototype poisoning).
        if (error !== null) fail(isJson(text) ? new AppError('forbidden_json_key') : error)
        else if (hasDuplicateKeys(text)) fail(new AppError('duplicate_json_member'))
        else done(null, body)
      })
    }
    // A request whose framing announces no body (a POST with a Content-Type and neither
    // Content-Length nor Transfer-Encoding) arrives as a stream already ended, which emits no
    // 'end' (Node's optimizeEmptyRequests, app.ts): its body is the empty one.
    if (payload.readableEnded) {
      onEnd()
      return
    }
    continueDeferred.get(request.raw)?.writeContinue()
    continueDeferred.delete(request.raw)
    payload.on('data', onData)
    payload.on('end', onEnd)
    payload.on('error', onAbort)
  })
}
