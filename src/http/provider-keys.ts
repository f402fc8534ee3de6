/**
 * An identity provider's public keys, by `kid`, from its JWKS: the whole set is kept, fetched again
 * for a `kid` not in it at most once a second (callers at the same time share one fetch) and in the
 * background once it is old; while the provider cannot be reached, a key not kept is a 503
 * (docs/decisions/0022-jwks-set-kept-whole.md).
 */
import { createPublicKey } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import type { TokenOrHeader } from '@fastify/jwt'
import type { FastifyBaseLogger } from 'fastify'
import { AppError, unauthorized } from './errors.js'

/** The set is fetched for an unknown `kid` at most this often, so made-up `kid`s cost the provider little. */
const REFETCH_INTERVAL_MS = 1000
/** How long a fetch of the set may take before the token's request is answered 503. */
const FETCH_TIMEOUT_MS = 3000
/** A set older than this is fetched again in the background, so that keys the provider drops go. */
const MAX_AGE_MS = 600_000

interface PublishedKey { pem: string, alg: string | undefined }

const invalidToken = () => unauthorized('Token is invalid')
const unreachable = () => new AppError('The identity provider cannot be reached to check this token: retry shortly', 503, { 'retry-after': '1' })

/** The signing keys of a JWKS (RFC 7517) that Node can read; others are skipped. */
function signingKeys (body: unknown): Map<string, PublishedKey> {
  const listed = (body as { keys?: unknown } | null)?.keys
  if (!Array.isArray(listed)) throw new Error('the answer is not a JWKS: it has no "keys" list')
  const keys = new Map<string, PublishedKey>()
  for (const jwk of listed as Array<Record<string, unknown>>) {
    if (typeof jwk.kid !== 'string' || (jwk.use !== undefined && jwk.use !== 'sig')) continue
    try {
      const pem = createPublicKey({ key: jwk, format: 'jwk' }).export({ type: 'spki', format: 'pem' }) as string
      keys.set(jwk.kid, { pem, alg: typeof jwk.alg === 'string' ? jwk.alg : undefined })
    } catch {}
  }
  return keys
}

/** The key function @fastify/jwt calls with each token's decoded header. */
export function providerKeys (url: string, algorithms: readonly string[], log: FastifyBaseLogger) {
  let keys = new Map<string, PublishedKey>()
  let fetchedAt = -Infinity
  let fetching: Promise<void> | undefined
  /** Why the provider could not be reached, while it cannot: logged once as it starts and once as it ends. */
  let outage: string | undefined

  async function fetchSet (): Promise<void> {
    fetchedAt = performance.now()
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(FETCH_TIMEOUT_MS), headers: { accept: 'application/json' } })
      if (!response.ok) throw new Error(`it answered HTTP ${response.status}`)
      keys = signingKeys(await response.json())
      if (outage !== undefined) log.info({ jwksUrl: url }, 'the identity provider\'s keys can be fetched again')
      outage = undefined
    } catch (error) {
      if (outage === undefined) {
        outage = (error as Error).message
        log.error({ jwksUrl: url, reason: outage }, 'the identity provider\'s keys cannot be fetched: tokens whose key is not kept are answered 503')
      }
      throw error
    }
  }

  /** Fetches the set once the interval since the last fetch is over; callers meanwhile share that fetch. */
  async function refresh (): Promise<void> {
    if (fetching === undefined) {
      const wait = Math.max(0, fetchedAt + REFETCH_INTERVAL_MS - performance.now())
      fetching = sleep(wait).then(fetchSet).finally(() => { fetching = undefined })
    }
    await fetching
  }

  return async (_request: unknown, token: TokenOrHeader): Promise<string> => {
    const { kid, alg } = 'header' in token ? token.header : token
    // An algorithm not allowed (none, HS256 against a public key) never sends for keys.
    if (typeof kid !== 'string' || typeof alg !== 'string' || !algorithms.includes(alg)) throw invalidToken()
    if (keys.has(kid) && performance.now() - fetchedAt > MAX_AGE_MS) refresh().catch(() => {})
    if (!keys.has(kid)) {
      try {
        await refresh()
      } catch {
        throw unreachable()
      }
    }
    const key = keys.get(kid)
    if (key === undefined || (key.alg !== undefined && key.alg !== alg)) throw invalidToken()
    return key.pem
  }
}
