/** The part of Node's built-in `node:sqlite` (Node 22.13+) the service uses; @types/node 20 has none of it. */
declare module 'node:sqlite' {
  interface StatementSync {
    all (...parameters: unknown[]): unknown[]
    run (...parameters: unknown[]): { changes: number | bigint, lastInsertRowid: number | bigint }
    iterate (...parameters: unknown[]): IterableIterator<unknown>
    columns (): unknown[]
  }
  class DatabaseSync {
    constructor (path: string)
    exec (sql: string): void
    prepare (sql: string): StatementSync
    close (): void
  }
}
