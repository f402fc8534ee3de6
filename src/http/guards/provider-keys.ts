/**
 * An identity provider's public keys, from its JWKS, named or found from the issuer's metadata:
 * the whole set is kept, fetched again for a key not in it at most once a second (callers at the
 * same time share one fetch) and in the background once it is old; while the provider cannot be
 * reached, a key not kept is a 503; until a key is kept, the set is fetched again in the background,
 * with a back-off (docs/decisions/0022-jwks-set-kept-whole.md).
 */
import { createPublicKey, type KeyObject } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyBaseLogger } from 'fastify'
import type { PublicKeyAlgorithm } from '../../config/tokens.js'
import { AppError, TokenRefusal } from '../errors.js'

/** The set is fetched for an unknown key at most this often, so made-up `kid`s cost the provider little. */
const REFETCH_INTERVAL_MS = 1000
/** How long a fetch of the metadata or the set may take before the token's request is answered 503. */
const FETCH_TIMEOUT_MS = 3000
/** A set older than this is fetched again in the background, so that keys the provider drops go. */
const MAX_AGE_MS = 600_000
/** The largest metadata document or key set read: a real one is a few kilobytes, and a larger answer is refused unread. */
export const MAX_DOCUMENT_BYTES = 1024 * 1024
/** While no key is kept, the set is fetched again in the background: the first wait, doubled after each failure up to the cap. */
const RETRY_FIRST_MS = 1000
export const RETRY_CAP_MS = 10_000

/** Where the keys are: a JWKS URL, or an issuer whose metadata names it. */
export type KeySource = { jwksUrl: string } | { issuer: string }

interface PublishedKey { kid: string | undefined, alg: string | undefined, key: KeyObject, pem: string }

/** The curve each ECDSA algorithm signs on (RFC 7518 §3.4), as Node names it. */
const CURVES: Record<string, string> = { ES256: 'prime256v1', ES384: 'secp384r1', ES512: 'secp521r1' }

/** Whether a token signed with `alg` can have been signed by this key's private half (RFC 7518, RFC 9864). */
export function algorithmFitsKey (alg: string, key: KeyObject): boolean {
  const type = key.asymmetricKeyType
  if (alg.startsWith('RS')) return type === 'rsa'
  if (alg.startsWith('PS')) return type === 'rsa' || type === 'rsa-pss'
  if (alg in CURVES) return type === 'ec' && key.asymmetricKeyDetails?.namedCurve === CURVES[alg]
  if (alg === 'Ed25519') return type === 'ed25519'
  if (alg === 'EdDSA') return type === 'ed25519' || type === 'ed448'
  return false
}

/** The answer for a token whose key the provider could give but did not, or could not be asked for. */
class ProviderProblem extends Error {}

const unreachable = () => new AppError('provider_unreachable')
const unusable = () => new AppError('provider_without_usable_key')

/** The signing keys of a JWKS (RFC 7517) that Node can read; the others are counted, not kept. */
function signingKeys (body: unknown): { keys: PublishedKey[], skipped: number } {
  const listed = (body as { keys?: unknown } | null)?.keys
  if (!Array.isArray(listed)) throw new ProviderProblem('the answer is not a JWKS: it has no "keys" list')
  const keys: PublishedKey[] = []
  for (const jwk of listed as Array<Record<string, unknown>>) {
    if (jwk === null || typeof jwk !== 'object' || (jwk.use !== undefined && jwk.use !== 'sig')) continue
    try {
      const key = createPublicKey({ key: jwk, format: 'jwk' })
      if (key.asymmetricKeyType === undefined) continue
      keys.push({
        kid: typeof jwk.kid === 'string' ? jwk.kid : undefined,
        alg: typeof jwk.alg === 'string' ? jwk.alg : undefined,
        key,
        pem: key.export({ type: 'spki', format: 'pem' }) as string
      })
    } catch {}
  }
  return { keys, skipped: listed.length - keys.length }
}

async function getJson (url: string): Promise<unknown> {
  let response: Response
  try {
    response = await fetch(url, { signal: AbortSignal.timeout(FETCH_TIMEOUT_MS), headers: { accept: 'application/json' }, redirect: 'follow' })
  } catch (error) {
    throw new Error(`${url} cannot be reached: ${(error as Error).message}`)
  }
  if (!response.ok) {
    await response.body?.cancel()
    throw new ProviderProblem(`${url} answered HTTP ${response.status}`)
  }
  const text = await boundedText(url, response)
  try {
    return JSON.parse(text)
  } catch {
    throw new ProviderProblem(`${url} did not answer JSON`)
  }
}

/** The answer's body, read only up to MAX_DOCUMENT_BYTES: a larger one is refused as it arrives. */
async function boundedText (url: string, response: Response): Promise<string> {
  const tooLarge = () => new ProviderProblem(`${url} answered more than ${MAX_DOCUMENT_BYTES / 1024} KiB, more than a key set or its metadata holds`)
  if (Number(response.headers.get('content-length') ?? 0) > MAX_DOCUMENT_BYTES) {
    await response.body?.cancel()
    throw tooLarge()
  }
  const chunks: Uint8Array[] = []
  let size = 0
  try {
    for await (const chunk of response.body ?? []) {
      size += chunk.byteLength
      // Leaving the loop cancels the rest of the body.
      if (size > MAX_DOCUMENT_BYTES) throw tooLarge()
      chunks.push(chunk)
    }
  } catch (error) {
    if (error instanceof ProviderProblem) throw error
    throw new Error(`${url} cannot be read: ${(error as Error).message}`)
  }
  return Buffer.concat(chunks).toString('utf8')
}

/**
 * The JWKS URL in the issuer's metadata: OpenID Connect Discovery's path, then RFC 8414's; the
 * document must name the same issuer, byte for byte, or its keys could sign for another.
 */
async function discoveredJwksUrl (issuer: string): Promise<string> {
  const { origin, pathname } = new URL(issuer)
  const path = pathname === '/' ? '' : pathname.replace(/\/$/, '')
  const places = [`${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`, `${origin}/.well-known/oauth-authorization-server${path}`]
  const problems: string[] = []
  for (const place of places) {
    let metadata: unknown
    try {
      metadata = await getJson(place)
    } catch (error) {
      if (!(error instanceof ProviderProblem)) throw error
      problems.push(error.message)
      continue
    }
    const { issuer: named, jwks_uri: jwksUri } = (metadata ?? {}) as { issuer?: unknown, jwks_uri?: unknown }
    if (named !== issuer) throw new ProviderProblem(`${place} names the issuer ${JSON.stringify(named)}, not JWT_ISSUER ${JSON.stringify(issuer)}`)
    if (typeof jwksUri !== 'string' || !/^https?:\/\//.test(jwksUri)) throw new ProviderProblem(`${place} names no jwks_uri`)
    return jwksUri
  }
  throw new ProviderProblem(`the issuer publishes no metadata: ${problems.join('; ')}`)
}

/** The key that verifies a token: the one its `kid` names, or without one the only key that signs its `alg`; else why none does. */
function chooseKey (keys: PublishedKey[], kid: string | undefined, alg: string): PublishedKey | TokenRefusal {
  const fits = (key: PublishedKey) => (key.alg === undefined || key.alg === alg) && algorithmFitsKey(alg, key.key)
  if (kid !== undefined) {
    const key = keys.find((one) => one.kid === kid)
    if (key === undefined) return new TokenRefusal('kid', `no key of the identity provider's set has kid ${JSON.stringify(kid)}`)
    return fits(key) ? key : new TokenRefusal('algorithm', `the key ${JSON.stringify(kid)} does not sign ${alg}`)
  }
  const fitting = keys.filter(fits)
  if (fitting.length === 1) return fitting[0]!
  return new TokenRefusal('kid', `the token names no kid and ${fitting.length} keys of the set sign ${alg}: it must name one`)
}

export interface ProviderKeys {
  /** The key that verifies a token with this header, as fast-jwt asks for it. */
  keyFor: (header: { kid?: unknown, alg: string }) => Promise<string>
  /** Fetches the set as the service starts, and says what it found; until a key is kept, again in the background. */
  load: () => Promise<void>
  /** Why no token can be verified now, while no key is kept: the provider cannot be reached, or gives nothing usable. */
  problem: () => string | undefined
  /** Stops fetching in the background. */
  stop: () => void
}

export function providerKeys (source: KeySource, algorithms: readonly PublicKeyAlgorithm[], log: FastifyBaseLogger): ProviderKeys {
  let keys: PublishedKey[] = []
  let jwksUrl = 'jwksUrl' in source ? source.jwksUrl : undefined
  let fetchedAt = -Infinity
  let fetching: Promise<void> | undefined
  /** Why the set could not be fetched or used, while it cannot: logged once as it starts and once as it ends. */
  let failure: Error | undefined

  async function fetchSet (): Promise<void> {
    fetchedAt = performance.now()
    try {
      jwksUrl ??= await discoveredJwksUrl((source as { issuer: string }).issuer)
      const listed = signingKeys(await getJson(jwksUrl))
      const usable = listed.keys.filter((key) => algorithms.some((alg) => algorithmFitsKey(alg, key.key)))
      if (usable.length === 0) throw new ProviderProblem(`${jwksUrl} holds no key for ${algorithms.join(', ')} (${listed.skipped} keys not readable or not for signing)`)
      const known = new Set(keys.map(({ pem }) => pem))
      const found = { ...source, jwksUrl, keys: usable.map(({ kid, alg, key }) => ({ kid, alg, type: key.asymmetricKeyType })), skipped: listed.skipped }
      if (failure !== undefined) log.info(found, 'the identity provider\'s keys can be fetched again')
      else if (usable.some(({ pem }) => !known.has(pem))) log.info(found, 'the identity provider\'s signing keys are fetched')
      keys = usable
      failure = undefined
    } catch (error) {
      if (failure === undefined || failure.message !== (error as Error).message) {
        log.error({ ...source, jwksUrl, reason: (error as Error).message }, 'the identity provider\'s keys cannot be fetched: tokens whose key is not kept are answered 503')
      }
      failure = error as Error
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

  let retry: NodeJS.Timeout | undefined
  let stopped = false
  /** Fetches again after `waitMs`, and on failure after twice that, up to the cap, until a key is kept. */
  function retryUntilKept (waitMs: number): void {
    if (stopped || keys.length > 0) return
    retry = setTimeout(() => {
      refresh().catch(() => { retryUntilKept(Math.min(waitMs * 2, RETRY_CAP_MS)) })
    }, waitMs).unref()
  }

  return {
    async keyFor ({ kid, alg }) {
      if (kid !== undefined && typeof kid !== 'string') throw new TokenRefusal('kid', 'the token\'s kid is not a string')
      if (performance.now() - fetchedAt > MAX_AGE_MS && keys.length > 0) refresh().catch(() => {})
      let found = chooseKey(keys, kid, alg)
      // Only a key the set may have gained since is worth a fetch; a kept key that does not sign `alg` is not.
      if (found instanceof TokenRefusal && found.reason === 'kid') {
        try {
          await refresh()
        } catch (error) {
          throw error instanceof ProviderProblem ? unusable() : unreachable()
        }
        found = chooseKey(keys, kid, alg)
      }
      if (found instanceof TokenRefusal) throw found
      return found.pem
    },
    load: async () => { await fetchSet().catch(() => { retryUntilKept(RETRY_FIRST_MS) }) },
    problem: () => keys.length === 0 && failure !== undefined ? failure.message : undefined,
    stop: () => {
      stopped = true
      clearTimeout(retry)
    }
  }
}
