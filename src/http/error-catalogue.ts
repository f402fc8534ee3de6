/**
 * Every refusal the service makes, declared once: its stable code, its status, its message (with
 * `{placeholders}` for what varies), and whether the same request sent again later may succeed.
 * Answers, the OpenAPI document and docs/errors.md (checked by a test) all read this table.
 */

/** Seconds a client is asked to wait (`Retry-After`) before trying again. */
type RetryAfter = 1 | 5

export interface Refusal {
  status: number
  /** The same for every answer with this code (RFC 9457 §3.1.3); the message, where that has no placeholders. */
  title?: string
  message: string
  /** Whether the same request, sent again unchanged, may succeed later. */
  retryable: boolean
  retryAfter?: RetryAfter
  /** The bearer challenge a 401 or 403 carries (RFC 6750 §3): none names no error, as for a request without credentials. */
  challenge?: 'none' | 'invalid_token' | 'insufficient_scope'
  /** The scope an `insufficient_scope` challenge names, when the message does not. */
  scope?: string
  /** Other headers every answer with this code carries. */
  headers?: Record<string, string>
}

export const ERRORS = {
  validation_failed: { status: 400, title: 'The request fails its schema', message: '{where} {rule}', retryable: false },
  invalid_json: { status: 400, message: 'Body is not valid JSON', retryable: false },
  empty_json: { status: 400, message: 'Body is not valid JSON: it is empty', retryable: false },
  json_not_utf8: { status: 400, message: 'Body is not valid JSON: it is not UTF-8', retryable: false },
  forbidden_json_key: { status: 400, message: 'Body has a "__proto__" key, or a "constructor" key holding "prototype", which is not allowed', retryable: false },
  duplicate_json_member: { status: 400, message: 'Body has a member name twice in one object, which I-JSON (RFC 7493) does not allow', retryable: false },
  json_too_deep: { status: 400, title: 'Body is nested too deeply', message: 'Body is nested deeper than {depth} arrays and objects', retryable: false },
  body_incomplete: { status: 400, message: 'Body did not arrive whole: the connection closed', retryable: true },
  invalid_url: { status: 400, title: 'The URL cannot be decoded', message: '{message}', retryable: false },
  host_required: { status: 400, message: 'Host header is required in an HTTP/1.1 request', retryable: false },
  malformed_http: { status: 400, message: 'Malformed HTTP request', retryable: false },
  event_from_another_feed: {
    status: 400,
    title: 'The event id comes from another feed',
    message: 'Event {asked} is after the newest event ({newest}): this id comes from another feed. Follow from {newest}, or without Last-Event-ID',
    retryable: false
  },
  bad_request: { status: 400, title: 'Bad request', message: '{message}', retryable: false },
  token_missing: { status: 401, message: 'Missing bearer token: send Authorization: Bearer <token>', retryable: false, challenge: 'none' },
  authorization_malformed: { status: 401, message: 'Authorization header must be "Bearer <token>"', retryable: false, challenge: 'invalid_token' },
  token_invalid: { status: 401, message: 'Token is invalid', retryable: false, challenge: 'invalid_token' },
  token_not_access_token: { status: 401, message: 'Token is not an access token: its typ header is not one this service accepts', retryable: false, challenge: 'invalid_token' },
  token_is_id_token: { status: 401, message: 'Token is an ID token: send an access token issued for this API', retryable: false, challenge: 'invalid_token' },
  token_expired: { status: 401, message: 'Token has expired', retryable: false, challenge: 'invalid_token' },
  token_not_yet_valid: { status: 401, message: 'Token is not valid yet (its nbf is in the future)', retryable: true, challenge: 'invalid_token' },
  token_claims_invalid: { status: 401, message: 'Token must name its subject (sub) and a finite expiry (exp)', retryable: false, challenge: 'invalid_token' },
  token_lifetime_too_long: {
    status: 401,
    message: 'Token lives longer than this service accepts (JWT_MAX_LIFETIME): ask for one that expires sooner',
    retryable: false,
    challenge: 'invalid_token'
  },
  ticket_invalid: { status: 401, message: 'Ticket is unknown, used or expired: ask for a new one (POST /events/tickets)', retryable: false, challenge: 'invalid_token' },
  insufficient_scope: { status: 403, title: 'Token lacks the scope this route asks for', message: 'Token lacks the scope this route asks for: {scope}', retryable: false, challenge: 'insufficient_scope' },
  not_owner: {
    status: 403,
    message: 'This user was stored by another token: only that token, or one granting users:admin, may change or erase it',
    retryable: false,
    challenge: 'insufficient_scope',
    scope: 'users:admin'
  },
  user_not_found: { status: 404, message: 'User not found', retryable: false },
  route_not_found: { status: 404, message: 'Route not found', retryable: false },
  request_timeout: { status: 408, message: 'Request timed out: headers and body must arrive in time', retryable: true },
  idempotency_key_in_use: { status: 409, message: 'A request with this Idempotency-Key is still being answered: retry shortly', retryable: true },
  events_purged: {
    status: 410,
    title: 'The events after this position are purged',
    message: 'Events after {asked} are purged (EVENTS_RETENTION): the oldest kept is {oldest}. Read the users again, then follow from {newest}',
    retryable: false
  },
  precondition_failed: { status: 412, message: 'The user has changed since the ETag in If-Match: read it again, then retry', retryable: false },
  etag_not_of_user: { status: 412, message: 'If-Match names no ETag of this user: read it, then send the ETag it answers with (or *)', retryable: false },
  body_too_large: { status: 413, message: 'Request body is too large', retryable: false },
  uri_too_long: { status: 414, message: 'URI Too Long: a path parameter is longer than any route takes', retryable: false },
  unsupported_media_type: { status: 415, message: 'Unsupported Media Type: send the body as application/json', retryable: false },
  unsupported_content_encoding: {
    status: 415,
    message: 'Unsupported Media Type: send the body uncompressed, without Content-Encoding',
    retryable: false,
    headers: { 'accept-encoding': 'identity' }
  },
  expectation_failed: { status: 417, message: 'Expectation Failed: the only expectation met is Expect: 100-continue', retryable: false },
  idempotency_key_reused: { status: 422, message: 'This Idempotency-Key was used with a different request body', retryable: false },
  precondition_required: { status: 428, message: 'If-Match is required: send the ETag of the user as last read (or *)', retryable: false },
  rate_limited: { status: 429, title: 'Rate limit exceeded', message: 'Rate limit exceeded: retry in {after}', retryable: true },
  too_many_streams_for_client: {
    status: 429,
    title: 'Too many event streams open for this client',
    message: 'Too many event streams open for this client: at most {max} (EVENTS_MAX_READERS_PER_CLIENT). Close one, or retry later',
    retryable: true,
    retryAfter: 5
  },
  headers_too_large: { status: 431, message: 'Request header fields are too large', retryable: false },
  internal_error: { status: 500, message: 'Internal Server Error', retryable: false },
  service_overloaded: { status: 503, message: 'Service overloaded: try again shortly', retryable: true, retryAfter: 1 },
  too_many_files: { status: 503, message: 'Too many files are being sent: try again shortly', retryable: true, retryAfter: 1 },
  too_many_bodies: { status: 503, message: 'Too many request bodies are being received: try again shortly', retryable: true, retryAfter: 1 },
  no_file_descriptors: { status: 503, message: 'No file can be opened now: try again shortly', retryable: true, retryAfter: 1 },
  database_unavailable: { status: 503, message: 'Database unavailable', retryable: true, retryAfter: 1 },
  provider_unreachable: { status: 503, message: 'The identity provider cannot be reached to check this token: retry shortly', retryable: true, retryAfter: 1 },
  provider_without_usable_key: { status: 503, message: 'The identity provider publishes no key this service can use: retry shortly', retryable: true, retryAfter: 1 },
  too_many_streams: { status: 503, message: 'Too many event streams are open on this instance (EVENTS_MAX_READERS): retry shortly', retryable: true, retryAfter: 5 },
  shutting_down: { status: 503, message: 'Shutting down', retryable: true },
  no_token_verifiable: { status: 503, title: 'No token can be verified', message: 'No token can be verified: {problem}', retryable: true },
  user_ids_exhausted: { status: 507, message: 'Every user id is taken', retryable: false }
} as const satisfies Record<string, Refusal>

export type ErrorCode = keyof typeof ERRORS
export const ERROR_CODES = Object.keys(ERRORS) as ErrorCode[]

/** The names of a message's `{placeholders}`. */
type Placeholders<Message extends string> = Message extends `${string}{${infer Name}}${infer Rest}` ? Name | Placeholders<Rest> : never
/** What a code's message is filled with: nothing, or a value for each placeholder. */
export type MessageValues<Code extends ErrorCode> = [Placeholders<typeof ERRORS[Code]['message']>] extends [never]
  ? []
  : [values: Record<Placeholders<typeof ERRORS[Code]['message']>, string | number>]

/** A code's message with its placeholders filled in. */
export function messageOf (code: ErrorCode, values: Record<string, string | number> = {}): string {
  return ERRORS[code].message.replace(/\{(\w+)\}/g, (_, name: string) => String(values[name]))
}

/** A code's title, the same for every answer that carries it. */
export function titleOf (code: ErrorCode): string {
  const refusal: Refusal = ERRORS[code]
  return refusal.title ?? refusal.message
}

/** The URI reference of a code's problem type (RFC 9457 §3.1.1): the service describes it there. */
export const problemType = (code: ErrorCode) => `/problems/${code}`
