/**
 * Bearer tokens: fast-jwt over the configured keys (the shared secret, a public key, or an
 * identity provider's JWKS, provider-keys.ts), and the guard that checks a route's token and, with
 * `AUTH_SCOPES`, its scope. protect.ts decides which routes ask for one
 * (docs/decisions/0030-tokens-verified-by-fast-jwt.md).
 */
import { createPublicKey } from 'node:crypto'
import { type Algorithm, createVerifier, TokenError } from 'fast-jwt'
import type { FastifyInstance, FastifyRequest, onRequestHookHandler } from 'fastify'
import type { AuthMode } from '../../config/config.js'
import { tokenType, type TokenConfig } from '../../config/tokens.js'
import { AppError, TokenRefusal, type RefusalReason } from '../errors.js'
import { algorithmFitsKey, providerKeys, type ProviderKeys } from './provider-keys.js'
import { errorResponse, type HeaderSchema, type Responses, RETRY_AFTER } from '../schemas.js'

/** A verified token's claims. */
export interface TokenClaims { sub: string, exp: number, iat?: number, iss?: unknown, azp?: unknown, client_id?: unknown, [claim: string]: unknown }

declare module 'fastify' {
  interface FastifyRequest {
    /** The verified token's claims, when the route asked for one; `request.user.sub` names the caller. */
    user: TokenClaims | undefined
  }
  interface FastifyInstance {
    /** Why no token can be verified now, when the identity provider answers with no usable key; `/ready` says it. */
    tokenKeysProblem: () => string | undefined
    /** Whether the request's verified token grants `scope`, whatever `AUTH_SCOPES` says; false without one. */
    tokenGrants: (request: FastifyRequest, scope: Scope) => boolean
  }
}

/**
 * How far the minting machine's clock may be from ours (RFC 7519 §4.1.4, "some small leeway"), so
 * that a token minted a second ahead is not refused for its `nbf`.
 */
const CLOCK_SKEW_MS = 60_000

const BEARER = /^Bearer +([A-Za-z0-9._~+/-]+=*) *$/i

/** The token of an `Authorization: Bearer` header; undefined when the header is not one. */
export const bearerToken = (header: string | undefined): string | undefined => header === undefined ? undefined : BEARER.exec(header)?.[1]

interface TokenHeader { alg: string, typ?: unknown, kid?: unknown }

/** The JOSE header of a compact JWS (RFC 7515 §7.1), read before any key is looked for. */
function tokenHeader (token: string): TokenHeader {
  let header: unknown
  try {
    header = JSON.parse(Buffer.from(token.slice(0, token.indexOf('.')), 'base64url').toString())
  } catch {}
  if (header === null || typeof header !== 'object' || typeof (header as TokenHeader).alg !== 'string') {
    throw new TokenRefusal('malformed', 'the token has no JSON header naming its alg')
  }
  return header as TokenHeader
}

/** Why fast-jwt refused a token, by its code, as the log says it and the client is told it. */
const FAST_JWT_REFUSALS: Record<string, [RefusalReason, TokenRefusal['code']]> = {
  [TokenError.codes.expired]: ['expiry', 'token_expired'],
  [TokenError.codes.inactive]: ['not-before', 'token_not_yet_valid'],
  [TokenError.codes.invalidSignature]: ['signature', 'token_invalid'],
  [TokenError.codes.missingSignature]: ['signature', 'token_invalid'],
  [TokenError.codes.invalidAlgorithm]: ['algorithm', 'token_invalid'],
  [TokenError.codes.invalidKey]: ['algorithm', 'token_invalid'],
  [TokenError.codes.missingRequiredClaim]: ['claim', 'token_invalid'],
  [TokenError.codes.invalidClaimValue]: ['claim', 'token_invalid'],
  [TokenError.codes.invalidClaimType]: ['claim', 'token_invalid']
}

/** fast-jwt's refusal, as the client is told it and the log says it (fast-jwt's words, in `detail`, name the claim). */
function refusalOf (error: unknown): AppError {
  // The identity provider's answers (provider-keys.ts) come wrapped, as the key fetcher's failure.
  const cause = (error as { originalError?: unknown }).originalError
  if (cause instanceof AppError) return cause
  if (error instanceof AppError) return error
  const { code = '', message = String(error) } = error as { code?: string, message?: string }
  const [reason, answer] = FAST_JWT_REFUSALS[code] ?? ['malformed', 'token_invalid']
  return new TokenRefusal(reason, message, answer)
}

interface Verification {
  /** The token's header, checked before its signature: its algorithm and type. */
  checkHeader: (header: TokenHeader) => void
  /** The token's claims, once its signature and claims are checked. */
  verify: (token: string) => Promise<TokenClaims>
  provider: ProviderKeys | undefined
}

/**
 * fast-jwt over the configured keys; it checks the signature, `sub`, `exp`, and `iss` and `aud`
 * when configured, which the token must then carry.
 */
async function verifyTokensWith (app: FastifyInstance, config: TokenConfig): Promise<Verification> {
  const { keys, types } = config
  if (keys.kind === 'secret' && keys.generated) {
    // Only with AUTH=off, where nothing checks a token: info, not a warning.
    app.log.info('JWT_SECRET is not set: this process uses a random secret of its own (AUTH is off, so no route asks for a token; set JWT_SECRET before turning it on)')
  }
  const algorithms: string[] = keys.kind === 'secret' ? ['HS256'] : keys.algorithms
  const provider = keys.kind === 'jwks' || keys.kind === 'discovery'
    ? providerKeys(keys.kind === 'jwks' ? { jwksUrl: keys.url } : { issuer: keys.issuer }, keys.algorithms, app.log)
    : undefined
  const publicKey = keys.kind === 'public-key' ? createPublicKey(keys.publicKey) : undefined
  const checks = {
    // fast-jwt knows an Ed25519 key as EdDSA's and verifies any `Ed…` name with it; checkHeader holds the exact list.
    algorithms: (algorithms.includes('Ed25519') ? [...algorithms, 'EdDSA'] : algorithms) as Algorithm[],
    requiredClaims: ['sub', 'exp', ...(config.issuer === undefined ? [] : ['iss']), ...(config.audience === undefined ? [] : ['aud'])],
    clockTolerance: CLOCK_SKEW_MS,
    ...(config.issuer !== undefined && { allowedIss: config.issuer }),
    ...(config.audience !== undefined && { allowedAud: config.audience })
  }
  // The provider's key is looked up by the token's header: its `kid` and `alg`.
  const verify = provider === undefined
    ? createVerifier({ ...checks, key: keys.kind === 'secret' ? keys.secret : (keys as { publicKey: string }).publicKey })
    : createVerifier({ ...checks, key: async ({ header }: { header: Record<string, unknown> }) => await provider.keyFor({ kid: header.kid, alg: String(header.alg) }) })
  app.decorateRequest('user', undefined)
  app.decorate('tokenKeysProblem', () => provider?.problem())
  app.addHook('onClose', (_app, done) => {
    provider?.stop()
    done()
  })

  return {
    provider,
    verify: async (token) => await verify(token),
    checkHeader ({ alg, typ }) {
      if (!algorithms.includes(alg)) throw new TokenRefusal('algorithm', `alg ${JSON.stringify(alg)} is not one of ${algorithms.join(', ')}`)
      if (publicKey !== undefined && !algorithmFitsKey(alg, publicKey)) throw new TokenRefusal('algorithm', `JWT_PUBLIC_KEY does not sign ${alg}`)
      if (typeof typ !== 'string' || !types.includes(tokenType(typ))) {
        throw new TokenRefusal('type', `typ ${JSON.stringify(typ)} is not one of ${types.join(', ')} (JWT_TYP)`,
          'token_not_access_token')
      }
    }
  }
}

export const SECURITY_SCHEME = 'bearerAuth'

/**
 * What a route asks of its caller's token: `users:write` for a write, `users:read` for a read,
 * `events:read` to follow changes; `users:admin` to change or erase a user another token owns.
 */
export type Scope = 'users:read' | 'users:write' | 'events:read' | 'users:admin'

/** The codes of a 401 for a token. */
const TOKEN_REFUSALS = ['token_missing', 'authorization_malformed', 'token_invalid', 'token_not_access_token', 'token_is_id_token', 'token_expired',
  'token_not_yet_valid', 'token_claims_invalid', 'token_lifetime_too_long'] as const

const providerDown = errorResponse(['provider_unreachable', 'provider_without_usable_key'],
  'The identity provider cannot be reached, or publishes no key this service can use, for a token whose key is not kept; retry after `Retry-After` seconds.',
  { 'Retry-After': RETRY_AFTER })

const WWW_AUTHENTICATE: HeaderSchema = {
  type: 'string',
  description: 'The bearer challenge (RFC 6750 §3): `Bearer realm="api"`, with `error="invalid_token"` for a token that was refused, ' +
    'or `error="insufficient_scope", scope="…"` for one without the scope the route asks for.'
}

/** The scopes a token grants: in each of `claims`, a space-separated string (RFC 8693 `scope`) or a list (`scp`, `roles`, `permissions`). */
function grantedScopes (token: TokenClaims | undefined, claims: readonly string[]): Set<string> {
  const granted = new Set<string>()
  if (token === undefined) return granted
  for (const claim of claims.map((name) => token[name])) {
    const values = Array.isArray(claim) ? claim : typeof claim === 'string' ? claim.split(' ') : []
    for (const value of values) if (typeof value === 'string' && value !== '') granted.add(value)
  }
  return granted
}

/**
 * Claims only an ID token carries (OpenID Connect Core §2 and §3.1.3.6; FAPI's `s_hash`), and
 * Keycloak's `typ: "ID"`: such a token says who signed in to a client, and grants nothing here,
 * whatever its `typ` header says. Access tokens (RFC 9068) carry none of them.
 */
const ID_TOKEN_CLAIMS = ['nonce', 'at_hash', 'c_hash', 's_hash']
const isIdToken = (claims: TokenClaims) =>
  ID_TOKEN_CLAIMS.some((claim) => claim in claims) || (typeof claims.typ === 'string' && claims.typ.toLowerCase() === 'id')

export interface TokenRules {
  mode: AuthMode
  scopes: boolean
  verification: TokenConfig
  /** Whether some route asks for a token whatever the mode, so that the keys are needed with `AUTH=off` too. */
  tokensAlways: boolean
}

/** Whether a request reads personal data (an address): under `AUTH=writes`, such a read needs a token too. */
export type PersonalDataTest = (request: FastifyRequest) => boolean

/**
 * A credential a route takes in its URL where no `Authorization` header can be sent (an
 * `EventSource`): the holder it names, undefined when the request carries none; it throws the
 * 401 of one that is not good.
 */
export type UrlCredential = (request: FastifyRequest) => Promise<{ issuer: string, subject: string } | undefined>

/** The requests whose caller was named by a URL credential, not a token. */
const fromUrlCredential = new WeakSet<FastifyRequest>()

/** How a route asks for its token: see `tokenChecks`. */
export interface TokenAsk {
  readsPersonalData?: PersonalDataTest | undefined
  always?: boolean
  urlCredential?: UrlCredential | undefined
}

/** The checks of a route that asks for a token, and the answers and security they declare. */
export interface TokenCheck {
  hooks: onRequestHookHandler[]
  responses: Responses
  security: Array<Record<string, string[]>>
}

/**
 * Makes the verifier and gives, for a route's scope, the checks of its token under `AUTH`
 * (undefined where it needs none): the token, then with `AUTH_SCOPES=on` the scope. A read that
 * can show personal data runs them under `AUTH=writes` too, when `readsPersonalData` says so; a
 * route that asks for a token `always` runs them whatever the mode; and a `urlCredential` stands
 * in for a token that was not sent.
 */
export async function tokenChecks (app: FastifyInstance, { mode, scopes, verification, tokensAlways }: TokenRules): Promise<(scope: Scope, ask?: TokenAsk) => TokenCheck | undefined> {
  const { checkHeader, provider, verify } = await verifyTokensWith(app, verification)
  // The provider's keys are fetched as the service starts, so that a wrong URL is said at once.
  if ((mode !== 'off' || tokensAlways) && provider !== undefined) await provider.load()

  async function verifiedClaims (token: string): Promise<TokenClaims> {
    checkHeader(tokenHeader(token))
    let claims: TokenClaims
    try {
      claims = await verify(token)
    } catch (error) {
      throw refusalOf(error)
    }
    if (isIdToken(claims)) {
      throw new TokenRefusal('type', 'the token carries an ID token\'s claims (nonce, at_hash, c_hash, s_hash or typ "ID")',
        'token_is_id_token')
    }
    if (typeof claims.sub !== 'string' || claims.sub === '' || !Number.isFinite(claims.exp)) {
      throw new TokenRefusal('subject', 'sub must be a non-empty string and exp a finite number', 'token_claims_invalid')
    }
    // Counted from the earlier of `iat` and now, so that no `iat` makes a longer token pass.
    const issuedAt = Math.min(typeof claims.iat === 'number' ? claims.iat * 1000 : Infinity, Date.now())
    if (claims.exp * 1000 - issuedAt > verification.maxLifetimeMs) {
      throw new TokenRefusal('lifetime', `the token lives ${Math.round((claims.exp * 1000 - issuedAt) / 1000)} s`,
        'token_lifetime_too_long')
    }
    return claims
  }

  async function verifyBearerToken (request: FastifyRequest, urlCredential: UrlCredential | undefined): Promise<void> {
    const header = request.headers.authorization
    if (header === undefined) {
      const holder = await urlCredential?.(request)
      if (holder === undefined) throw new AppError('token_missing')
      request.user = { iss: holder.issuer === '' ? undefined : holder.issuer, sub: holder.subject, exp: Math.ceil(Date.now() / 1000) }
      fromUrlCredential.add(request)
      return
    }
    const token = bearerToken(header)
    if (token === undefined) throw new AppError('authorization_malformed')
    try {
      request.user = await verifiedClaims(token)
    } catch (error) {
      // Why, for the operator; never the token itself.
      if (error instanceof TokenRefusal) request.log.info({ tokenRefused: error.reason, detail: error.detail }, 'bearer token refused')
      throw error
    }
  }

  app.decorate('tokenGrants', (request: FastifyRequest, scope: Scope) => request.user?.sub !== undefined && grantedScopes(request.user, verification.scopeClaims).has(scope))

  const requireScope = (scope: Scope) => async (request: FastifyRequest): Promise<void> => {
    // A credential in the URL is taken by one route alone, and was issued for its scope.
    if (fromUrlCredential.has(request)) return
    const granted = grantedScopes(request.user, verification.scopeClaims)
    if (granted.has(scope)) return
    request.log.info({ tokenRefused: 'scope', needed: scope, granted: [...granted], scopeClaims: verification.scopeClaims }, 'bearer token lacks the scope this route asks for')
    throw new AppError('insufficient_scope', { scope })
  }

  const refused = (withTicket: boolean) => errorResponse([...TOKEN_REFUSALS, ...(withTicket ? ['ticket_invalid' as const] : [])], 'Missing, malformed, expired or wrongly signed bearer token, or one that lives longer than `JWT_MAX_LIFETIME`. ' +
    'Checked before the body is read: such a request is answered 401 whatever its body, never 400, 413 or 415.', { 'WWW-Authenticate': WWW_AUTHENTICATE })
  const lacksScope = (scope: Scope) => errorResponse(['insufficient_scope'], `The token is valid but does not grant \`${scope}\` (in the claims \`JWT_SCOPE_CLAIMS\` names: \`scope\` and \`scp\` by default).`, { 'WWW-Authenticate': WWW_AUTHENTICATE })
  return (scope, { readsPersonalData, always = false, urlCredential } = {}) => {
    if (mode === 'off' && !always) return undefined
    const verify = async (request: FastifyRequest) => { await verifyBearerToken(request, urlCredential) }
    const checks = scopes ? [verify, requireScope(scope)] : [verify]
    const responses = {
      401: refused(urlCredential !== undefined),
      ...(scopes && { 403: lacksScope(scope) }),
      ...(provider !== undefined && { 503: providerDown })
    }
    const security = [{ [SECURITY_SCHEME]: scopes ? [scope] : [] }]
    // Following the feed is a subscription of its own: with scopes on, it is asked for under AUTH=writes too.
    if (mode === 'all' || scope === 'users:write' || always || (scopes && scope === 'events:read')) return { hooks: checks, responses, security }
    if (readsPersonalData === undefined) return undefined
    // AUTH=writes: a read is open to anyone unless it reads personal data.
    const whenPersonal = (check: (request: FastifyRequest) => Promise<void>) => async (request: FastifyRequest): Promise<void> => {
      if (readsPersonalData(request)) await check(request)
    }
    return { hooks: checks.map(whenPersonal), responses, security: [{}, ...security] }
  }
}
