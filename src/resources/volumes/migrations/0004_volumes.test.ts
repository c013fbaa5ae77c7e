/**
 * Migration 0004 on both engines' shared history, over a real SQLite store: a root volume written as 0002
 * wrote it is, after 0004, a valid record (version 1, no tags, attached as /dev/vda since its instance was
 * made) that the volume store reads and writes like any other; and 0004 rolls back.
 */
import type { Kysely } from 'kysely';
import { beforeEach, describe, expect, it } from 'vitest';
import { storePerCase } from '../../../../test/helpers/backends.js';
import { migrateTo, migrateToLatest, type Store } from '../../../platform/store/db.js';
import { MIGRATIONS } from '../../../resources.js';
import { findVolume, updateVolume } from '../store.js';

describe('migration 0004_volumes', () => {
  const freshStore = storePerCase('sqlite', 'nimbus-0004-');
  let store: Store;
  // The schema as it was before 0004, not as platform/store/schema.ts has it.
  let db: Kysely<any>;

  beforeEach(() => {
    store = freshStore();
    db = store.db;
  });

  it('keeps the root volumes 0002 made valid, and rolls back', async () => {
    await migrateTo(store.db, MIGRATIONS, '0003_webhooks');
    const at = '2026-01-02T03:04:05.000Z';
    await db
      .insertInto('accounts')
      .values({
        id: 'acct_1',
        name: 'a',
        email: 'a@example.com',
        plan: 'free',
        status: 'active',
        created_at: at,
        updated_at: at,
      })
      .execute();
    await db
      .insertInto('volumes')
      .values({
        id: 'vol_root',
        account_id: 'acct_1',
        name: 'web-1-root',
        region: 'us-east-1',
        size_gb: 25,
        status: 'in-use',
        kind: 'root',
        instance_id: 'ins_1',
        created_at: at,
        updated_at: at,
      })
      .execute();

    // As the server runs them: a later migration rebuilds a table and needs foreign keys off.
    await migrateToLatest(store.db, MIGRATIONS);
    const root = await findVolume(store.db, 'vol_root');
    expect(root).toMatchObject({
      kind: 'root',
      status: 'in-use',
      instance_id: 'ins_1',
      device_name: '/dev/vda',
      attached_at: at,
      filesystem: null,
      tags: {},
      pending_action: null,
      version: 1,
    });
    const renamed = await updateVolume(store.db, root!, { name: 'os', tags: { a: 'b' } });
    expect(renamed).toMatchObject({ name: 'os', tags: { a: 'b' }, version: 2 });

    await migrateTo(store.db, MIGRATIONS, '0003_webhooks');
    const row = await db.selectFrom('volumes').selectAll().where('id', '=', 'vol_root').executeTakeFirst();
    expect(Object.keys(row ?? {}).sort()).toEqual(
      [
        'account_id',
        'created_at',
        'id',
        'instance_id',
        'kind',
        'name',
        'region',
        'size_gb',
        'status',
        'updated_at',
      ].sort(),
    );
  });
});
