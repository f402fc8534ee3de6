/**
 * How bearer tokens are verified: with the shared secret (HS256, the specification's scheme), or
 * with an identity provider's public keys, from its JWKS (named, or found from the issuer by
 * discovery) or a PEM file; and the claims and token types checked.
 */
import { randomBytes, createPublicKey } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { ConfigError } from './config-error.js'
import { parseDuration } from './values.js'

/**
 * Signature algorithms of public keys that may be allowed; `none` and HS* never are with them.
 * `Ed25519` is RFC 9864's name for what `EdDSA` names with an Ed25519 key.
 */
export const PUBLIC_KEY_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'] as const
export type PublicKeyAlgorithm = typeof PUBLIC_KEY_ALGORITHMS[number]
const DEFAULT_ALGORITHMS: PublicKeyAlgorithm[] = ['RS256', 'ES256', 'EdDSA', 'Ed25519']

/** Access tokens' type (RFC 9068 §2.1), compared as RFC 8725 §3.11 says: lower case, `application/` left off. */
const ACCESS_TOKEN_TYPE = 'at+jwt'
/** What the shared-secret mode's own tokens (`npm run token`) say they are. */
const PLAIN_TOKEN_TYPE = 'jwt'

export type TokenKeys =
  | { kind: 'secret', secret: string, generated: boolean }
  | { kind: 'public-key', publicKey: string, algorithms: PublicKeyAlgorithm[] }
  | { kind: 'jwks', url: string, algorithms: PublicKeyAlgorithm[] }
  | { kind: 'discovery', issuer: string, algorithms: PublicKeyAlgorithm[] }

export interface TokenConfig {
  keys: TokenKeys
  /** `iss` must be this, when set. */
  issuer: string | undefined
  /** `aud` (a string or a list) must name one of these, when set. */
  audience: string[] | undefined
  /** The longest a token may live, from its `iat` or from now, whichever is earlier. */
  maxLifetimeMs: number
  /** The `typ` header values accepted, normalized by `tokenType`. */
  types: string[]
  /** The claims a token's scopes are read from: a space-separated string or a list in each. */
  scopeClaims: string[]
}

/** A `typ` as compared: lower case, without `application/` (RFC 8725 §3.11). */
export const tokenType = (typ: string): string => typ.trim().toLowerCase().replace(/^application\//, '')

export interface TokenSettings {
  JWT_SECRET?: string | undefined
  JWT_JWKS_URL?: string | undefined
  JWT_PUBLIC_KEY?: string | undefined
  JWT_ALGORITHMS?: string | undefined
  JWT_ISSUER?: string | undefined
  JWT_AUDIENCE?: string | undefined
  JWT_MAX_LIFETIME: string
  JWT_TYP?: string | undefined
  JWT_SCOPE_CLAIMS: string
  NODE_ENV?: string | undefined
}

/** The minimum for an HS256 secret: as many bytes as the hash it keys (RFC 7518 §3.2). */
const MIN_SECRET_BYTES = 32

/** Refuses a secret that can be guessed: shorter than the hash it keys, or one character repeated. */
export function checkSecretStrength (secret: string): void {
  if (Buffer.byteLength(secret) < MIN_SECRET_BYTES) {
    throw new ConfigError(`JWT_SECRET must be at least ${MIN_SECRET_BYTES} bytes: a shorter one is found from a single token in seconds ` +
      '(make one with: openssl rand -base64 48)')
  }
  if (new Set(secret).size === 1) throw new ConfigError('JWT_SECRET must not be one character repeated')
}

/** The longest a token may live unless `JWT_MAX_LIFETIME` says otherwise. */
export const DEFAULT_MAX_LIFETIME = '24h'
/** The most `JWT_MAX_LIFETIME` may be: a stolen token stops working within it, whatever was set. */
const MAX_LIFETIME_CEILING = '30d'

/** The scope claims of RFC 8693 (`scope`) and of Entra ID's and Okta's delegated tokens (`scp`). */
export const DEFAULT_SCOPE_CLAIMS = 'scope,scp'

/** `JWT_MAX_LIFETIME` alone, for `npm run token`, which mints no token the service would refuse. */
export function loadMaxLifetime (environment: Record<string, string | undefined>): { text: string, ms: number } {
  const text = environment.JWT_MAX_LIFETIME === undefined || environment.JWT_MAX_LIFETIME === '' ? DEFAULT_MAX_LIFETIME : environment.JWT_MAX_LIFETIME
  const ms = parseDuration(text)
  if (ms === undefined) throw new ConfigError(`JWT_MAX_LIFETIME must be a duration such as 30s, 15m, 1h or 7d (got ${JSON.stringify(text)})`)
  if (ms > parseDuration(MAX_LIFETIME_CEILING)!) throw new ConfigError(`JWT_MAX_LIFETIME must be at most ${MAX_LIFETIME_CEILING} (got ${JSON.stringify(text)})`)
  return { text, ms }
}

/** The signing secret alone, for `npm run token`, with the service's rules for it. */
export function loadSigningSecret (environment: Record<string, string | undefined>): string {
  const secret = environment.JWT_SECRET
  if (secret === undefined || secret === '') throw new ConfigError('JWT_SECRET is not set: tokens are signed with it')
  checkSecretStrength(secret)
  return secret
}

function readPublicKey (path: string): string {
  let pem: string
  try {
    pem = readFileSync(path, 'utf8')
  } catch (error) {
    throw new ConfigError(`JWT_PUBLIC_KEY cannot be read: ${(error as Error).message}`)
  }
  try {
    // Node derives a public key from a private one: a private key here would be a secret misplaced.
    if (pem.includes('PRIVATE KEY-----')) throw new Error('it holds a private key')
    createPublicKey(pem)
  } catch (error) {
    throw new ConfigError(`JWT_PUBLIC_KEY must be a PEM file holding a public key (${path}: ${(error as Error).message})`)
  }
  return pem
}

const isPublicKeyAlgorithm = (name: string): name is PublicKeyAlgorithm => (PUBLIC_KEY_ALGORITHMS as readonly string[]).includes(name)

function parseAlgorithms (text: string | undefined): PublicKeyAlgorithm[] {
  if (text === undefined) return DEFAULT_ALGORITHMS
  const named = text.split(',').map((one) => one.trim())
  const algorithms = named.filter(isPublicKeyAlgorithm)
  const refused = named.filter((one) => !isPublicKeyAlgorithm(one))
  if (refused.length > 0) {
    throw new ConfigError(`JWT_ALGORITHMS must list algorithms of public keys, from ${PUBLIC_KEY_ALGORITHMS.join(', ')} (got ${refused.join(', ')})`)
  }
  return algorithms
}

function tokenKeys (settings: TokenSettings, authOn: boolean): TokenKeys {
  const { JWT_SECRET: secret, JWT_JWKS_URL: jwksUrl, JWT_PUBLIC_KEY: publicKeyPath, JWT_ISSUER: issuer } = settings
  const production = settings.NODE_ENV === 'production'
  // The issuer alone: its keys are found where its metadata says (OpenID Connect Discovery, RFC 8414).
  if (secret === undefined && jwksUrl === undefined && publicKeyPath === undefined && issuer !== undefined && (authOn || production)) {
    if (!/^https?:\/\/[^/]/.test(issuer)) throw new ConfigError(`JWT_ISSUER must be an http(s) URL for its keys to be discovered, or set JWT_JWKS_URL, JWT_PUBLIC_KEY or JWT_SECRET (got ${JSON.stringify(issuer)})`)
    return { kind: 'discovery', issuer, algorithms: parseAlgorithms(settings.JWT_ALGORITHMS) }
  }
  if (jwksUrl !== undefined || publicKeyPath !== undefined) {
    if (jwksUrl !== undefined && publicKeyPath !== undefined) throw new ConfigError('set JWT_JWKS_URL or JWT_PUBLIC_KEY, not both')
    if (secret !== undefined) throw new ConfigError('JWT_SECRET is not used when tokens are verified with public keys: unset it, or unset JWT_JWKS_URL and JWT_PUBLIC_KEY')
    const algorithms = parseAlgorithms(settings.JWT_ALGORITHMS)
    return jwksUrl !== undefined
      ? { kind: 'jwks', url: jwksUrl, algorithms }
      : { kind: 'public-key', publicKey: readPublicKey(publicKeyPath!), algorithms }
  }
  if (settings.JWT_ALGORITHMS !== undefined) throw new ConfigError('JWT_ALGORITHMS is for public keys (JWT_JWKS_URL or JWT_PUBLIC_KEY); the shared secret signs HS256')
  if (secret === undefined) {
    if (production) throw new ConfigError('JWT_SECRET (or JWT_ISSUER, JWT_JWKS_URL or JWT_PUBLIC_KEY) is required when NODE_ENV=production')
    // A generated secret is known to no one, so no client could get a token.
    if (authOn) throw new ConfigError('JWT_SECRET (or JWT_ISSUER, JWT_JWKS_URL or JWT_PUBLIC_KEY) is required when AUTH is on')
    return { kind: 'secret', secret: randomBytes(32).toString('base64url'), generated: true }
  }
  if (authOn || production) checkSecretStrength(secret)
  return { kind: 'secret', secret, generated: false }
}

/** `JWT_TYP`, or access tokens, and with the shared secret also the plain `JWT` its own tokens carry. */
function acceptedTypes (text: string | undefined, keys: TokenKeys): string[] {
  if (text !== undefined) return text.split(',').map(tokenType).filter((one) => one !== '')
  return keys.kind === 'secret' ? [ACCESS_TOKEN_TYPE, PLAIN_TOKEN_TYPE] : [ACCESS_TOKEN_TYPE]
}

export function parseTokenConfig (settings: TokenSettings, authOn: boolean): TokenConfig {
  const keys = tokenKeys(settings, authOn)
  return {
    keys,
    types: acceptedTypes(settings.JWT_TYP, keys),
    issuer: settings.JWT_ISSUER,
    audience: settings.JWT_AUDIENCE?.split(',').map((one) => one.trim()).filter((one) => one !== ''),
    maxLifetimeMs: loadMaxLifetime({ JWT_MAX_LIFETIME: settings.JWT_MAX_LIFETIME }).ms,
    scopeClaims: settings.JWT_SCOPE_CLAIMS.split(',').map((one) => one.trim()).filter((one) => one !== '')
  }
}
