/**
 * How bearer tokens are verified: with the shared secret (HS256, the specification's scheme), or
 * with an identity provider's public keys, from its JWKS or a PEM file; and the claims checked.
 */
import { randomBytes, createPublicKey } from 'node:crypto'
import { readFileSync } from 'node:fs'
import type { Algorithm } from 'fast-jwt'
import { ConfigError } from './config-error.js'
import { parseDuration } from './values.js'

/** Signature algorithms of public keys that may be allowed; `none` and HS* never are with them. */
export const PUBLIC_KEY_ALGORITHMS: Algorithm[] = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA']
const DEFAULT_ALGORITHMS: Algorithm[] = ['RS256', 'ES256', 'EdDSA']

export type TokenKeys =
  | { kind: 'secret', secret: string, generated: boolean }
  | { kind: 'public-key', publicKey: string, algorithms: Algorithm[] }
  | { kind: 'jwks', url: string, algorithms: Algorithm[] }

export interface TokenConfig {
  keys: TokenKeys
  /** `iss` must be this, when set. */
  issuer: string | undefined
  /** `aud` (a string or a list) must name one of these, when set. */
  audience: string[] | undefined
  /** The longest a token may live, from its `iat` or from now, whichever is earlier. */
  maxLifetimeMs: number
}

export interface TokenSettings {
  JWT_SECRET?: string | undefined
  JWT_JWKS_URL?: string | undefined
  JWT_PUBLIC_KEY?: string | undefined
  JWT_ALGORITHMS?: string | undefined
  JWT_ISSUER?: string | undefined
  JWT_AUDIENCE?: string | undefined
  JWT_MAX_LIFETIME: string
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

/** `JWT_MAX_LIFETIME` alone, for `npm run token`, which mints no token the service would refuse. */
export function loadMaxLifetime (environment: Record<string, string | undefined>): { text: string, ms: number } {
  const text = environment.JWT_MAX_LIFETIME === undefined || environment.JWT_MAX_LIFETIME === '' ? DEFAULT_MAX_LIFETIME : environment.JWT_MAX_LIFETIME
  const ms = parseDuration(text)
  if (ms === undefined) throw new ConfigError(`JWT_MAX_LIFETIME must be a duration such as 30s, 15m, 1h or 7d (got ${JSON.stringify(text)})`)
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

const isPublicKeyAlgorithm = (name: string): name is Algorithm => (PUBLIC_KEY_ALGORITHMS as string[]).includes(name)

function parseAlgorithms (text: string | undefined): Algorithm[] {
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
  const { JWT_SECRET: secret, JWT_JWKS_URL: jwksUrl, JWT_PUBLIC_KEY: publicKeyPath } = settings
  const production = settings.NODE_ENV === 'production'
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
    if (production) throw new ConfigError('JWT_SECRET (or JWT_JWKS_URL or JWT_PUBLIC_KEY) is required when NODE_ENV=production')
    // A generated secret is known to no one, so no client could get a token.
    if (authOn) throw new ConfigError('JWT_SECRET (or JWT_JWKS_URL or JWT_PUBLIC_KEY) is required when AUTH is on')
    return { kind: 'secret', secret: randomBytes(32).toString('base64url'), generated: true }
  }
  if (authOn || production) checkSecretStrength(secret)
  return { kind: 'secret', secret, generated: false }
}

export function parseTokenConfig (settings: TokenSettings, authOn: boolean): TokenConfig {
  return {
    keys: tokenKeys(settings, authOn),
    issuer: settings.JWT_ISSUER,
    audience: settings.JWT_AUDIENCE?.split(',').map((one) => one.trim()).filter((one) => one !== ''),
    maxLifetimeMs: parseDuration(settings.JWT_MAX_LIFETIME) as number
  }
}
