/**
 * Migration 0018 on both stores, on data written before it: afterwards two accounts may share an e-mail
 * address, and nothing that referenced an account was lost — on SQLite the accounts table is rebuilt,
 * and dropping the old one with foreign keys on would have deleted its keys and quotas (ON DELETE
 * CASCADE). Run as the server runs it (migrateToLatest); a bare migrator with foreign keys on is refused.
 */
import { type Kysely, Migrator } from 'kysely';
import { beforeEach, describe, expect, it } from 'vitest';
import { STORES, storePerCase } from '../../../../test/helpers/backends.js';
import { migrateToLatest, type Store } from '../../../platform/store/db.js';
import { MIGRATIONS } from '../../../resources.js';

const at = '2026-01-02T03:04:05.000Z';
const account = (id: string, email: string) => ({
  id,
  name: id,
  email,
  plan: 'free',
  status: 'active',
  created_at: at,
  updated_at: at,
});

describe.each(STORES)('migration 0018_account_email_not_unique (%s)', (kind) => {
  const freshStore = storePerCase(kind, 'nimbus-0018-');
  let store: Store;
  // The schema as it was before 0018, not as platform/store/schema.ts has it.
  let db: Kysely<any>;
  let migrator: Migrator;

  beforeEach(async () => {
    store = freshStore();
    db = store.db;
    migrator = new Migrator({ db, provider: MIGRATIONS });
    expect((await migrator.migrateTo('0015_instances_monitored')).error).toBeUndefined();
    await db.insertInto('accounts').values(account('acct_a', 'shared@example.com')).execute();
    await db
      .insertInto('api_keys')
      .values({
        id: 'key_a',
        account_id: 'acct_a',
        name: 'admin',
        prefix: 'nmb_abcd',
        key_hash: 'hash-a',
        permissions: '["*"]',
        created_at: at,
      })
      .execute();
    await db
      .insertInto('account_quotas')
      .values({ account_id: 'acct_a', name: 'volumes', limit: 7 })
      .execute();
  });

  it('lets two accounts share an address and keeps what referenced the accounts', async () => {
    await expect(
      db.insertInto('accounts').values(account('acct_b', 'shared@example.com')).execute(),
    ).rejects.toThrow();
    expect(await migrateToLatest(store.db, MIGRATIONS)).toContain('0018_account_email_not_unique');

    await db.insertInto('accounts').values(account('acct_b', 'shared@example.com')).execute();
    const sharing = await db
      .selectFrom('accounts')
      .select('id')
      .where('email', '=', 'shared@example.com')
      .execute();
    expect(sharing.map((row) => row.id).sort()).toEqual(['acct_a', 'acct_b']);
    expect(await db.selectFrom('api_keys').select('id').execute()).toEqual([{ id: 'key_a' }]);
    expect(await db.selectFrom('account_quotas').selectAll().execute()).toEqual([
      { account_id: 'acct_a', name: 'volumes', limit: 7 },
    ]);
    // The references still hold, and still cascade: an account's keys go with it.
    await expect(
      db
        .insertInto('api_keys')
        .values({
          id: 'key_x',
          account_id: 'acct_nobody',
          name: 'x',
          prefix: 'nmb_x',
          key_hash: 'hash-x',
          permissions: '[]',
          created_at: at,
        })
        .execute(),
    ).rejects.toThrow();
    await db.deleteFrom('accounts').where('id', '=', 'acct_a').execute();
    expect(await db.selectFrom('api_keys').select('id').execute()).toEqual([]);
  });

  it('with a bare migrator: SQLite refuses to rebuild the table with foreign keys on, PostgreSQL needs no rebuild', async () => {
    const { error } = await migrator.migrateToLatest();
    if (kind === 'sqlite') expect(String(error)).toMatch(/foreign keys off/);
    else expect(error).toBeUndefined();
    expect(await db.selectFrom('api_keys').select('id').execute()).toEqual([{ id: 'key_a' }]);
  });
});
