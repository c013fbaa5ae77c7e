/**
 * Migration 0021 on both stores, on instances written before it: every instance's address becomes a
 * public IP assigned to it with `auto_delete`, `instances.public_ip` takes null afterwards (an instance
 * made with `public_ip: false`), and on SQLite, where the instances table is rebuilt for that, its rows,
 * indexes, unique constraints and what references it (tags) survive.
 */
import { type Kysely, sql } from 'kysely';
import { beforeEach, describe, expect, it } from 'vitest';
import { STORES, storePerCase } from '../../../../test/helpers/backends.js';
import { migrateTo, migrateToLatest, type Store } from '../../../platform/store/db.js';
import { MIGRATIONS } from '../../../resources.js';

const at = '2026-01-02T03:04:05.000Z';
const instance = (id: string, publicIp: string | null, privateIp: string) => ({
  id,
  account_id: 'acct_a',
  name: `vm-${id}`,
  status: 'running',
  operation: null,
  operation_at: null,
  instance_type: 'compute-1x',
  region: 'us-east-1',
  image: 'ubuntu-24.04',
  ssh_key_ids: '[]',
  public_ip: publicIp,
  private_ip: privateIp,
  tags: '{}',
  user_data: null,
  encryption_key_id: null,
  firewall_preset: 'ssh-only',
  monitoring: 1,
  backup_schedule: null,
  root_volume_id: `vol_${id}`,
  version: 1,
  created_at: at,
  updated_at: at,
});

describe.each(STORES)('migration 0021_public_ips (%s)', (kind) => {
  const freshStore = storePerCase(kind, 'nimbus-0021-');
  let store: Store;
  // The schema as it was before 0021, not as platform/store/schema.ts has it.
  let db: Kysely<any>;

  beforeEach(async () => {
    store = freshStore();
    db = store.db;
    expect(await migrateTo(store.db, MIGRATIONS, '0019_instances_region_name')).toContain(
      '0019_instances_region_name',
    );
    await db
      .insertInto('accounts')
      .values({
        id: 'acct_a',
        name: 'a',
        email: 'a@example.com',
        plan: 'free',
        status: 'active',
        created_at: at,
        updated_at: at,
      })
      .execute();
    await db
      .insertInto('instances')
      .values([instance('ins_1', '203.0.113.2', '10.10.0.2'), instance('ins_2', '203.0.113.3', '10.10.0.3')])
      .execute();
    await db
      .insertInto('instance_tags')
      .values({ instance_id: 'ins_1', account_id: 'acct_a', key: 'env', value: 'prod' })
      .execute();
  });

  it('makes every instance address a public IP and lets an instance have none', async () => {
    expect(await migrateToLatest(store.db, MIGRATIONS)).toContain('0021_public_ips');

    const rows = await db.selectFrom('public_ips').selectAll().orderBy('address').execute();
    expect(rows.map((r) => [r.address, r.instance_id, Number(r.auto_delete), r.region, r.name])).toEqual([
      ['203.0.113.2', 'ins_1', 1, 'us-east-1', 'vm-ins_1-ip'],
      ['203.0.113.3', 'ins_2', 1, 'us-east-1', 'vm-ins_2-ip'],
    ]);
    for (const row of rows) expect(row.id).toMatch(/^ip_/);

    const kept = await db.selectFrom('instances').select(['id', 'public_ip']).orderBy('id').execute();
    expect(kept).toEqual([
      { id: 'ins_1', public_ip: '203.0.113.2' },
      { id: 'ins_2', public_ip: '203.0.113.3' },
    ]);
    expect(await db.selectFrom('instance_tags').selectAll().execute()).toHaveLength(1);

    // An instance without a public address, and more than one of them.
    await db
      .insertInto('instances')
      .values([instance('ins_3', null, '10.10.0.4'), instance('ins_4', null, '10.10.0.5')])
      .execute();
    // The constraints came through the rebuild.
    await expect(
      db
        .insertInto('instances')
        .values(instance('ins_5', '203.0.113.2', '10.10.0.6'))
        .execute(),
    ).rejects.toThrow();
    await expect(
      db
        .insertInto('instances')
        .values(instance('ins_6', null, '10.10.0.2'))
        .execute(),
    ).rejects.toThrow();
    if (kind === 'sqlite') {
      const indexes = await sql<{
        name: string;
      }>`select name from sqlite_master where type = 'index' and tbl_name = 'instances' and sql is not null`.execute(
        db,
      );
      expect(indexes.rows.map((r) => r.name).sort()).toEqual([
        'instances_account_created',
        'instances_account_name',
        'instances_account_status',
        'instances_account_type',
        'instances_monitored',
        'instances_region_name',
      ]);
      const check = await sql`pragma foreign_key_check`.execute(db);
      expect(check.rows).toEqual([]);
    }
  });
});
