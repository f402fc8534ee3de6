/** The tables, as Kysely sees them; row types are derived, never written twice. */
import type { Generated, Insertable, Selectable } from 'kysely'

export interface UsersTable {
  id: Generated<number>
  name: string
  email: string
  created_at: Generated<string>
}

export interface Database {
  users: UsersTable
}

export type UserRow = Selectable<UsersTable>
export type NewUserRow = Insertable<UsersTable>
