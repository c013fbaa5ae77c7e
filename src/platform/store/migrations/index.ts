/**
 * The store's one migration history, and the platform's own part of it.
 *
 * A migration lives with what it changes: the platform's files here (its own tables, and the early
 * migrations that change the tables of several resources at once), each resource's in its
 * `resources/<kind>/migrations/`. The list of resources (src/resources.ts) hands the union to
 * `migrationHistory`, and the runner (platform/store/db.ts) replays it in the order of the numbers, on
 * SQLite and PostgreSQL alike: the tables reference each other (a volume its instance, an event its
 * account), so there is one order, and the numbers never change. A released migration is never edited, renamed or renumbered (its name
 * is what the database records); it may move to another folder.
 */
import type { Migration, MigrationProvider } from 'kysely';
import * as foundation from './0001_foundation.js';
import * as instances from './0002_instances.js';
import * as snapshots from './0005_snapshots.js';
import * as writePath from './0010_write_path.js';
import * as idempotencyCommits from './0016_idempotency_commits.js';
import * as eventActor from './0017_event_actor.js';

/** Migrations by the name the database records: `NNNN_what_it_changes`. */
export type Migrations = Readonly<Record<string, Migration>>;

/**
 * The platform's migrations: its own tables (accounts' quotas and keys, idempotency, events, jobs,
 * settings) and those that change several resources' tables in one step (0002 made instances, their
 * volumes and the job table; 0005 snapshots, volumes' backup schedules and restore columns; 0010 the
 * write path's usage counters and address pools).
 */
export const PLATFORM_MIGRATIONS: Migrations = {
  '0001_foundation': foundation,
  '0002_instances': instances,
  '0005_snapshots': snapshots,
  '0010_write_path': writePath,
  '0016_idempotency_commits': idempotencyCommits,
  '0017_event_actor': eventActor,
};

const NAME = /^(\d{4})_[a-z0-9_]+$/;

/**
 * One history from the platform's migrations and each resource's: ordered by number, whoever holds the
 * file. A name that is not `NNNN_words`, or a number that two migrations take, is refused here, when
 * the history is made: Kysely would order two migrations of one number by the rest of their names,
 * which is not an order anyone chose.
 */
export function migrationHistory(...parts: readonly Migrations[]): MigrationProvider & {
  readonly names: readonly string[];
} {
  const byNumber = new Map<string, string>();
  const all: Record<string, Migration> = {};
  for (const part of parts) {
    for (const [name, migration] of Object.entries(part)) {
      const number = NAME.exec(name)?.[1];
      if (number === undefined) {
        throw new Error(
          `Migration ${name}: a migration is named NNNN_words (four digits, then what it changes)`,
        );
      }
      const taken = byNumber.get(number);
      if (taken !== undefined) {
        throw new Error(
          `Migrations ${taken} and ${name} both take number ${number}: each number is used once (take the next free one)`,
        );
      }
      byNumber.set(number, name);
      all[name] = migration;
    }
  }
  const names = [...byNumber.keys()].sort().map((number) => byNumber.get(number) as string);
  const ordered = Object.fromEntries(names.map((name) => [name, all[name] as Migration]));
  return { names, getMigrations: async () => ordered };
}
