/** The options of Fastify and Node's HTTP server that guard the transport: time limits, proxies, refusals. */
import type { FastifyHttpOptions } from 'fastify'
import type { Server } from 'node:http'
import type { Config } from '../../config/config.js'
import { replyWithFrameworkError } from '../errors.js'
import { answerClientError } from './malformed-http.js'

// Node 24.12 and later take this option; Node 22, whose types these are, ignores it.
declare module 'node:http' {
  interface ServerOptions {
    optimizeEmptyRequests?: boolean
  }
}

const trustNearest = (hops: number) => (_address: string, hop: number) => hop < hops

export function serverOptions (config: Config): FastifyHttpOptions<Server> {
  return {
    bodyLimit: config.bodyLimit,
    frameworkErrors: replyWithFrameworkError,
    clientErrorHandler: answerClientError,
    // Slow clients get the time limits below; a request without Host is refused in JSON by
    // request-context.ts. A bodiless request arrives as an ended stream, so its client leaving shows
    // on `reply.raw`'s 'close' (docs/decisions/0016-optimize-empty-requests.md).
    http: { headersTimeout: config.timeouts.headersMs, connectionsCheckingInterval: 1000, requireHostHeader: false, optimizeEmptyRequests: true },
    requestTimeout: config.timeouts.requestMs,
    keepAliveTimeout: config.timeouts.keepAliveMs,
    // Off by default: then X-Forwarded-For is ignored, so no client can name itself another.
    // A hop count trusts that many proxies nearest the service, whatever their addresses.
    trustProxy: typeof config.trustProxy === 'number' ? trustNearest(config.trustProxy) : config.trustProxy
  }
}
