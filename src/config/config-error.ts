/** A configuration mistake; its message is the one line printed before the process exits. */
export class ConfigError extends Error {
  override name = 'ConfigError'
}
