import type { Kysely } from 'kysely';
import { instanceUsage, usageDelta, volumeUsage } from '../../quotas/usage.js';

// Migrations take Kysely<any>: they describe the schema as it was at their time, not as it is now.
// biome-ignore lint/suspicious/noExplicitAny: see above
type AnyDb = Kysely<any>;

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
    add(row.account_id, scaled(usageDelta(null, instanceUsage(row)), Number(row.count)));
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
    // All the volumes of one kind together, as if they were one volume of their total size.
    const usage = volumeUsage({ kind: row.kind, size_gb: Number(row.gb ?? 0) });
    add(row.account_id, usage.volumes ? { ...usage, volumes: Number(row.count) } : {});
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
