import type { Kysely } from 'kysely';
import { usageDelta } from '../../quotas/usage.js';

// Migrations take Kysely<any>: they describe the schema as it was at their time, not as it is now.
// biome-ignore lint/suspicious/noExplicitAny: see above
type AnyDb = Kysely<any>;

/**
 * What one instance of each type counted toward the vcpus and gpus quotas when this migration was
 * written: the catalogue's types as they were then (resources/catalog/catalog.ts), kept here as a
 * migration keeps its schema, so that it fills the counters the same way whatever the catalogue becomes.
 */
const TYPE_USAGE: Readonly<Record<string, readonly [vcpus: number, gpus: number]>> = {
  'compute-1x': [1, 0],
  'compute-2x': [2, 0],
  'compute-4x': [4, 0],
  'compute-8x': [8, 0],
  'compute-16x': [16, 0],
  'compute-32x': [32, 0],
  'memory-2x': [2, 0],
  'memory-4x': [4, 0],
  'memory-8x': [8, 0],
  'memory-16x': [16, 0],
  'memory-32x': [32, 0],
  'storage-2x': [2, 0],
  'storage-4x': [4, 0],
  'storage-8x': [8, 0],
  'storage-16x': [16, 0],
  'gpu-1x': [8, 1],
  'gpu-2x': [16, 2],
  'gpu-4x': [32, 4],
  'gpu-h100-1x': [8, 1],
  'gpu-h100-2x': [16, 2],
};

function instanceUsage(instanceType: string): Record<string, number> {
  const usage = TYPE_USAGE[instanceType];
  if (!usage) throw new Error(`unknown instance type ${instanceType}`);
  return usageDelta(null, { instances: 1, vcpus: usage[0], gpus: usage[1] });
}

/**
 * The write path at fleet scale (issue 18): what creates read stops growing with what exists.
 *
 * - `account_usage`: per-account counters of the quotas that were sums over every row (instances, vCPUs,
 *   GPUs, data volumes and their GB, snapshots), kept by the store in the transaction of each write.
 *   Filled here from the rows as they are; `admin recount` repairs them from a full count.
 * - `address_pools` + `free_addresses`: an address scope (a region's public pool, an account's private
 *   network in a region) hands out addresses below `next_ip` from `free_addresses` (lowest first), and
 *   the next one at `next_ip` when none is free, so allocation is an index probe, never a read of every
 *   address in use. Scopes are set up from the rows in use on their first allocation (the configured
 *   pool is known then, not here).
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('account_usage')
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('used', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('account_usage_pk', ['account_id', 'name'])
    .execute();
  await db.schema
    .createTable('address_pools')
    .addColumn('scope', 'text', (c) => c.primaryKey())
    .addColumn('cidr', 'text', (c) => c.notNull())
    .addColumn('next_ip', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createTable('free_addresses')
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('ip', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('free_addresses_pk', ['scope', 'ip'])
    .execute();

  const totals = new Map<string, Map<string, number>>();
  const add = (accountId: string, usage: Record<string, number>) => {
    const account = totals.get(accountId) ?? new Map<string, number>();
    for (const [name, n] of Object.entries(usage)) account.set(name, (account.get(name) ?? 0) + n);
    totals.set(accountId, account);
  };
  const instanceTypes = await db
    .selectFrom('instances')
    .select(['account_id', 'instance_type', (eb) => eb.fn.countAll().as('count')])
    .groupBy(['account_id', 'instance_type'])
    .execute();
  for (const row of instanceTypes) {
    add(row.account_id, scaled(instanceUsage(row.instance_type), Number(row.count)));
  }
  const volumes = await db
    .selectFrom('volumes')
    .select([
      'account_id',
      'kind',
      (eb) => eb.fn.countAll().as('count'),
      (eb) => eb.fn.sum('size_gb').as('gb'),
    ])
    .groupBy(['account_id', 'kind'])
    .execute();
  for (const row of volumes) {
    // Data volumes count (root volumes belong to their instance), each with its size.
    if (row.kind === 'data') {
      add(row.account_id, { volumes: Number(row.count), volume_storage_gb: Number(row.gb ?? 0) });
    }
  }
  const snapshots = await db
    .selectFrom('snapshots')
    .select(['account_id', (eb) => eb.fn.countAll().as('count')])
    .groupBy('account_id')
    .execute();
  for (const row of snapshots) add(row.account_id, { snapshots: Number(row.count) });

  const rows = [...totals].flatMap(([accountId, usage]) =>
    [...usage].map(([name, used]) => ({ account_id: accountId, name, used })),
  );
  for (let i = 0; i < rows.length; i += 500) {
    await db
      .insertInto('account_usage')
      .values(rows.slice(i, i + 500))
      .execute();
  }
}

function scaled(usage: Record<string, number>, count: number): Record<string, number> {
  return Object.fromEntries(Object.entries(usage).map(([name, n]) => [name, n * count]));
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('free_addresses').execute();
  await db.schema.dropTable('address_pools').execute();
  await db.schema.dropTable('account_usage').execute();
}
