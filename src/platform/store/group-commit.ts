/**
 * Group commit for the SQLite store: the write transactions of concurrent requests (and of the job
 * runner, and plain writes outside any transaction) share one durable COMMIT.
 *
 * SQLite has one writer, and with `synchronous=FULL` each COMMIT waits for the WAL to reach the disk;
 * better-sqlite3 does that on the main thread, so one commit per transaction makes the fsync, not the
 * work, the limit of every write path. Here a *batch* is one real transaction (BEGIN IMMEDIATE …
 * COMMIT) that holds many *members*: each logical transaction (Kysely's `db.transaction()`, whose API
 * callers keep) runs inside it as a SAVEPOINT, one member at a time, in the order they asked.
 *
 * - A member that finishes releases its savepoint and waits: its promise (and so the request's answer)
 *   resolves only once the COMMIT holding its work has returned.
 * - A member that throws is rolled back to its savepoint: none of its writes stay, the batch goes on.
 * - A member reads what it wrote and what earlier members of the batch wrote (same connection), so it
 *   decides exactly as if they had committed before it; if the COMMIT fails, they all fail together.
 * - The batch commits when the event loop has run every callback that was ready (setImmediate, after
 *   the poll phase): everything that arrived while the previous COMMIT held the thread, or during this
 *   turn, shares the next fsync. Members take turns through a FIFO lock; the flush queues behind the
 *   members already waiting and ahead of later ones.
 * - A plain write outside a transaction (an UPDATE the job runner or the simulated driver makes) is a
 *   member of one statement: it too resolves after its COMMIT.
 * - A plain read outside a transaction sees every write made before it was asked, and only once it is
 *   durable: while a batch that wrote is open, the read waits for its COMMIT (as it waited for the
 *   connection before group commit), then reads; on the writing connection when no batch is open, else
 *   on a second, query-only connection that sees only what is committed (a WAL reader).
 * - A member that wrote nothing, in a batch where nobody wrote yet, read only committed work: it is
 *   answered at once (a job runner's claim that found nothing due does not wait for a COMMIT).
 * - If a statement makes SQLite abandon the whole transaction (disk full, I/O error) or the COMMIT fails,
 *   every member of the batch is rejected: none was answered, and none is answered falsely.
 *
 * What a member must not do: await anything but its own queries (network, timers, other connections):
 * the lock is held for the member's whole run, so the batch and everyone behind it would wait.
 */
import type SqliteDatabase from 'better-sqlite3';
import {
  CompiledQuery,
  type DatabaseConnection,
  type DatabaseIntrospector,
  type Dialect,
  type DialectAdapter,
  type Driver,
  type Kysely,
  type QueryCompiler,
  type QueryResult,
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
} from 'kysely';

/** What the batches did so far (for tests, metrics and benchmarks). */
export interface GroupCommitStats {
  /** COMMITs that held at least one member. */
  commits: number;
  /** Members committed (logical transactions and plain writes). */
  members: number;
  /** Members rolled back to their savepoint (they threw). */
  rolledBack: number;
  /** The largest batch committed. */
  largestBatch: number;
  /** Statements run for callers, reads and writes (not the batches' own BEGIN, SAVEPOINT, COMMIT). */
  statements: number;
  /** Members of the open batch waiting for its COMMIT now (none were answered yet). */
  waiting: number;
}

export interface GroupCommitOptions {
  /**
   * Test-only (config's NIMBUS_TEST_COMMIT_DELAY_MS): milliseconds to wait, holding the batch open,
   * before each COMMIT, so a test can kill the process while answers wait for their commit.
   */
  commitDelayMs?: number;
}

const MEMBER = 'nimbus_member';
const STATEMENT_CACHE_SIZE = 500;

/**
 * Prepared statements kept by their SQL. Kysely emits the same SQL text for the same query shape, and
 * parsing and planning cost more than a primary-key lookup does; the driver runs one statement at a time
 * per connection, so a kept statement is never in use twice, and SQLite re-prepares it itself when the
 * schema changes. Bounded, since some SQL varies in length (`in (?, ?, …)`); the oldest entry goes first.
 */
class StatementCache {
  private readonly statements = new Map<string, SqliteDatabase.Statement>();

  constructor(private readonly database: SqliteDatabase.Database) {}

  prepare(sqlText: string): SqliteDatabase.Statement {
    let statement = this.statements.get(sqlText);
    if (statement === undefined) {
      statement = this.database.prepare(sqlText);
      if (this.statements.size >= STATEMENT_CACHE_SIZE) {
        this.statements.delete(this.statements.keys().next().value as string);
      }
      this.statements.set(sqlText, statement);
    }
    return statement;
  }
}

function run<R>(statement: SqliteDatabase.Statement, parameters: readonly unknown[]): QueryResult<R> {
  if (statement.reader) return { rows: statement.all(parameters) as R[] };
  const { changes, lastInsertRowid } = statement.run(parameters);
  return {
    numAffectedRows: BigInt(changes),
    insertId: BigInt(lastInsertRowid),
    rows: [],
  };
}

/** A lock handed to waiters in the order they asked. */
class FifoLock {
  private held = false;
  private readonly waiters: (() => void)[] = [];
  private head = 0;

  acquire(): Promise<void> {
    if (!this.held) {
      this.held = true;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  release(): void {
    if (this.head < this.waiters.length) {
      const next = this.waiters[this.head] as () => void;
      this.waiters[this.head++] = noop;
      if (this.head > 1024 && this.head * 2 > this.waiters.length) {
        this.waiters.splice(0, this.head);
        this.head = 0;
      }
      next();
      return;
    }
    this.waiters.length = 0;
    this.head = 0;
    this.held = false;
  }
}

const noop = () => {};

interface Waiter {
  resolve(): void;
  reject(error: unknown): void;
}

/** The open transaction and the members waiting for its COMMIT. */
interface Batch {
  waiting: Waiter[];
  /** Plain reads waiting for it to end (committed or not). */
  readers: (() => void)[];
  /** Whether any statement of it may have written. */
  dirty: boolean;
}

class BatchLost extends Error {
  constructor(cause: unknown) {
    super('SQLite abandoned the transaction this write was part of; it was not committed', { cause });
  }
}

/**
 * One use of the store, as Kysely sees a connection: plain queries go where the rules above say; between
 * `beginTransaction` and its end, queries run inside the member's savepoint.
 */
class MemberConnection implements DatabaseConnection {
  /** idle: plain queries; member: holds the lock inside its savepoint; finished: released it already. */
  state: 'idle' | 'member' | 'finished' = 'idle';

  constructor(private readonly driver: GroupCommitDriver) {}

  executeQuery<R>(compiledQuery: CompiledQuery): Promise<QueryResult<R>> {
    if (this.state === 'member') return this.driver.runInMember<R>(compiledQuery);
    return this.driver.runPlain<R>(compiledQuery);
  }

  /** One chunk of every row, read at once (nothing in Nimbus streams). */
  async *streamQuery<R>(compiledQuery: CompiledQuery): AsyncIterableIterator<QueryResult<R>> {
    yield await this.executeQuery<R>(compiledQuery);
  }
}

export class GroupCommitDriver implements Driver {
  private readonly counted = { commits: 0, members: 0, rolledBack: 0, largestBatch: 0, statements: 0 };
  private readonly lock = new FifoLock();
  private readonly writer: StatementCache;
  private readonly reader: StatementCache;
  private readonly idle: MemberConnection[] = [];
  private batch: Batch | null = null;
  private flushQueued = false;
  private destroyed = false;

  /**
   * `writer` takes every write; `reader`, a second connection to the same WAL file, answers plain reads
   * while a batch is open. Both are set up by the caller (pragmas); the driver closes both.
   */
  constructor(
    private readonly writerDb: SqliteDatabase.Database,
    private readonly readerDb: SqliteDatabase.Database,
    private readonly options: GroupCommitOptions = {},
  ) {
    this.writer = new StatementCache(writerDb);
    this.reader = new StatementCache(readerDb);
  }

  get stats(): GroupCommitStats {
    return { ...this.counted, waiting: this.batch?.waiting.length ?? 0 };
  }

  async init(): Promise<void> {}

  async acquireConnection(): Promise<DatabaseConnection> {
    if (this.destroyed) throw new Error('the store is closed');
    return this.idle.pop() ?? new MemberConnection(this);
  }

  async releaseConnection(connection: DatabaseConnection): Promise<void> {
    const member = connection as MemberConnection;
    // A member Kysely gave up on without commit or rollback (it cannot, but the lock must not leak).
    if (member.state === 'member') this.abandonMember();
    member.state = 'idle';
    this.idle.push(member);
  }

  async beginTransaction(connection: DatabaseConnection): Promise<void> {
    const member = connection as MemberConnection;
    await this.lock.acquire();
    try {
      this.open();
      this.exec(`savepoint ${MEMBER}`);
    } catch (error) {
      this.lock.release();
      this.scheduleFlush();
      throw error;
    }
    member.state = 'member';
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    const member = connection as MemberConnection;
    if (member.state !== 'member') throw new Error('no transaction to commit');
    member.state = 'finished';
    let committed: Promise<void> | null;
    try {
      this.exec(`release ${MEMBER}`);
      committed = this.join();
    } catch (error) {
      this.afterFailedStatement(error);
      this.abandonMember();
      throw error;
    }
    this.lock.release();
    this.scheduleFlush();
    if (committed) await committed;
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    const member = connection as MemberConnection;
    // Already left the lock (its commit failed): nothing of it is left to undo.
    if (member.state !== 'member') return;
    member.state = 'finished';
    this.abandonMember();
  }

  async savepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw(`savepoint ${quoted(name)}`));
  }

  async rollbackToSavepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw(`rollback to ${quoted(name)}`));
  }

  async releaseSavepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw(`release ${quoted(name)}`));
  }

  /** Commits what is pending, then closes both connections. */
  async destroy(): Promise<void> {
    if (this.destroyed) return;
    await this.lock.acquire();
    this.destroyed = true;
    this.commitBatch();
    this.lock.release();
    this.readerDb.close();
    this.writerDb.close();
  }

  /**
   * Runs `work` on the writing connection with no transaction open, in its turn (the open batch is
   * committed first): for what SQLite honours only outside a transaction (`pragma foreign_keys`).
   */
  async outsideTransaction<T>(work: (writer: SqliteDatabase.Database) => T): Promise<T> {
    await this.lock.acquire();
    try {
      this.commitBatch();
      return work(this.writerDb);
    } finally {
      this.lock.release();
    }
  }

  /** A query inside the member holding the lock. */
  runInMember<R>(compiledQuery: CompiledQuery): Promise<QueryResult<R>> {
    try {
      const statement = this.writer.prepare(compiledQuery.sql);
      if (!statement.readonly) (this.batch as Batch).dirty = true;
      this.counted.statements++;
      return Promise.resolve(run<R>(statement, compiledQuery.parameters));
    } catch (error) {
      this.afterFailedStatement(error);
      return Promise.reject(error);
    }
  }

  /** A query outside any transaction: a read of what is committed, or a write that is a member alone. */
  async runPlain<R>(compiledQuery: CompiledQuery): Promise<QueryResult<R>> {
    if (this.destroyed) throw new Error('the store is closed');
    const statement = this.writer.prepare(compiledQuery.sql);
    this.counted.statements++;
    if (statement.readonly) {
      const open = this.batch;
      if (open?.dirty) await new Promise<void>((resolve) => open.readers.push(resolve));
      // No batch open: the writer holds nothing uncommitted (and keeps its warm page cache). Else the
      // reader, which sees what is committed, not what the batch open now wrote so far.
      const on = this.batch === null ? statement : this.reader.prepare(compiledQuery.sql);
      return run<R>(on, compiledQuery.parameters);
    }
    await this.lock.acquire();
    let result: QueryResult<R>;
    let committed: Promise<void> | null;
    try {
      this.open().dirty = true;
      // One statement is atomic by itself: a failing one leaves nothing behind, no savepoint needed.
      result = run<R>(statement, compiledQuery.parameters);
      committed = this.join();
    } catch (error) {
      this.afterFailedStatement(error);
      this.lock.release();
      this.scheduleFlush();
      throw error;
    }
    this.lock.release();
    this.scheduleFlush();
    if (committed) await committed;
    return result;
  }

  /**
   * A read of what is committed now, on the reader connection, answered at once: it does not wait for
   * the open batch's COMMIT, so it does not see that batch's writes (nobody was answered about them yet).
   * For readers that decide on what they read under a guard anyway (the job runner's reconcilers, whose
   * writes are version-guarded and whose driver calls are idempotent); see `CommittedReadsDialect`.
   */
  runCommittedRead<R>(compiledQuery: CompiledQuery): QueryResult<R> {
    if (this.destroyed) throw new Error('the store is closed');
    const statement = this.reader.prepare(compiledQuery.sql);
    if (!statement.readonly) throw new Error('a committed read cannot write');
    this.counted.statements++;
    return run<R>(statement, compiledQuery.parameters);
  }

  /** Opens the batch's transaction unless one is open; the caller holds the lock. */
  private open(): Batch {
    if (this.batch) return this.batch;
    // IMMEDIATE takes the write lock now: a batch that read before another process wrote would fail.
    this.exec('begin immediate');
    this.batch = { waiting: [], readers: [], dirty: false };
    return this.batch;
  }

  /**
   * The member that just finished waits for the batch's COMMIT; null when nobody in the batch wrote
   * anything yet, so what the member read was committed already.
   */
  private join(): Promise<void> | null {
    const batch = this.batch as Batch;
    if (!batch.dirty) return null;
    return new Promise<void>((resolve, reject) => batch.waiting.push({ resolve, reject }));
  }

  /** Undoes the member holding the lock, keeps the batch, and lets the next one in. */
  private abandonMember(): void {
    this.counted.rolledBack++;
    try {
      if (this.writerDb.inTransaction) {
        this.exec(`rollback to ${MEMBER}`);
        this.exec(`release ${MEMBER}`);
      }
    } catch (error) {
      this.afterFailedStatement(error);
    }
    this.afterFailedStatement(null);
    this.lock.release();
    this.scheduleFlush();
  }

  /**
   * After a statement failed: if SQLite ended the whole transaction (it does for disk full, I/O errors,
   * and a statement that commits or rolls back itself), the members waiting in it lost their work.
   */
  private afterFailedStatement(error: unknown): void {
    if (this.batch === null || this.writerDb.inTransaction) return;
    const lost = this.batch;
    this.batch = null;
    const failure = new BatchLost(error);
    for (const waiter of lost.waiting) waiter.reject(failure);
    for (const reader of lost.readers) reader();
  }

  private scheduleFlush(): void {
    if (this.flushQueued || this.batch === null || this.destroyed) return;
    this.flushQueued = true;
    setImmediate(() => {
      void this.flush();
    });
  }

  private async flush(): Promise<void> {
    await this.lock.acquire();
    this.flushQueued = false;
    try {
      const delayMs = this.options.commitDelayMs ?? 0;
      if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
      if (!this.destroyed) this.commitBatch();
    } finally {
      this.lock.release();
    }
  }

  /** COMMITs the open batch (the caller holds the lock) and settles its members. */
  private commitBatch(): void {
    const batch = this.batch;
    if (batch === null) return;
    this.batch = null;
    const { waiting, readers } = batch;
    try {
      // Nobody is waiting when every member of the batch was rolled back: nothing to keep.
      if (waiting.length === 0) this.exec('rollback');
      else this.commitNow();
    } catch (error) {
      if (this.writerDb.inTransaction) {
        try {
          this.exec('rollback');
        } catch {
          // the transaction is gone either way
        }
      }
      for (const waiter of waiting) waiter.reject(error);
      for (const reader of readers) reader();
      return;
    }
    for (const reader of readers) reader();
    if (waiting.length === 0) return;
    this.counted.commits++;
    this.counted.members += waiting.length;
    if (waiting.length > this.counted.largestBatch) this.counted.largestBatch = waiting.length;
    for (const waiter of waiting) waiter.resolve();
  }

  private exec(sqlText: string): void {
    this.writer.prepare(sqlText).run();
  }

  /**
   * The batch's COMMIT: with synchronous=FULL it returns once the WAL is on disk, and better-sqlite3
   * waits for that on the main thread. A method of its own so a CPU profile shows that wait apart from
   * the other transaction statements (bench/create-throughput.mjs --cpu-prof).
   */
  private commitNow(): void {
    this.writer.prepare('commit').run();
  }
}

/**
 * SQLite runs DDL inside transactions; Kysely's adapter says it does not, so its migrator would run each
 * statement of a migration as a commit of its own (a fresh store's schema took about a hundred fsyncs).
 * Saying so runs all pending migrations in one transaction: one commit, and none half-applied.
 */
class TransactionalDdlSqliteAdapter extends SqliteAdapter {
  override get supportsTransactionalDdl(): boolean {
    return true;
  }
}

const quoted = (name: string) => `"${name.replaceAll('"', '""')}"`;

/** Kysely's SQLite dialect (adapter, compiler, introspection) over the group-commit driver. */
export class GroupCommitSqliteDialect implements Dialect {
  constructor(private readonly driver: GroupCommitDriver) {}

  createDriver(): Driver {
    return this.driver;
  }

  createQueryCompiler(): QueryCompiler {
    return new SqliteQueryCompiler();
  }

  createAdapter(): DialectAdapter {
    return new TransactionalDdlSqliteAdapter();
  }

  // biome-ignore lint/suspicious/noExplicitAny: works for any schema
  createIntrospector(db: Kysely<any>): DatabaseIntrospector {
    return new SqliteIntrospector(db);
  }
}

/** The connection of `CommittedReadsDialect`: every query is a read of what is committed. */
class CommittedReadConnection implements DatabaseConnection {
  constructor(private readonly driver: GroupCommitDriver) {}

  executeQuery<R>(compiledQuery: CompiledQuery): Promise<QueryResult<R>> {
    try {
      return Promise.resolve(this.driver.runCommittedRead<R>(compiledQuery));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  async *streamQuery<R>(compiledQuery: CompiledQuery): AsyncIterableIterator<QueryResult<R>> {
    yield await this.executeQuery<R>(compiledQuery);
  }
}

/**
 * Reads of committed data that never wait for a batch's COMMIT (`GroupCommitDriver.runCommittedRead`).
 * Under load a batch that wrote is open almost all the time, so a plain read on the main dialect waits
 * for a COMMIT nearly every time: a boot step that reads its instance and then its machine waited for
 * two commits before deciding anything. No transactions and no writes here; the group-commit driver
 * owns the connections, so destroying this one closes nothing.
 */
export class CommittedReadsDialect implements Dialect {
  constructor(private readonly groupCommit: GroupCommitDriver) {}

  createDriver(): Driver {
    const connection = new CommittedReadConnection(this.groupCommit);
    const refuse = async () => {
      throw new Error('committed reads take no transactions');
    };
    return {
      init: async () => {},
      acquireConnection: async () => connection,
      releaseConnection: async () => {},
      beginTransaction: refuse,
      commitTransaction: refuse,
      rollbackTransaction: refuse,
      destroy: async () => {},
    };
  }

  createQueryCompiler(): QueryCompiler {
    return new SqliteQueryCompiler();
  }

  createAdapter(): DialectAdapter {
    return new SqliteAdapter();
  }

  // biome-ignore lint/suspicious/noExplicitAny: works for any schema
  createIntrospector(db: Kysely<any>): DatabaseIntrospector {
    return new SqliteIntrospector(db);
  }
}
