/**
 * Named prepared statements on PostgreSQL (platform/store/postgres-prepared.ts): the compiled hot statements are
 * parsed once per connection and give what the same statements give unnamed; a lost connection's
 * replacement prepares them again; a statement left stale by a schema change retires its connection.
 */
import { Kysely, PostgresDialect, type Selectable, sql } from 'kysely';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresDatabase, HAVE_POSTGRES } from '../../../test/helpers/backends.js';
import { waitFor } from '../../../test/helpers/common.js';
import { MIGRATIONS } from '../../resources.js';
import { claimDueJobs, finishJob, upsertJob } from '../jobs/store.js';
import { compiledOnce } from './compiled-query.js';
import { migrateToLatest, openStore, type Store } from './db.js';
import { preparedName } from './postgres-prepared.js';
import type { Database, JobRow } from './schema.js';

interface Prepared {
  name: string;
  statement: string;
  /** Executions of the statement on this connection. */
  runs: number;
}

/** The statements prepared on the connection that runs this query (the only one, with a pool of one). */
async function preparedStatements(db: Kysely<Database>): Promise<Prepared[]> {
  const { rows } = await sql<Prepared>`
    select name, statement, (generic_plans + custom_plans)::int as runs
    from pg_prepared_statements order by name`.execute(db);
  return rows;
}

async function backendPid(db: Kysely<Database>): Promise<number> {
  const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(db);
  return (rows[0] as { pid: number }).pid;
}

async function admin<T extends pg.QueryResultRow>(url: string, text: string, values: unknown[] = []) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(text, values)).rows;
  } finally {
    await client.end();
  }
}

describe.skipIf(!HAVE_POSTGRES)('Named prepared statements (postgres)', () => {
  let database: { url: string; drop: () => Promise<void> };
  const stores: Store[] = [];
  const open = async (poolSize: number) => {
    const store = openStore({ databaseUrl: database.url, dataDir: '', poolSize });
    stores.push(store);
    await migrateToLatest(store.db, MIGRATIONS);
    return store;
  };

  beforeAll(async () => {
    database = await createPostgresDatabase();
  });
  afterEach(async () => {
    await Promise.all(stores.splice(0).map((store) => store.close()));
    await admin(database.url, 'drop table if exists probe');
    await admin(database.url, 'delete from jobs');
  });
  afterAll(async () => {
    await database?.drop();
  });

  const job = (i: number) => ({
    id: `job-${i}`,
    key: `test:${i}`,
    kind: 'test',
    subjectId: `s-${i}`,
    runAt: new Date(Date.UTC(2026, 0, 1, 0, i)),
    now: new Date(Date.UTC(2026, 0, 1)),
  });

  it('parses the hot statements once per connection, runs them prepared, and prepares nothing else', async () => {
    const opened = await open(1);
    // Claims run on the background pool; here on the one connection of the requests' pool, like the rest.
    const store: Store = { ...opened, background: opened.db };
    for (let i = 0; i < 5; i++) await upsertJob(store.db, job(i));
    await upsertJob(store.db, job(0)); // the conflict branch: same statement
    const claimed: JobRow[] = [];
    for (let round = 0; round < 3; round++) {
      // Two jobs a claim, then two, then one: one statement whatever it takes.
      const now = new Date(Date.UTC(2026, 0, 2));
      claimed.push(...(await claimDueJobs(store, 'runner', now, new Date(Date.UTC(2026, 0, 3)), 2)));
    }
    for (const row of claimed) await store.db.transaction().execute((trx) => finishJob(trx, row));
    expect(claimed.map((row) => row.id).sort()).toEqual(['job-0', 'job-1', 'job-2', 'job-3', 'job-4']);
    expect(await store.db.selectFrom('jobs').select('id').execute()).toEqual([]);

    const statements = await preparedStatements(store.db);
    // upsert, the claim (its lease and its pick in one statement), the finish of a job: each once,
    // named by its text.
    expect(statements).toHaveLength(3);
    for (const statement of statements) expect(preparedName(statement.statement)).toBe(statement.name);
    const runs = Object.fromEntries(statements.map((s) => [s.statement.split(' ')[0], s.runs]));
    expect(statements.map((s) => s.runs).sort()).toEqual([3, 5, 6]);
    expect(runs.insert).toBe(6);
    // The finish: its delete, or the lease's release, in one statement.
    expect(runs.with).toBe(5);
  });

  it('finishing a job enqueued again while it ran only releases its lease (one statement, written behind)', async () => {
    const opened = await open(1);
    const store: Store = { ...opened, background: opened.db };
    await upsertJob(store.db, job(7));
    const now = new Date(Date.UTC(2026, 0, 2));
    const [claimed] = await claimDueJobs(store, 'runner', now, new Date(Date.UTC(2026, 0, 3)), 1);
    if (!claimed) throw new Error('nothing claimed');
    await upsertJob(store.db, { ...job(7), runAt: now }); // enqueued again: its version moves on
    await store.db.transaction().execute((trx) => finishJob(trx, claimed));
    const left = await store.db.selectFrom('jobs').selectAll().execute();
    expect(left).toMatchObject([{ id: 'job-7', version: 2, lease_owner: null, lease_until: null }]);
    const [again] = await claimDueJobs(store, 'runner', now, new Date(Date.UTC(2026, 0, 3)), 1);
    if (!again) throw new Error('not due again');
    await store.db.transaction().execute((trx) => finishJob(trx, again));
    expect(await store.db.selectFrom('jobs').select('id').execute()).toEqual([]);
  });

  it('gives the rows and counts the same statement gives unnamed', async () => {
    const store = await open(1);
    const plainPool = new pg.Pool({
      connectionString: database.url,
      max: 1,
      types: {
        getTypeParser: (oid: number, format?: 'text' | 'binary') =>
          oid === 20 ? (value: string) => Number(value) : pg.types.getTypeParser(oid, format),
      } as pg.CustomTypesConfig,
    });
    const plain = new Kysely<Database>({ dialect: new PostgresDialect({ pool: plainPool }) });
    try {
      for (let i = 0; i < 4; i++) await upsertJob(store.db, job(i));
      const byKind = compiledOnce<Database, { kind: string; after: string }, { id: string; count: number }>(
        (db, p) =>
          db
            .selectFrom('jobs')
            .select((eb) => ['kind as id', eb.fn.countAll<number>().as('count')])
            .where('kind', '=', p.kind)
            .where('run_at', '>', p.after)
            .groupBy('kind'),
      );
      const bump = compiledOnce<Database, { kind: string }, never>((db, p) =>
        db.updateTable('jobs').set({ attempts: sql<number>`attempts + 1` }).where('kind', '=', p.kind),
      );
      const values = { kind: 'test', after: new Date(Date.UTC(2026, 0, 1, 0, 0)).toISOString() };
      // Several times each, so PostgreSQL's plan cache would also be past its first custom plans.
      for (let i = 0; i < 7; i++) {
        expect(await byKind.execute(store.db, values)).toEqual(await byKind.execute(plain, values));
        const prepared = await bump.run(store.db, { kind: 'test' });
        const unnamed = await bump.run(plain, { kind: 'test' });
        expect(prepared).toEqual(unnamed);
        expect(prepared.numAffectedRows).toBe(4n);
      }
      expect(await byKind.execute(store.db, values)).toEqual([{ id: 'test', count: 3 }]);
      const attempts = await store.db.selectFrom('jobs').select('attempts').execute();
      expect(attempts.map((row) => row.attempts)).toEqual([14, 14, 14, 14]);
      // The plain pool's connection prepared nothing; the preparing one both statements (and the upsert).
      expect(await preparedStatements(plain)).toEqual([]);
      expect((await preparedStatements(store.db)).map((s) => s.runs).sort()).toEqual([4, 7, 8]);
    } finally {
      await plain.destroy();
    }
  });

  it('prepares again on the connection that replaces a lost one', async () => {
    const store = await open(1);
    await upsertJob(store.db, job(1));
    const first = await backendPid(store.db);
    await admin(database.url, 'select pg_terminate_backend($1)', [first]);
    // The query that meets the dead connection fails; the pool opens a new one for the next.
    const second = await waitFor('a query on a new connection', async () => {
      try {
        return await backendPid(store.db);
      } catch {
        return undefined;
      }
    });
    expect(second).not.toBe(first);
    expect(await preparedStatements(store.db)).toEqual([]);
    await upsertJob(store.db, job(2));
    await upsertJob(store.db, job(3));
    const statements = await preparedStatements(store.db);
    expect(statements.map((s) => s.runs)).toEqual([2]);
    expect(await store.db.selectFrom('jobs').select('id').orderBy('id').execute()).toEqual([
      { id: 'job-1' },
      { id: 'job-2' },
      { id: 'job-3' },
    ]);
  });

  describe('after a schema change by another process', () => {
    interface Probe {
      probe: { id: number; name: string; extra?: string };
    }
    const byId = compiledOnce<Probe, { id: number }, Selectable<Probe['probe']>>((db, p) =>
      db.selectFrom('probe').selectAll().where('id', '=', p.id),
    );
    const probeDb = (store: Store) => store.db as unknown as Kysely<Probe>;
    const createProbe = () =>
      admin(
        database.url,
        "create table probe (id int primary key, name text); insert into probe values (1, 'one')",
      );
    /** Runs `byId` in `count` transactions at once, so on that many connections; their pids. */
    const onConnections = async (store: Store, count: number): Promise<number[]> => {
      let arrived = 0;
      let allIn: () => void = () => {};
      const together = new Promise<void>((resolve) => {
        allIn = resolve;
      });
      return Promise.all(
        Array.from({ length: count }, () =>
          probeDb(store)
            .transaction()
            .execute(async (trx) => {
              try {
                expect(await byId.executeTakeFirst(trx, { id: 1 })).toMatchObject({ id: 1, name: 'one' });
              } finally {
                // Also when it failed, so the others do not wait for it.
                if (++arrived === count) allIn();
              }
              await together;
              const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx);
              return (rows[0] as { pid: number }).pid;
            }),
        ),
      );
    };

    it('answers outside a transaction, and retires every connection prepared before it', async () => {
      await createProbe();
      const store = await open(2);
      const before = await onConnections(store, 2);
      expect(new Set(before).size).toBe(2);
      await admin(database.url, "alter table probe add column extra text not null default 'x'");
      expect(await byId.executeTakeFirst(probeDb(store), { id: 1 })).toEqual({
        id: 1,
        name: 'one',
        extra: 'x',
      });
      const after = await onConnections(store, 2);
      expect(after.filter((pid) => before.includes(pid))).toEqual([]);
      expect(await byId.executeTakeFirst(probeDb(store), { id: 1 })).toEqual({
        id: 1,
        name: 'one',
        extra: 'x',
      });
    });

    it('fails the transaction it meets, and the next query prepares afresh', async () => {
      await createProbe();
      const store = await open(1);
      expect(await byId.executeTakeFirst(probeDb(store), { id: 1 })).toEqual({ id: 1, name: 'one' });
      const first = await backendPid(store.db);
      await admin(database.url, "alter table probe add column extra text not null default 'x'");
      await expect(
        probeDb(store)
          .transaction()
          .execute((trx) => byId.executeTakeFirst(trx, { id: 1 })),
      ).rejects.toMatchObject({ code: '0A000' });
      expect(await byId.executeTakeFirst(probeDb(store), { id: 1 })).toEqual({
        id: 1,
        name: 'one',
        extra: 'x',
      });
      expect(await backendPid(store.db)).not.toBe(first);
      expect((await preparedStatements(store.db)).map((s) => s.runs)).toEqual([1]);
    });
  });

  describe('a transaction on a pipelined connection (round trips)', () => {
    type Probe = { probe: { id: number; name: string } };
    const insertProbe = compiledOnce<Probe, { id: number; name: string }, never>((db, p) =>
      db.insertInto('probe').values({ id: p.id, name: p.name }),
    );
    const probeDb = (store: Store) => store.db as unknown as Kysely<Probe>;
    const trips = (store: Store) => store.roundTripStats()?.roundTrips ?? Number.NaN;
    const names = async (store: Store) =>
      (await probeDb(store).selectFrom('probe').select('name').orderBy('id').execute()).map((r) => r.name);

    it('sends BEGIN with the first statement, and nothing for a transaction without one', async () => {
      await admin(
        database.url,
        "create table probe (id int primary key, name text); insert into probe values (1, 'one')",
      );
      const store = await open(1);
      await names(store); // the connection is open
      const before = trips(store);
      await probeDb(store)
        .transaction()
        .execute(async () => {});
      expect(trips(store)).toBe(before);
      // BEGIN with the insert (1), the COMMIT (1).
      await probeDb(store)
        .transaction()
        .execute((trx) => insertProbe.run(trx, { id: 2, name: 'two' }));
      expect(trips(store)).toBe(before + 2);
      expect(await names(store)).toEqual(['one', 'two']);
    });

    it('writes behind: several writes and the COMMIT in one round trip, all or nothing', async () => {
      await admin(
        database.url,
        "create table probe (id int primary key, name text); insert into probe values (1, 'one')",
      );
      const store = await open(1);
      await names(store);
      const before = trips(store);
      await probeDb(store)
        .transaction()
        .execute(async (trx) => {
          await insertProbe.write(trx, { id: 2, name: 'two' });
          await insertProbe.write(trx, { id: 3, name: 'three' });
        });
      expect(trips(store)).toBe(before + 1);
      expect(await names(store)).toEqual(['one', 'two', 'three']);

      // A write behind that fails fails the COMMIT, and none of the transaction's writes stay.
      await expect(
        probeDb(store)
          .transaction()
          .execute(async (trx) => {
            await insertProbe.write(trx, { id: 4, name: 'four' });
            await insertProbe.write(trx, { id: 1, name: 'one again' });
          }),
      ).rejects.toMatchObject({ code: '23505' });
      // …or the next statement waited for, with its own cause (not "transaction is aborted").
      await expect(
        probeDb(store)
          .transaction()
          .execute(async (trx) => {
            await insertProbe.write(trx, { id: 5, name: 'five' });
            await insertProbe.write(trx, { id: 2, name: 'two again' });
            await names({ ...store, db: trx as unknown as Store['db'] });
          }),
      ).rejects.toMatchObject({ code: '23505' });
      expect(await names(store)).toEqual(['one', 'two', 'three']);
      // Outside a transaction a write is waited for, as any statement.
      await expect(insertProbe.write(probeDb(store), { id: 1, name: 'x' })).rejects.toMatchObject({
        code: '23505',
      });
    });
  });
});
