/**
 * Brings SQLite's commits to the disk without holding up the event loop.
 *
 * With synchronous=FULL, every commit waited for fdatasync of the WAL file on the event loop:
 * 0.3–0.5 ms here, during which no request moved, a quarter of `POST /users`'s time under
 * load. The database now runs with synchronous=NORMAL, where a commit writes its pages to the
 * WAL file and returns, and this syncs that file in Node's thread pool: one fdatasync at a
 * time, each covering every commit made before it started. The repository answers a write,
 * and a read that may have seen one, only once it is on the disk, so no client learns of a
 * row that a power cut could take back.
 */
import fs from 'node:fs'

export interface WalSync {
  /** Called before a transaction that writes: from here on, its commit may be in the WAL. */
  noteCommit: () => void
  /** Resolves once every commit noted so far is on the disk; rejects if the sync failed. */
  untilOnDisk: () => Promise<void>
}

/** Coordinates the syncs; `flush` makes everything written to the WAL so far durable. */
export function coordinateSyncs (flush: () => Promise<void>): WalSync {
  let noted = 0
  let onDisk = 0
  let running: Promise<void> | undefined

  function startFlush (): Promise<void> {
    const covers = noted
    running = flush()
      .then(() => { onDisk = covers })
      .finally(() => { running = undefined })
    return running
  }

  return {
    noteCommit () { noted++ },
    async untilOnDisk () {
      const target = noted
      // A flush under way may have started before this commit was noted; then wait for it,
      // and start (or join) the next one.
      while (onDisk < target) await (running ?? startFlush())
    }
  }
}

/** Syncs of the WAL file beside a SQLite database file; `close` releases the file. */
export function walFileSync (databaseFile: string): WalSync & { close: () => void } {
  // SQLite creates the WAL file by the first commit and keeps it (reset, never replaced)
  // while the connection is open, so one descriptor, opened at the first sync, serves.
  let descriptor: number | undefined
  const syncs = coordinateSyncs(async () => await new Promise<void>((resolve, reject) => {
    descriptor ??= fs.openSync(`${databaseFile}-wal`, 'r+')
    fs.fdatasync(descriptor, (error) => { if (error === null) resolve(); else reject(error) })
  }))
  return { ...syncs, close: () => { if (descriptor !== undefined) fs.closeSync(descriptor) } }
}
