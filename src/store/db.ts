/**
 * Opens the store: SQLite (better-sqlite3, WAL) in the data dir by default, PostgreSQL when a database
 * URL is configured. Both serve the same schema through Kysely.
 */
import { closeSync, existsSync, mkdirSync, openSync } from 'node:fs';
import path from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import {
  CompiledQuery,
  type DatabaseConnection,
  type Driver,
  Kysely,
  Migrator,
  PostgresDialect,
  SqliteDialect,
  type SqliteDialectConfig,
  SqliteDriver,
  sql,
} from 'kysely';
import pg from 'pg';
import { isPostgres } from './dialect.js';
import { migrationProvider } from './migrations/index.js';
import type { Database } from './schema.js';

export interface StoreOptions {
  /** postgres://… selects PostgreSQL; otherwise SQLite at `<dataDir>/nimbus.db`. */
  databaseUrl?: string | undefined;
  dataDir: string;
  /** Connections in the PostgreSQL pool. */
  poolSize?: number;
}

export interface Store {
  db: Kysely<Database>;
  kind: 'sqlite' | 'postgres';
  /** Throws when the database cannot answer. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

const PG_INT8 = 20;

export function openStore(options: StoreOptions): Store {
  const db = options.databaseUrl
    ? openPostgres(options.databaseUrl, options.poolSize ?? 10)
    : openSqlite(options.dataDir);
  return {
    db,
    kind: isPostgres(db) ? 'postgres' : 'sqlite',
    ping: async () => {
      await sql`select 1`.execute(db);
    },
    close: () => db.destroy(),
  };
}

function openPostgres(url: string, max: number): Kysely<Database> {
  const pool = new pg.Pool({
    connectionString: url,
    max,
    // Counts and sequences are int8; every value Nimbus keeps fits a double exactly.
    types: {
      getTypeParser: (oid: number, format?: 'text' | 'binary') =>
        oid === PG_INT8 ? (value: string) => Number(value) : pg.types.getTypeParser(oid, format),
    } as pg.CustomTypesConfig,
  });
  // PostgreSQL may close an idle connection (restart, failover, pg_terminate_backend); the pool then
  // drops it and opens another on the next query. It also emits 'error', which would crash the
  // process if nobody listened.
  pool.on('error', () => {});
  return new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
}

function openSqlite(dataDir: string): Kysely<Database> {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const file = path.join(dataDir, 'nimbus.db');
  // Created owner-only before SQLite opens it (its -wal and -shm files take the same mode).
  if (!existsSync(file)) closeSync(openSync(file, 'a', 0o600));
  const database = new SqliteDatabase(file);
  // 16 KiB pages (SQLite's default is 4 KiB): a deep list page skips its offset through an index, and
  // the skip costs per page visited, so a four times larger page makes the worst page of a
  // million-instance list about twice as fast (docs/benchmarks.md). Takes effect when the file is
  // created; an existing file keeps its size (VACUUM in rollback-journal mode converts it).
  database.pragma('page_size = 16384');
  database.pragma('journal_mode = WAL');
  // 64 MiB of page cache (the default is 2 MiB): the index pages a deep list page walks stay in memory
  // instead of being read from the OS on every request.
  database.pragma('cache_size = -65536');
  // FULL: a commit that returned is on disk, even after a power cut.
  database.pragma('synchronous = FULL');
  database.pragma('foreign_keys = ON');
  // The admin CLI writes to the same file as the server; wait for the lock instead of failing.
  database.pragma('busy_timeout = 5000');
  return new Kysely<Database>({
    dialect: new ImmediateSqliteDialect({ database: withStatementCache(database) }),
  });
}

/**
 * SQLite transactions that take the write lock when they begin. Kysely's plain BEGIN defers it to the
 * first write; a transaction that reads first and then writes, while another connection (an admin
 * command, another process) wrote meanwhile, fails at once with SQLITE_BUSY, because it cannot wait for
 * the lock without losing what it read. BEGIN IMMEDIATE waits for the lock (busy_timeout) instead.
 */
class ImmediateSqliteDialect extends SqliteDialect {
  constructor(private readonly settings: SqliteDialectConfig) {
    super(settings);
  }

  override createDriver(): Driver {
    return new ImmediateSqliteDriver(this.settings);
  }
}

class ImmediateSqliteDriver extends SqliteDriver {
  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'));
  }
}

const STATEMENT_CACHE_SIZE = 500;

/**
 * Kysely's SQLite driver prepares every query afresh, and parsing and planning the SQL cost more than
 * running a primary-key lookup (measured: about two thirds of `GET /v1/account`'s store time). Kysely
 * emits the same SQL text for the same query shape, so prepared statements are kept by their SQL and
 * reused. This is safe because the driver runs one query at a time on its single connection (a
 * statement is never used by two queries at once) and SQLite re-prepares a kept statement itself
 * when the schema changes. The cache is bounded because some SQL varies in length (`in (?, ?, …)`);
 * the oldest entry goes first.
 */
function withStatementCache(database: SqliteDatabase.Database): SqliteDialectConfig['database'] {
  const statements = new Map<string, SqliteDatabase.Statement>();
  return {
    close: () => database.close(),
    prepare: (sqlText: string) => {
      let statement = statements.get(sqlText);
      if (statement === undefined) {
        statement = database.prepare(sqlText);
        if (statements.size >= STATEMENT_CACHE_SIZE) {
          statements.delete(statements.keys().next().value as string);
        }
        statements.set(sqlText, statement);
      }
      return statement;
    },
  };
}

/** Brings the schema up to date; safe to run from several replicas at once (Kysely takes a lock). */
export async function migrateToLatest(db: Kysely<Database>): Promise<string[]> {
  const migrator = new Migrator({ db, provider: migrationProvider });
  const { error, results } = await migrator.migrateToLatest();
  if (error) throw error;
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}
