/**
 * Fastify gives every request a child logger bound to its id. Building one (bindings,
 * serializers, redaction) cost a seventh of `GET /`'s throughput, while at LOG_LEVEL=warn
 * most requests log nothing. A lazy child is one small object whose methods, shared on a
 * prototype, build the real child the first time they are called.
 */
import type { FastifyBaseLogger, FastifyServerOptions } from 'fastify'
import type { Logger as PinoLogger } from 'pino'

type Logger = FastifyBaseLogger
type Bindings = Parameters<Logger['child']>[0]
type ChildOptions = Parameters<Logger['child']>[1]

interface LazyChild {
  /** Fastify's logger is pino, which can tell whether a level is on. */
  parent: Logger & Pick<PinoLogger, 'isLevelEnabled'>
  bindings: Bindings
  options: ChildOptions
  built: Logger | undefined
}

function real (lazy: LazyChild): Logger {
  lazy.built ??= lazy.parent.child(lazy.bindings, lazy.options)
  return lazy.built
}

const LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const

const prototype: Record<string, unknown> = {
  child (this: LazyChild, bindings: Bindings, options?: ChildOptions) { return real(this).child(bindings, options) }
}
for (const level of LEVELS) {
  prototype[level] = function (this: LazyChild, ...args: unknown[]) {
    // The parent knows the level: nothing is built for a line that would not be written.
    if (level !== 'silent' && !this.parent.isLevelEnabled(level)) return
    return (real(this)[level] as (...args: unknown[]) => void)(...args)
  }
}
Object.defineProperty(prototype, 'level', {
  get (this: LazyChild) { return (this.built ?? this.parent).level },
  set (this: LazyChild, level: string) { real(this).level = level }
})

export const lazyChildLogger: NonNullable<FastifyServerOptions['childLoggerFactory']> = (parent, bindings, options) => {
  const lazy: LazyChild = Object.create(prototype)
  lazy.parent = parent as LazyChild['parent']
  lazy.bindings = bindings
  lazy.options = options
  lazy.built = undefined
  return lazy as unknown as Logger
}
