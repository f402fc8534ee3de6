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
interface SentEvent { id: number, text: string }

/** Events as one write of the stream: their text, the last one's position, and whether more may follow at once. */
export interface Page { bytes: Buffer, last: number, more: boolean }

const sentEvent = (event: UserEvent): SentEvent => ({ id: event.id, text: `id: ${event.id}\nevent: ${event.type}\ndata: ${JSON.stringify(event)}\n\n` })
const pageOf = (events: SentEvent[], more: boolean): Page => ({ bytes: Buffer.from(events.map((event) => event.text).join('')), last: events.at(-1)!.id, more })

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
  /** The pages of the kept events built so far, by the index they start at: readers at one position share one. */
  #pages = new Map<number, Page>()

  constructor (private readonly readNewest: () => Promise<number>, private readonly readAfter: (position: number) => Promise<UserEvent[]>) {}

  /**
   * The events after `position`, undefined when there are none yet. A reader within the kept
   * events gets all of them after it, in one page that every reader at that position shares; one
   * at their end shares one read of the next with every other; one further behind reads its own.
   */
  async pageAfter (position: number): Promise<Page | undefined> {
    if (this.#keptAfter === undefined) {
      this.#keptAfter = position
      this.#keptUpTo = position
    }
    if (position < this.#keptAfter) {
      const read = await this.readAfter(position)
      return read.length === 0 ? undefined : pageOf(read.map(sentEvent), read.length === EVENTS_PER_READ)
    }
    if (position >= this.#keptUpTo && this.#newest > this.#keptUpTo) {
      this.#reading ??= this.#readNext().finally(() => { this.#reading = undefined })
      await this.#reading
    }
    const first = this.#firstAfter(position)
    if (first === this.#kept.length) return undefined
    let page = this.#pages.get(first)
    if (page === undefined) {
      page = pageOf(this.#kept.slice(first), false)
      this.#pages.set(first, page)
    }
    return page
  }

  /** The index of the first kept event after `position`, found by halving: positions rise. */
  #firstAfter (position: number): number {
    let [low, high] = [0, this.#kept.length]
    while (low < high) {
      const middle = (low + high) >>> 1
      if (this.#kept[middle]!.id > position) high = middle
      else low = middle + 1
    }
    return low
  }

  async #readNext (): Promise<void> {
    const read = await this.readAfter(this.#keptUpTo)
    if (read.length === 0) return
    this.#kept.push(...read.map(sentEvent))
    this.#keptUpTo = read.at(-1)!.id
    if (this.#kept.length > KEPT_EVENTS) this.#keptAfter = this.#kept.splice(0, this.#kept.length - KEPT_EVENTS).at(-1)!.id
    this.#pages.clear()
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
