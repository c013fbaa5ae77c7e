/**
 * Group commit (platform/store/group-commit.ts) on a real SQLite file: an independent connection to the same file
 * is the witness of what is committed, since a WAL reader sees a transaction exactly when its COMMIT has
 * returned (with synchronous=FULL, after the fsync).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import { type Kysely, sql } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStore, type Store } from './db.js';

interface Tables {
  items: { id: string; batch: string };
}

describe('group commit on SQLite', () => {
  let dataDir = '';
  let store: Store;
  let db: Kysely<Tables>;
  let witness: SqliteDatabase.Database;

  beforeEach(async () => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-group-commit-'));
    store = openStore({ dataDir });
    db = store.db as unknown as Kysely<Tables>;
    await sql`create table items (id text primary key, batch text not null)`.execute(db);
    witness = new SqliteDatabase(path.join(dataDir, 'nimbus.db'), { readonly: true });
  });

  afterEach(async () => {
    witness.close();
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const committed = (id: string) =>
    witness.prepare('select id from items where id = ?').get(id) !== undefined;
  const insert = (trx: Kysely<Tables>, id: string) =>
    trx.insertInto('items').values({ id, batch: 'x' }).execute();

  it('concurrent transactions share a few commits, and each resolves only once its work is committed', async () => {
    const before = store.commitStats();
    const seenAtResolve: boolean[] = [];
    const seenInside: boolean[] = [];
    await Promise.all(
      Array.from({ length: 100 }, async (_, n) => {
        const id = `t${n}`;
        const count = await db.transaction().execute(async (trx) => {
          await insert(trx, id);
          seenInside.push(committed(id));
          return (
            await trx.selectFrom('items').select(sql<number>`count(*)`.as('n')).executeTakeFirstOrThrow()
          ).n;
        });
        seenAtResolve.push(committed(id));
        // The transactions ran one after another: the n-th saw the n-1 before it, committed or not.
        expect(count).toBeGreaterThanOrEqual(1);
      }),
    );
    expect(seenInside).toEqual(Array(100).fill(false));
    expect(seenAtResolve).toEqual(Array(100).fill(true));
    const after = store.commitStats();
    expect(after?.members).toBe((before?.members ?? 0) + 100);
    // All 100 were asked for in one turn of the event loop, so they share one COMMIT.
    expect((after?.commits ?? 0) - (before?.commits ?? 0)).toBe(1);
    expect(after?.largestBatch).toBe(100);
  });

  it('members of one batch read their own writes and those of earlier members', async () => {
    const first = db.transaction().execute((trx) => insert(trx, 'first'));
    const second = db.transaction().execute(async (trx) => {
      await insert(trx, 'second');
      return (await trx.selectFrom('items').select('id').orderBy('id').execute()).map((r) => r.id);
    });
    await first;
    expect(await second).toEqual(['first', 'second']);
  });

  it('a plain read asked while a batch is open waits for its commit, then sees it; never what was rolled back', async () => {
    let plain: Promise<{ ids: string[]; committedThen: boolean }> | undefined;
    const kept = db.transaction().execute((trx) => insert(trx, 'kept'));
    const failing = db.transaction().execute(async (trx) => {
      await insert(trx, 'doomed');
      // Asked from here but not awaited here (the member would wait for itself).
      plain = db
        .selectFrom('items')
        .select('id')
        .execute()
        .then((rows) => ({ ids: rows.map((r) => r.id), committedThen: committed('kept') }));
      throw new Error('rolled back');
    });
    const [keptOutcome, failedOutcome] = await Promise.allSettled([kept, failing]);
    expect(keptOutcome.status).toBe('fulfilled');
    expect(String((failedOutcome as PromiseRejectedResult).reason)).toMatch(/rolled back/);
    expect(await plain).toEqual({ ids: ['kept'], committedThen: true });
  });

  it('a transaction that only reads, in a batch nobody wrote in, is answered without a commit', async () => {
    await insert(db, 'x');
    const before = store.commitStats();
    const rows = await db.transaction().execute((trx) => trx.selectFrom('items').selectAll().execute());
    expect(rows).toEqual([{ id: 'x', batch: 'x' }]);
    expect(store.commitStats()?.commits).toBe(before?.commits);
  });

  it('a member that throws is rolled back alone: no partial write, its error to its caller, the rest commit', async () => {
    const before = store.commitStats();
    const failure = new Error('the second one fails half-way');
    const outcomes = await Promise.allSettled([
      db.transaction().execute((trx) => insert(trx, 'a')),
      db.transaction().execute(async (trx) => {
        await insert(trx, 'b1');
        await insert(trx, 'b2');
        throw failure;
      }),
      // A unique violation half-way: its first row goes too.
      db.transaction().execute(async (trx) => {
        await insert(trx, 'c1');
        await insert(trx, 'a');
      }),
      db.transaction().execute(async (trx) => {
        await insert(trx, 'd');
        // It does not see what the failed members wrote.
        return (await trx.selectFrom('items').select('id').orderBy('id').execute()).map((r) => r.id);
      }),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'rejected', 'fulfilled']);
    expect((outcomes[1] as PromiseRejectedResult).reason).toBe(failure);
    expect(String((outcomes[2] as PromiseRejectedResult).reason)).toMatch(/UNIQUE/);
    expect((outcomes[3] as PromiseFulfilledResult<string[]>).value).toEqual(['a', 'd']);
    expect(witness.prepare('select id from items order by id').all()).toEqual([{ id: 'a' }, { id: 'd' }]);
    const after = store.commitStats();
    expect((after?.commits ?? 0) - (before?.commits ?? 0)).toBe(1);
    expect((after?.rolledBack ?? 0) - (before?.rolledBack ?? 0)).toBe(2);
  });

  it('plain writes outside a transaction are members too: resolved after their commit, which they share', async () => {
    const before = store.commitStats();
    const seen = await Promise.all(
      Array.from({ length: 20 }, async (_, n) => {
        await insert(db, `p${n}`);
        return committed(`p${n}`);
      }),
    );
    expect(seen).toEqual(Array(20).fill(true));
    expect((store.commitStats()?.commits ?? 0) - (before?.commits ?? 0)).toBe(1);
  });

  it('when SQLite abandons the transaction, every member waiting in it fails: none is answered falsely', async () => {
    const outcomes = await Promise.allSettled([
      db.transaction().execute((trx) => insert(trx, 'kept?')),
      insert(db, 'plain?'),
      db.transaction().execute(async (trx) => {
        await insert(trx, 'rogue');
        // What SQLite does by itself on a full disk or an I/O error: the whole transaction is gone.
        await sql`rollback`.execute(trx);
      }),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(['rejected', 'rejected', 'rejected']);
    expect(String((outcomes[0] as PromiseRejectedResult).reason)).toMatch(/not committed/);
    expect(witness.prepare('select count(*) as n from items').get()).toEqual({ n: 0 });
    // The next batch starts afresh.
    await db.transaction().execute((trx) => insert(trx, 'after'));
    expect(committed('after')).toBe(true);
  });

  it('closing the store commits the batch that is open', async () => {
    let ran = () => {};
    const inside = new Promise<void>((resolve) => {
      ran = resolve;
    });
    const pending = db.transaction().execute(async (trx) => {
      await insert(trx, 'last');
      ran();
    });
    await inside;
    await store.close();
    await pending;
    expect(committed('last')).toBe(true);
    store = openStore({ dataDir });
  });
});
