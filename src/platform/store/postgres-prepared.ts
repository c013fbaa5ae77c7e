/**
 * PostgreSQL named prepared statements for the queries compiled once (platform/store/compiled-query.ts). Kysely's
 * PostgresDialect sends every query unnamed (Parse, Bind, Describe, Execute), so PostgreSQL parses, analyses
 * and plans each statement on every call and node-postgres serialises its text every time; on the write
 * path that is a large part of a create's CPU on both sides (issue 18). A SQL text registered here runs as
 * a named statement instead: node-postgres sends its Parse once per connection and then only Bind, Describe
 * and Execute. node-postgres remembers per connection which names it prepared, so a connection opened after
 * a lost one prepares them again.
 *
 * Bounded: only the texts compiled-query registers (a fixed set of queries, and a bounded number of shapes
 * per `compiledPerShape`), and at most MAX_PREPARED texts in all, so no connection ever holds more
 * statements than that. Everything else (migrations, BEGIN and COMMIT, advisory locks, queries built per
 * call) runs unnamed as before.
 *
 * A prepared statement keeps the row type it was prepared with: once an ALTER TABLE changes what its
 * `select *` or `returning *` gives, PostgreSQL refuses it ("cached plan must not change result type")
 * until it is prepared again. Compiled queries first run after this process's migrations, but another
 * replica may migrate under a running one (a rolling upgrade). That error therefore closes its connection
 * instead of returning it to the pool, and every connection opened before it is closed at its next
 * checkout, so each process fails at most the queries in flight at that moment; the failed query is run
 * again unnamed on the spot when it was not inside a transaction (inside one, the transaction is lost
 * anyway, as it would be on any error).
 *
 * Round trips: the pool's connections run in node-postgres' pipeline mode, and this wrapper uses it for
 * two things only, both inside a transaction: Kysely's BEGIN is held back and sent with the transaction's
 * first statement, and a write marked `writeBehind` is sent without waiting for its answer (the statement
 * after it, or the COMMIT, waits for both and fails with the write's failure). Every other statement is
 * waited for before the next is sent, as before. `RoundTripStats` counts the waits.
 */
import { createHash } from 'node:crypto';
import type { PostgresCursor, PostgresPool, PostgresPoolClient, PostgresQueryResult } from 'kysely';
import type pg from 'pg';

/** Far above the compiled queries Nimbus has (about a hundred texts); a cap, not a working size. */
const MAX_PREPARED = 512;

/** SQL text -> statement name, for the texts that run prepared. */
const names = new Map<string, string>();

/**
 * Marks `sql` to run as a named prepared statement on PostgreSQL. For SQL texts fixed at build time only
 * (platform/store/compiled-query.ts): its values must all be parameters. Past MAX_PREPARED texts it does nothing.
 */
export function prepareOnPostgres(sql: string): void {
  if (names.has(sql) || names.size >= MAX_PREPARED) return;
  // Named by the text itself, so every process and connection agrees and two texts never share a name.
  names.set(sql, `nimbus_${createHash('sha256').update(sql).digest('hex').slice(0, 32)}`);
}

/** The statement name `sql` runs under, if it runs prepared. */
export function preparedName(sql: string): string | undefined {
  return names.get(sql);
}

/** SQLSTATE 0A000 with this message: the statement's result type changed since it was prepared. */
function isStaleResultType(error: unknown): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  return code === '0A000' && typeof message === 'string' && message.includes('must not change result type');
}

/**
 * What the store sent PostgreSQL so far. Every query a connection submits is one round trip: node-postgres
 * sends a query's messages and waits for its ReadyForQuery before it sends the next, so BEGIN and COMMIT
 * count as trips of their own. Load-independent, unlike a time: test/create-round-trips-pg.test.ts pins a
 * create's and a boot's figure with it.
 */
export interface RoundTripStats {
  /** Queries submitted, each a wait for PostgreSQL's answer. */
  roundTrips: number;
}

/**
 * A pool for Kysely's PostgresDialect over `pool`: its connections run the registered SQL texts as named
 * prepared statements, and count what they send in `stats`.
 */
export function preparingPool(pool: pg.Pool, stats: RoundTripStats = { roundTrips: 0 }): PostgresPool {
  /** Bumped when a prepared statement went stale: connections of an older generation are closed. */
  let generation = 0;
  // Kysely keeps its connection objects per client it is given, so each pg client keeps one wrapper.
  const wrappers = new WeakMap<pg.PoolClient, PreparingClient>();
  const staleSchema = () => {
    generation++;
  };
  return {
    async connect() {
      for (;;) {
        const client = await pool.connect();
        let wrapper = wrappers.get(client);
        if (wrapper === undefined) {
          wrapper = new PreparingClient(client, generation, staleSchema, stats);
          wrappers.set(client, wrapper);
        }
        if (wrapper.generation >= generation) return wrapper;
        // Prepared before a schema change: its statements may be stale, and a fresh connection is cheap.
        wrappers.delete(client);
        client.release(true);
      }
    },
    end: () => pool.end(),
  };
}

/**
 * The mark of a write whose answer its caller does not read (compiled-query.ts `write`). Inside a
 * transaction such a write is sent at once and not waited for: the transaction's next statement goes out
 * behind it on the same connection (node-postgres' pipeline mode), so a run of such writes costs no round
 * trip of its own. Its failure is not lost: the next statement that is waited for, or the COMMIT, fails
 * with it (PostgreSQL has aborted the transaction by then anyway), so nothing commits without it.
 * Outside a transaction it runs as any statement does.
 */
const WRITE_BEHIND = ' /* write-behind */';

/** `sql` marked as a write whose answer nobody reads (a comment: the statement is the same). */
export function writeBehind(sql: string): string {
  return sql + WRITE_BEHIND;
}

/** How Kysely opens a transaction (PostgresDriver.beginTransaction): held back until its first statement. */
function opensTransaction(sql: string): boolean {
  return sql === 'begin' || sql.startsWith('start transaction');
}

/** What a statement not waited for answers at once (no rows; Kysely makes no affected-row count of it). */
const NOT_WAITED = { command: 'SELECT', rowCount: 0, rows: [] } as unknown as PostgresQueryResult<never>;

class PreparingClient implements PostgresPoolClient {
  /** Set when one of this connection's statements went stale: it is closed on release. */
  private stale = false;
  /** Between Kysely's BEGIN and its COMMIT or ROLLBACK. */
  private inTransaction = false;
  /**
   * A BEGIN not sent yet: it goes out with the transaction's first statement, on the same write, so
   * opening a transaction costs no round trip of its own. A transaction with no statement sends neither
   * its BEGIN nor its COMMIT.
   */
  private pendingBegin: string | null = null;
  /** What was sent in this transaction without waiting (its BEGIN, write-behind writes): their failures. */
  private behind: Promise<unknown>[] = [];
  /** Queries sent and not answered yet: a query sent while others are in flight shares their round trip. */
  private inFlight = 0;

  constructor(
    private readonly client: pg.PoolClient,
    readonly generation: number,
    private readonly staleSchema: () => void,
    private readonly stats: RoundTripStats,
  ) {}

  query<R>(sql: string, parameters: ReadonlyArray<unknown>): Promise<PostgresQueryResult<R>>;
  query<R>(cursor: PostgresCursor<R>): PostgresCursor<R>;
  query<R>(
    sqlOrCursor: string | PostgresCursor<R>,
    parameters?: ReadonlyArray<unknown>,
  ): Promise<PostgresQueryResult<R>> | PostgresCursor<R> {
    if (typeof sqlOrCursor !== 'string') {
      // node-postgres refuses a cursor on a pipelined connection; Nimbus reads no rows through one.
      this.stats.roundTrips++;
      return this.client.query(sqlOrCursor as unknown as pg.Submittable) as unknown as PostgresCursor<R>;
    }
    const text = sqlOrCursor;
    if (!this.inTransaction && opensTransaction(text)) {
      this.inTransaction = true;
      this.pendingBegin = text;
      return Promise.resolve(NOT_WAITED);
    }
    if (this.inTransaction && (text === 'commit' || text === 'rollback')) return this.end<R>(text);
    this.sendPendingBegin();
    const answer = this.statement<R>(text, parameters as unknown[]);
    if (this.inTransaction && text.endsWith(WRITE_BEHIND)) {
      this.keepBehind(answer);
      return Promise.resolve(NOT_WAITED);
    }
    return this.afterBehind(answer);
  }

  private sendPendingBegin(): void {
    if (this.pendingBegin === null) return;
    const begin = this.pendingBegin;
    this.pendingBegin = null;
    this.keepBehind(this.send(() => this.client.query(begin)));
  }

  /** Keeps what was sent without waiting; its failure, if any, is thrown by the next statement waited for. */
  private keepBehind(answer: Promise<unknown>): void {
    this.behind.push(
      answer.then(
        () => null,
        (error: unknown) => error ?? new Error('a write-behind statement failed'),
      ),
    );
  }

  /** `answer`, once everything sent before it has answered: the first failure among those wins. */
  private async afterBehind<R>(answer: Promise<PostgresQueryResult<R>>): Promise<PostgresQueryResult<R>> {
    if (this.behind.length === 0) return answer;
    const earlier = this.behind;
    this.behind = [];
    // The statement's own failure is then only PostgreSQL's "transaction is aborted": report the cause.
    answer.catch(() => {});
    for (const failure of await Promise.all(earlier)) if (failure !== null) throw failure;
    return answer;
  }

  /** COMMIT or ROLLBACK: nothing to send when nothing was; a COMMIT fails when a write sent before it did. */
  private async end<R>(text: 'commit' | 'rollback'): Promise<PostgresQueryResult<R>> {
    this.inTransaction = false;
    if (this.pendingBegin !== null) {
      this.pendingBegin = null;
      return NOT_WAITED;
    }
    const answer = this.statement<R>(text, []);
    if (text === 'commit') return this.afterBehind(answer);
    // A rollback throws away whatever failed before it.
    this.behind = [];
    return answer;
  }

  private statement<R>(text: string, values: unknown[]): Promise<PostgresQueryResult<R>> {
    const name = this.stale ? undefined : names.get(text);
    if (name === undefined) return this.send(() => this.client.query(text, values));
    return this.prepared<R>(name, text, values);
  }

  /** Sends one query, counting a round trip unless it goes out while others are still on their way. */
  private async send<R>(submit: () => Promise<unknown>): Promise<PostgresQueryResult<R>> {
    if (this.inFlight === 0) this.stats.roundTrips++;
    this.inFlight++;
    try {
      return (await submit()) as PostgresQueryResult<R>;
    } finally {
      this.inFlight--;
    }
  }

  private async prepared<R>(name: string, text: string, values: unknown[]): Promise<PostgresQueryResult<R>> {
    try {
      return await this.send(() => this.client.query({ name, text, values }));
    } catch (error) {
      if (!isStaleResultType(error)) throw error;
      this.stale = true;
      this.staleSchema();
      if (this.client.getTransactionStatus() !== 'I') throw error;
      return await this.send(() => this.client.query(text, values));
    }
  }

  release(): void {
    this.inTransaction = false;
    this.pendingBegin = null;
    this.behind = [];
    this.client.release(this.stale ? true : undefined);
  }
}
