/** The `email` format: an RFC 5321 Mailbox, checked in one place for the configuration and for requests. */
import { isIPv4, isIPv6 } from 'node:net'

// RFC 5321, section 4.1.2: a Mailbox is a Local-part, "@", and a Domain or an address literal.
const DOT_STRING = /^[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]+(?:\.[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]+)*$/
const QUOTED_STRING = /^"(?:[\x20\x21\x23-\x5B\x5D-\x7E]|\\[\x20-\x7E])*"$/
const DOMAIN = /^[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*$/
const GENERAL_LITERAL = /^[A-Za-z0-9-]*[A-Za-z0-9]:[\x21-\x5A\x5E-\x7E]+$/

function isAddressLiteral (literal: string): boolean {
  if (literal.startsWith('IPv6:')) return isIPv6(literal.slice(5))
  return isIPv4(literal) || GENERAL_LITERAL.test(literal)
}

/**
 * JSON Schema's `format: "email"`, an RFC 5321 Mailbox (`q@test`, `"q"@example.com`,
 * `a@[127.0.0.1]`). ajv-formats checks a narrower pattern, which would refuse addresses the
 * document calls valid.
 */
export function isMailbox (text: string): boolean {
  const at = text.lastIndexOf('@')
  if (at < 1) return false
  const [local, domain] = [text.slice(0, at), text.slice(at + 1)]
  const localOk = local.startsWith('"') ? QUOTED_STRING.test(local) : DOT_STRING.test(local)
  const domainOk = domain.startsWith('[') && domain.endsWith(']') ? isAddressLiteral(domain.slice(1, -1)) : DOMAIN.test(domain)
  return localOk && domainOk
}
