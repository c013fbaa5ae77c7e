/**
 * Opens the store: SQLite (better-sqlite3, WAL) in the data dir by default, PostgreSQL when a database
 * URL is configured. Both serve the same schema through Kysely.
 */
import { closeSync, existsSync, mkdirSync, openSync } from 'node:fs';
import path from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import {
  Kysely,
  type MigrationProvider,
  type MigrationResultSet,
  Migrator,
  PostgresDialect,
  sql,
} from 'kysely';
import pg from 'pg';
import { isPostgres } from './dialect.js';
import {
  CommittedReadsDialect,
  GroupCommitDriver,
  GroupCommitSqliteDialect,
  type GroupCommitStats,
} from './group-commit.js';
import { preparingPool, type RoundTripStats } from './postgres-prepared.js';
import type { Database } from './schema.js';

export interface StoreOptions {
  /** postgres://… selects PostgreSQL; otherwise SQLite at `<dataDir>/nimbus.db`. */
  databaseUrl?: string | undefined;
  dataDir: string;
  /** Connections in the PostgreSQL pool of requests. */
  poolSize?: number;
  /** Connections in the PostgreSQL pool of background work (`Store.background`); default half `poolSize`. */
  backgroundPoolSize?: number;
  /** Test-only: SQLite waits this long before each group COMMIT (GroupCommitOptions). */
  commitDelayMs?: number;
}

export interface Store {
  db: Kysely<Database>;
  kind: 'sqlite' | 'postgres';
  /**
   * Background work's handle: the job runner (claims, leases, finishing) and what its jobs run (the
   * reconcilers' reads and writes, the simulated machines). On PostgreSQL a small pool of its own, so a
   * boot's statements do not queue behind every request's in one pool: with the requests' pool busy the
   * boots fell behind the creates (docs/benchmarks.md, issue 18). On SQLite `db` itself (one writer).
   */
  background: Kysely<Database>;
  /**
   * Reads only, of what is committed, without waiting for writes in progress: on SQLite they do not wait
   * for the open group commit (platform/store/group-commit.ts, `CommittedReadsDialect`); on PostgreSQL this is
   * `background`, whose plain reads never wait. For readers whose decisions are guarded anyway (job steps).
   */
  committedReads: Kysely<Database>;
  /** SQLite: what group commit did so far (platform/store/group-commit.ts); null on PostgreSQL. */
  commitStats(): GroupCommitStats | null;
  /** PostgreSQL: the round trips both pools made so far (platform/store/postgres-prepared.ts); null on SQLite. */
  roundTripStats(): RoundTripStats | null;
  /** Throws when the database cannot answer. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

const PG_INT8 = 20;

/** The group-commit driver of each SQLite store, for what only its connection can set (migrateToLatest). */
const sqliteCommits = new WeakMap<Kysely<Database>, GroupCommitDriver>();

export function openStore(options: StoreOptions): Store {
  const sqlite = options.databaseUrl ? null : openSqlite(options.dataDir, options.commitDelayMs ?? 0);
  const poolSize = options.poolSize ?? 10;
  const trips: RoundTripStats = { roundTrips: 0 };
  const db = sqlite?.db ?? openPostgres(options.databaseUrl as string, poolSize, trips);
  const background =
    sqlite?.db ??
    openPostgres(
      options.databaseUrl as string,
      options.backgroundPoolSize ?? Math.max(2, Math.ceil(poolSize / 2)),
      trips,
    );
  return {
    db,
    kind: isPostgres(db) ? 'postgres' : 'sqlite',
    background,
    committedReads: sqlite?.committedReads ?? background,
    commitStats: () => (sqlite ? sqlite.commits.stats : null),
    roundTripStats: () => (sqlite ? null : { ...trips }),
    ping: async () => {
      await sql`select 1`.execute(db);
    },
    close: async () => {
      await db.destroy();
      if (background !== db) await background.destroy();
    },
  };
}

function openPostgres(url: string, max: number, trips: RoundTripStats): Kysely<Database> {
  const pool = new pg.Pool({
    connectionString: url,
    max,
    // Queries sent back to back go out together instead of each after the last one's answer: a
    // transaction's BEGIN rides with its first statement (platform/store/postgres-prepared.ts).
    pipeline: true,
    // Counts and sequences are int8; every value Nimbus keeps fits a double exactly.
    types: {
      getTypeParser: (oid: number, format?: 'text' | 'binary') =>
        oid === PG_INT8 ? (value: string) => Number(value) : pg.types.getTypeParser(oid, format),
    } as pg.CustomTypesConfig,
  });
  // PostgreSQL may close a connection at any time (restart, failover, pg_terminate_backend). The pool
  // drops a dead connection and opens another on the next query, and the query that was running on
  // it fails on its own. Both the pool (for idle connections) and each client (for one checked out
  // by a query or transaction) also emit 'error', which would crash the process if nobody listened.
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
  // The queries compiled once run as named prepared statements (platform/store/postgres-prepared.ts).
  return new Kysely<Database>({ dialect: new PostgresDialect({ pool: preparingPool(pool, trips) }) });
}

function openSqlite(
  dataDir: string,
  commitDelayMs: number,
): { db: Kysely<Database>; committedReads: Kysely<Database>; commits: GroupCommitDriver } {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const file = path.join(dataDir, 'nimbus.db');
  // Created owner-only before SQLite opens it (its -wal and -shm files take the same mode).
  if (!existsSync(file)) closeSync(openSync(file, 'a', 0o600));
  const writer = new SqliteDatabase(file);
  // 16 KiB pages (SQLite's default is 4 KiB): a deep list page skips its offset through an index, and
  // the skip costs per page visited, so a four times larger page makes the worst page of a
  // million-instance list about twice as fast (docs/benchmarks.md). Takes effect when the file is
  // created; an existing file keeps its size (VACUUM in rollback-journal mode converts it).
  writer.pragma('page_size = 16384');
  writer.pragma('journal_mode = WAL');
  // FULL: a commit that returned is on disk, even after a power cut. Commits are shared by the writes
  // that arrive together (platform/store/group-commit.ts), so the fsync is paid once per batch.
  writer.pragma('synchronous = FULL');
  writer.pragma('foreign_keys = ON');
  // The second connection answers plain reads while a batch is open: it sees only committed work.
  const reader = new SqliteDatabase(file);
  reader.pragma('query_only = ON');
  for (const database of [writer, reader]) {
    // 64 MiB of page cache (the default is 2 MiB): the index pages a deep list page walks stay in memory
    // instead of being read from the OS on every request.
    database.pragma('cache_size = -65536');
    // Every group-commit member runs in a SAVEPOINT, so each page it first changes is copied to the
    // sub-journal; with temp files that copy spills to disk past 64 KiB (four 16 KiB pages). In memory
    // it stays a memcpy: about 15% more creates per second (docs/benchmarks.md, issue 18).
    database.pragma('temp_store = MEMORY');
    // The admin CLI writes to the same file as the server; wait for the lock instead of failing.
    database.pragma('busy_timeout = 5000');
  }
  const commits = new GroupCommitDriver(writer, reader, { commitDelayMs });
  const db = new Kysely<Database>({ dialect: new GroupCommitSqliteDialect(commits) });
  sqliteCommits.set(db, commits);
  return {
    db,
    committedReads: new Kysely<Database>({ dialect: new CommittedReadsDialect(commits) }),
    commits,
  };
}

/**
 * Brings the schema up to date with `history` (the one history, derived from the list of resources:
 * src/resources.ts `MIGRATIONS`); safe to run from several replicas at once (Kysely takes a lock). On SQLite the
 * migrations run with foreign keys off, as SQLite's way of changing a table's constraints (a rebuild:
 * new table, copy, drop the old one) requires, and are checked once they are done.
 */
export function migrateToLatest(db: Kysely<Database>, history: MigrationProvider): Promise<string[]> {
  return withForeignKeysDeferred(db, () => migrate(db, history, (migrator) => migrator.migrateToLatest()));
}

/** Migrates up or down to `name`, as migrateToLatest does (tests of a migration's way back use it). */
export function migrateTo(db: Kysely<Database>, history: MigrationProvider, name: string): Promise<string[]> {
  return withForeignKeysDeferred(db, () => migrate(db, history, (migrator) => migrator.migrateTo(name)));
}

async function withForeignKeysDeferred(
  db: Kysely<Database>,
  run: () => Promise<string[]>,
): Promise<string[]> {
  const commits = sqliteCommits.get(db);
  if (!commits) return run();
  const foreignKeys = (on: boolean) =>
    commits.outsideTransaction((writer) => {
      writer.pragma(`foreign_keys = ${on ? 'ON' : 'OFF'}`);
      if (writer.pragma('foreign_keys', { simple: true }) !== (on ? 1 : 0)) {
        throw new Error(`cannot turn foreign keys ${on ? 'on' : 'off'}`);
      }
    });
  await foreignKeys(false);
  try {
    const applied = await run();
    const broken = await commits.outsideTransaction(
      (writer) => writer.pragma('foreign_key_check') as unknown[],
    );
    if (broken.length > 0) {
      throw new Error(`the migrations left ${broken.length} row(s) referencing rows that are not there`);
    }
    return applied;
  } finally {
    await foreignKeys(true);
  }
}

async function migrate(
  db: Kysely<Database>,
  history: MigrationProvider,
  move: (migrator: Migrator) => Promise<MigrationResultSet>,
): Promise<string[]> {
  const { error, results } = await move(new Migrator({ db, provider: history }));
  if (error) throw error;
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}
