/**
 * Queries compiled once. Kysely builds each query as a tree of frozen nodes and compiles the tree to SQL
 * on every call; on the write path's hot statements (a create, a boot step, a job claim) that cost about
 * as much CPU as SQLite running them (docs/benchmarks.md, issue 18). A query made with `compiledOnce` is
 * built with Kysely as usual, the first time it runs on each engine, with stand-ins where the values go
 * (`p.id`); every later call puts the values in the compiled SQL's parameters and runs it as it is.
 *
 * Only the values may vary between calls, not the query's shape: a query whose columns or list lengths
 * depend on the call is one `compiledOnce` per shape (see `compiledPerShape`).
 *
 * On PostgreSQL the compiled SQL also runs as a named prepared statement (platform/store/postgres-prepared.ts), so
 * the server parses and plans it once per connection instead of on every call. Compiled queries run after
 * the migrations (src/composition.ts migrates the store before it builds a service), so a statement is
 * prepared against the schema it was written for; postgres-prepared.ts copes with a schema changed later
 * by another replica.
 */
import type { Compilable, CompiledQuery, Kysely, QueryResult } from 'kysely';
import { isPostgres } from './dialect.js';
import { prepareOnPostgres, writeBehind } from './postgres-prepared.js';

/** Stands in for the value named `name` while the query is built. */
class Slot {
  constructor(readonly name: string) {}
}

interface Compiled {
  sql: string;
  /** `sql` as a write whose answer nobody reads (postgres-prepared.ts `writeBehind`); `sql` on SQLite. */
  writeSql: string;
  /** Per parameter of the SQL: the name of the value that fills it, or null when the query fixes it. */
  slots: (string | null)[];
  /** The values the query fixes (null where a slot goes). */
  fixed: unknown[];
  query: CompiledQuery['query'];
  queryId: CompiledQuery['queryId'];
}

export interface CompiledOnce<DB, P, R> {
  /** Runs the query with these values; the result as Kysely's `executeQuery` gives it. */
  run(db: Kysely<DB>, values: P): Promise<QueryResult<R>>;
  /** The rows. */
  execute(db: Kysely<DB>, values: P): Promise<R[]>;
  /** The first row, if any. */
  executeTakeFirst(db: Kysely<DB>, values: P): Promise<R | undefined>;
  /**
   * Runs a write whose answer the caller does not read: no rows, no count, and no failure it handles
   * itself. Inside a PostgreSQL transaction it is not waited for: the transaction's next statement goes
   * out behind it, and its failure fails that statement or the COMMIT (platform/store/postgres-prepared.ts).
   * Elsewhere (SQLite, or no transaction) it runs as `run` does.
   */
  write(db: Kysely<DB>, values: P): Promise<void>;
}

/**
 * A query built by `build` once per engine. `p` stands for the values: `p.name` goes where the value
 * named `name` of each call goes (`where('id', '=', p.id)`, `.set({ run_at: p.runAt })`, `.limit(p.limit)`).
 * `db` and `p` are only for building; the query must not depend on anything else that varies.
 */
export function compiledOnce<DB, P extends object, R>(
  build: (db: Kysely<DB>, p: P) => Compilable<R>,
): CompiledOnce<DB, P, R> {
  const byEngine = new Map<'sqlite' | 'postgres', Compiled>();
  const stand = new Proxy({} as P, { get: (_, name) => new Slot(String(name)) });

  const compiledFor = (db: Kysely<DB>): Compiled => {
    const engine = isPostgres(db) ? 'postgres' : 'sqlite';
    let compiled = byEngine.get(engine);
    if (compiled === undefined) {
      const query = build(db, stand).compile();
      compiled = {
        sql: query.sql,
        writeSql: engine === 'postgres' ? writeBehind(query.sql) : query.sql,
        slots: query.parameters.map((value) => (value instanceof Slot ? value.name : null)),
        fixed: query.parameters.map((value) => (value instanceof Slot ? null : value)),
        query: query.query,
        queryId: query.queryId,
      };
      // Only the values vary from call to call, so the text is worth preparing once per connection.
      if (engine === 'postgres') {
        prepareOnPostgres(compiled.sql);
        prepareOnPostgres(compiled.writeSql);
      }
      byEngine.set(engine, compiled);
    }
    return compiled;
  };

  const send = (db: Kysely<DB>, values: P, asWrite: boolean): Promise<QueryResult<R>> => {
    const compiled = compiledFor(db);
    const { slots, fixed, query, queryId } = compiled;
    const parameters = new Array<unknown>(slots.length);
    for (let i = 0; i < slots.length; i++) {
      const name = slots[i];
      parameters[i] = name === null ? fixed[i] : values[name as keyof P];
    }
    const sql = asWrite ? compiled.writeSql : compiled.sql;
    return db.executeQuery<R>({ sql, parameters, query, queryId } as CompiledQuery<R>);
  };
  const run = (db: Kysely<DB>, values: P) => send(db, values, false);

  return {
    run,
    write: async (db, values) => {
      await send(db, values, true);
    },
    execute: async (db, values) => (await run(db, values)).rows,
    executeTakeFirst: async (db, values) => (await run(db, values)).rows[0],
  };
}

/**
 * The names of the columns `changes` sets, comma-separated, as a shape for `compiledPerShape`: those whose
 * value is not undefined (Kysely's `set()` and `values()` leave those out too).
 */
export function columnsShape(changes: object): string {
  return Object.entries(changes)
    .filter(([, value]) => value !== undefined)
    .map(([column]) => column)
    .join(',');
}

/**
 * `compiledOnce` for a query whose shape depends on the call (which columns an UPDATE sets, how many
 * rows an INSERT adds): one compiled query per shape, named by `shapeOf` and built by `build(shape)`.
 * Shapes are few in practice (a status change, a settle); the cache is bounded all the same.
 */
export function compiledPerShape<DB, P extends object, R>(
  build: (shape: string) => (db: Kysely<DB>, p: P) => Compilable<R>,
  limit = 64,
): (shape: string) => CompiledOnce<DB, P, R> {
  const shapes = new Map<string, CompiledOnce<DB, P, R>>();
  return (shape) => {
    let query = shapes.get(shape);
    if (query === undefined) {
      query = compiledOnce(build(shape));
      if (shapes.size >= limit) shapes.delete(shapes.keys().next().value as string);
      shapes.set(shape, query);
    }
    return query;
  };
}
