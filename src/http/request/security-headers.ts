/**
 * The security headers of every JSON answer, OWASP's REST set, set by request-context.ts; pages
 * replace them with helmet's (pages/helmet.ts; docs/decisions/0004-security-headers.md).
 */
export const API_SECURITY_HEADERS = {
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
  'cross-origin-resource-policy': 'same-origin',
  'strict-transport-security': 'max-age=31536000; includeSubDomains',
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY'
} as const
