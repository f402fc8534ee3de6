/** Watches the WAL of the service's SQLite file grow while another connection holds a read open. */
import { stat } from 'node:fs/promises'
import type { OutageLogger } from './observed-queries.js'

/** A WAL this large has not been checkpointed for a while: some open read still needs it. */
const WAL_HELD_BACK_BYTES = 64 * 1024 * 1024
const WAL_CHECK_INTERVAL_MS = 1000

/**
 * One warning as the WAL grows past WAL_HELD_BACK_BYTES and one line as it is back under, so that a
 * read held open by mistake is found before the disk fills. The size is read off the event loop.
 */
export function watchWalSize (filename: string, log: OutageLogger): () => void {
  let warned = false
  let checking = false
  const timer = setInterval(() => {
    if (checking) return
    checking = true
    stat(`${filename}-wal`).then(({ size: walBytes }) => {
      if (!warned && walBytes > WAL_HELD_BACK_BYTES) {
        warned = true
        log.warn({ walBytes }, 'the SQLite WAL keeps growing: another connection is likely holding a read open (a backup, a sqlite3 shell in a transaction), and the WAL grows with every write until it ends')
      } else if (warned && walBytes <= WAL_HELD_BACK_BYTES) {
        warned = false
        log.info({ walBytes }, 'the SQLite WAL is small again: the read that held it back has ended')
      }
    }, () => {}).finally(() => { checking = false })
  }, WAL_CHECK_INTERVAL_MS).unref()
  return () => { clearInterval(timer) }
}
