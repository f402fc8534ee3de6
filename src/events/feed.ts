/**
 * Wakes the stream's readers and the webhook deliverers when the feed grows. While anyone waits,
 * it asks the database for the newest position every POLL_MS, so that an event written by any
 * instance is seen within that time; nobody waiting, it asks nothing.
 */
import { setTimeout as sleep } from 'node:timers/promises'

export const POLL_MS = 100

export class EventFeed {
  #newest = 0
  readonly #waiters = new Set<() => void>()
  #polling = false
  #closed = false

  constructor (private readonly readNewest: () => Promise<number>) {}

  /** The newest event's position, asked of the database now. */
  async newest (): Promise<number> {
    this.#newest = Math.max(this.#newest, await this.readNewest())
    return this.#newest
  }

  /** Resolves once the feed holds an event after `position`, once `ms` have passed, or once `signal` aborts. */
  async waitBeyond (position: number, ms: number, signal?: AbortSignal): Promise<void> {
    if (this.#newest > position || this.#closed || signal?.aborted === true) return
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer)
        this.#waiters.delete(check)
        signal?.removeEventListener('abort', done)
        resolve()
      }
      const check = () => { if (this.#newest > position || this.#closed) done() }
      const timer = setTimeout(done, ms)
      signal?.addEventListener('abort', done, { once: true })
      this.#waiters.add(check)
      this.#poll()
    })
  }

  #poll (): void {
    if (this.#polling) return
    this.#polling = true
    const polling = async (): Promise<void> => {
      while (this.#waiters.size > 0 && !this.#closed) {
        // A database that cannot answer now is logged by storage; the waiters time out meanwhile.
        await this.newest().catch(() => {})
        for (const check of [...this.#waiters]) check()
        await sleep(POLL_MS, undefined, { ref: false })
      }
      this.#polling = false
    }
    polling().catch(() => {})
  }

  /** Releases every waiter, and each later one at once. */
  close (): void {
    this.#closed = true
    for (const check of [...this.#waiters]) check()
  }
}
