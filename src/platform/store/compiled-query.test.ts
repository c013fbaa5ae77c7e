/** Queries compiled once: built once per engine, each call's values in their places, per shape when asked. */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../resources.js';
import { columnsShape, compiledOnce, compiledPerShape } from './compiled-query.js';
import { migrateToLatest, openStore, type Store } from './db.js';
import type { Database } from './schema.js';

describe('compiledOnce (SQLite)', () => {
  let dataDir = '';
  let store: Store;

  beforeEach(async () => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-compiled-'));
    store = openStore({ dataDir });
    await migrateToLatest(store.db, MIGRATIONS);
  });

  afterEach(async () => {
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const job = (id: string, runAt: string) => ({
    id,
    key: `test:${id}`,
    kind: 'test',
    subject_id: id,
    run_at: runAt,
    attempts: 0,
    version: 1,
    lease_owner: null,
    lease_until: null,
    last_error: null,
    created_at: runAt,
  });

  it('builds once, puts each call’s values where they go, and reads like the query built per call', async () => {
    let builds = 0;
    const due = compiledOnce<Database, { now: string; kind: string; limit: number }, { id: string }>(
      (db, p) => {
        builds++;
        return db
          .selectFrom('jobs')
          .select('id')
          .where('kind', '=', p.kind)
          .where('run_at', '<=', p.now)
          .where('attempts', '=', 0) // a value the query fixes, between the slots
          .orderBy('run_at')
          .limit(p.limit);
      },
    );
    await store.db
      .insertInto('jobs')
      .values([
        job('a', '2026-01-01T00:00:00Z'),
        job('b', '2026-01-02T00:00:00Z'),
        job('c', '2026-01-03T00:00:00Z'),
      ])
      .execute();
    const ids = async (now: string, limit: number) =>
      (await due.execute(store.db, { now, kind: 'test', limit })).map((row) => row.id);
    expect(await ids('2026-01-02T12:00:00Z', 10)).toEqual(['a', 'b']);
    expect(await ids('2026-01-09T00:00:00Z', 2)).toEqual(['a', 'b']);
    expect(await ids('2026-01-09T00:00:00Z', 10)).toEqual(['a', 'b', 'c']);
    expect(await due.execute(store.db, { now: '2026-01-09T00:00:00Z', kind: 'other', limit: 10 })).toEqual(
      [],
    );
    // Inside a transaction too, on the same compiled SQL.
    expect(
      await store.db
        .transaction()
        .execute((trx) => due.executeTakeFirst(trx, { now: '2026-01-09', kind: 'test', limit: 1 })),
    ).toEqual({ id: 'a' });
    expect(builds).toBe(1);
  });

  it('compiles one query per shape, and reports the rows it changed', async () => {
    await store.db
      .insertInto('jobs')
      .values([job('a', '2026-01-01T00:00:00Z')])
      .execute();
    const shapes: string[] = [];
    const update = compiledPerShape<Database, Record<string, unknown>, never>((shape) => {
      shapes.push(shape);
      return (db, p) =>
        db
          .updateTable('jobs')
          .set(Object.fromEntries(shape.split(',').map((column) => [column, p[column]])))
          .where('id', '=', p.guard_id as string);
    });
    const set = (changes: Record<string, unknown>, id = 'a') =>
      update(columnsShape(changes)).run(store.db, { ...changes, guard_id: id });
    expect((await set({ attempts: 3, last_error: 'x', lease_owner: undefined })).numAffectedRows).toBe(1n);
    expect((await set({ attempts: 4, last_error: null })).numAffectedRows).toBe(1n);
    expect((await set({ run_at: '2026-02-01T00:00:00Z' })).numAffectedRows).toBe(1n);
    expect((await set({ run_at: '2026-02-01T00:00:00Z' }, 'missing')).numAffectedRows).toBe(0n);
    expect(shapes).toEqual(['attempts,last_error', 'run_at']);
    const row = await store.db.selectFrom('jobs').selectAll().where('id', '=', 'a').executeTakeFirstOrThrow();
    expect(row).toMatchObject({
      attempts: 4,
      last_error: null,
      run_at: '2026-02-01T00:00:00Z',
      lease_owner: null,
    });
  });
});
