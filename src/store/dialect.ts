import { type Kysely, PostgresAdapter } from 'kysely';

/** The few places SQL differs between engines (row locks, sequences) ask this. */
// biome-ignore lint/suspicious/noExplicitAny: works for any schema
export function isPostgres(db: Kysely<any>): boolean {
  return db.getExecutor().adapter instanceof PostgresAdapter;
}
