import { type Kysely, PostgresAdapter } from 'kysely';

/** The few places SQL differs between engines (row locks, sequences) ask this. */
// biome-ignore lint/suspicious/noExplicitAny: works for any schema
export function isPostgres(db: Kysely<any>): boolean {
  return db.getExecutor().adapter instanceof PostgresAdapter;
}

/** Whether an error is a unique-constraint violation, on either engine. */
export function isUniqueViolation(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}
