/**
 * Wakes the stream's readers and the webhook deliverers when the feed grows. While anyone waits,
 * it asks the database for the newest position every POLL_MS, so that an event written by any
 * instance is seen within that time; nobody waiting, it asks nothing. It keeps the newest events
 * read, as the stream sends them, so that readers who have caught up share one read of each.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { EVENTS_PER_READ, type UserEvent } from './outbox.js'

export const POLL_MS = 100

/** The newest events kept for the readers who have caught up: a few pages, so that one a page behind still finds its events. */
const KEPT_EVENTS = 4 * EVENTS_PER_READ

/** An event as the stream sends it: its position and its Server-Sent Events text. */
export interface SentEvent { id: number, text: string }

const sentEvent = (event: UserEvent): SentEvent => ({ id: event.id, text: `id: ${event.id}\nevent: ${event.type}\ndata: ${JSON.stringify(event)}\n\n` })

export class EventFeed {
  #newest = 0
  readonly #waiters = new Set<() => void>()
  #polling = false
  #closed = false
  /** Every event after #keptAfter up to #keptUpTo, in order; undefined until the first reader asks. */
  #kept: SentEvent[] = []
  #keptAfter: number | undefined
  #keptUpTo = 0
  #reading: Promise<void> | undefined

  constructor (private readonly readNewest: () => Promise<number>, private readonly readAfter: (position: number) => Promise<UserEvent[]>) {}

  /**
   * Up to a page of the events after `position`. A reader within the kept events is served from
   * them, and one at their end shares one read of the next with every other; one further behind
   * reads its own page.
   */
  async eventsAfter (position: number): Promise<SentEvent[]> {
    if (this.#keptAfter === undefined) {
      this.#keptAfter = position
      this.#keptUpTo = position
    }
    if (position < this.#keptAfter) return (await this.readAfter(position)).map(sentEvent)
    if (position >= this.#keptUpTo && this.#newest > this.#keptUpTo) {
      this.#reading ??= this.#readNext().finally(() => { this.#reading = undefined })
      await this.#reading
    }
    const first = this.#kept.findIndex((event) => event.id > position)
    return first === -1 ? [] : this.#kept.slice(first, first + EVENTS_PER_READ)
  }

  async #readNext (): Promise<void> {
    const read = await this.readAfter(this.#keptUpTo)
    if (read.length === 0) return
    this.#kept.push(...read.map(sentEvent))
    this.#keptUpTo = read.at(-1)!.id
    if (this.#kept.length > KEPT_EVENTS) this.#keptAfter = this.#kept.splice(0, this.#kept.length - KEPT_EVENTS).at(-1)!.id
  }

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

  /** Whether the feed is closed: nobody waits on it any more. */
  get closed (): boolean {
    return this.#closed
  }

  /** Releases every waiter, and each later one at once. */
  close (): void {
    this.#closed = true
    for (const check of [...this.#waiters]) check()
  }
}
