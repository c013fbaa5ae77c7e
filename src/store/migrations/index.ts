import type { Migration, MigrationProvider } from 'kysely';
import * as foundation from './0001_foundation.js';

/** The one migration history, for SQLite and PostgreSQL alike. Append; never edit a released one. */
const migrations: Record<string, Migration> = {
  '0001_foundation': foundation,
};

export const migrationProvider: MigrationProvider = {
  getMigrations: async () => migrations,
};
