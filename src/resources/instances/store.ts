/**
 * Instances and what hangs off them: tags (mirrored into instance_tags for filtering), the maintained
 * per-account counts that lists use for total_items (`STATUS_COUNTS`), and the addresses they hold
 * (resources/addresses/address-store.ts). Every write goes through `insertInstance`, `updateInstance`
 * (guarded on the version the caller read) or `deleteInstance`, which give the addresses back in the
 * caller's transaction; they are called by the lifecycle core, which moves the counts and the account's
 * quota usage with each (resources/instances/kind.ts declares them).
 *
 * Callers see `Instance` records (resources/instances/record.ts), whose fields are the columns
 * (platform/store/record-table.ts); the JSON text and 0/1 integers the columns hold stay in this module.
 */
import { type ExpressionBuilder, sql } from 'kysely';
import type { Page, PageRequest } from '../../platform/domain/pagination.js';
import type { KindCounts } from '../../platform/lifecycle/lifecycle.js';
import { compiledPerShape } from '../../platform/store/compiled-query.js';
import { fetchPage } from '../../platform/store/lists.js';
import {
  booleanInteger,
  jsonText,
  nullableJsonText,
  type RowFor,
  recordTable,
} from '../../platform/store/record-table.js';
import type { Database, Executor } from '../../platform/store/schema.js';
import { type AddressScope, privateScopeKey, returnAddress } from '../addresses/address-store.js';
import type { Cidr } from '../addresses/addresses.js';
import type { BackupSchedule } from '../volumes/backup-schedule.js';
import { type Instance, type InstanceChanges, InstanceRecord } from './record.js';

export type { InstanceChanges } from './record.js';

/** Lists, tags, schedules and protection are kept as JSON text and monitoring as 0/1; every other field is its own column. */
const codecs = {
  ssh_key_ids: jsonText<string[]>(),
  tags: jsonText<Instance['tags']>(),
  monitoring: booleanInteger,
  backup_schedule: nullableJsonText<BackupSchedule>(),
  protection: jsonText<Instance['protection']>(),
};

/** The instances table: the record's fields as columns (tags are also mirrored into instance_tags). */
export type InstancesTable = RowFor<Instance, typeof codecs>;
declare module '../../platform/store/schema.js' {
  interface Database {
    instances: InstancesTable;
  }
}

const table = recordTable({ table: 'instances', record: InstanceRecord, codecs });

export type InstanceSort = 'created_at' | 'name' | 'status' | 'instance_type';

export interface InstanceFilters {
  status?: string | undefined;
  region?: string | undefined;
  name?: string | undefined;
  /** Every [key, value] pair must be a tag of the instance. */
  tags?: readonly (readonly [string, string])[] | undefined;
}

/** The upsert of `adjustCounts`, per number of statuses it moves (one on insert and delete, two on a change). */
const countsUpsert = compiledPerShape<Database, Record<string, string | number>, never>(
  (shape) => (db, p) =>
    db
      .insertInto('instance_counts')
      .values(
        Array.from({ length: Number(shape) }, (_, i) => ({
          account_id: p.accountId as string,
          region: p.region as string,
          status: p[`status${i}`] as string,
          count: p[`delta${i}`] as number,
        })),
      )
      .onConflict((oc) =>
        oc.columns(['account_id', 'region', 'status']).doUpdateSet({
          count: sql<number>`instance_counts.count + excluded.count`,
        }),
      ),
);

async function writeCounts(
  db: Executor,
  accountId: string,
  region: string,
  deltas: readonly (readonly [status: string, delta: number])[],
) {
  const values: Record<string, string | number> = { accountId, region };
  deltas.forEach(([status, delta], i) => {
    values[`status${i}`] = status;
    values[`delta${i}`] = delta;
  });
  await countsUpsert(String(deltas.length)).write(db, values);
}

/**
 * The per-status counts (instance_counts) as the lifecycle core keeps them for the instance kind: each
 * write moves them in its context (platform/lifecycle/write-context.ts), summed per account, region and
 * status, and they are written as the transaction's last statement. On PostgreSQL an account's
 * instance_counts rows are written by every create, boot and action of the account in the region, and
 * whoever writes one holds it until COMMIT; written last, a row is held for that statement and the commit
 * instead of for the meter, event and job statements of a boot's settle as well (docs/benchmarks.md,
 * issue 18). Lists read the counts committed, so nothing in between misses them.
 */
export const STATUS_COUNTS: KindCounts<Instance> = {
  keyOf: (instance) => JSON.stringify([instance.account_id, instance.region, instance.status]),
  /**
   * One statement per account and region, statuses in key order (two transactions moving the same rows
   * take them in the same order, so neither waits on the other in a cycle).
   */
  async write(trx, changes) {
    const byPlace = new Map<string, [status: string, delta: number][]>();
    for (const [key, delta] of changes) {
      const [accountId, region, status] = JSON.parse(key) as [string, string, string];
      const place = JSON.stringify([accountId, region]);
      byPlace.set(place, [...(byPlace.get(place) ?? []), [status, delta]]);
    }
    for (const place of [...byPlace.keys()].sort()) {
      const [accountId, region] = JSON.parse(place) as [string, string];
      const deltas = (byPlace.get(place) ?? []).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      await writeCounts(trx, accountId, region, deltas);
    }
  },
};

async function writeTags(
  db: Executor,
  row: Pick<Instance, 'id' | 'account_id'>,
  tags: Record<string, string>,
) {
  await db.deleteFrom('instance_tags').where('instance_id', '=', row.id).execute();
  const entries = Object.entries(tags);
  if (entries.length === 0) return;
  await db
    .insertInto('instance_tags')
    .values(entries.map(([key, value]) => ({ instance_id: row.id, account_id: row.account_id, key, value })))
    .execute();
}

export async function insertInstance(db: Executor, instance: Instance): Promise<void> {
  await table.insert(db, instance);
  // A new instance has no tag rows to replace: insert only.
  const tags = Object.entries(instance.tags);
  if (tags.length > 0) {
    await db
      .insertInto('instance_tags')
      .values(
        tags.map(([key, value]) => ({
          instance_id: instance.id,
          account_id: instance.account_id,
          key,
          value,
        })),
      )
      .execute();
  }
}

export const findInstance = table.find;
export const findAccountInstance = table.findOwned;
/**
 * Reads the instance and holds it until the transaction ends, so a request decides on the status it
 * will write over: concurrent requests on one instance take turns and each sees the one before.
 */
export const lockAccountInstance = table.lock;

/**
 * Applies `changes` if the instance is still at the version `current` was read at; returns the new row,
 * or undefined when another writer got there first (the caller reports a conflict or re-reads).
 */
export async function updateInstance(
  db: Executor,
  current: Instance,
  changes: InstanceChanges,
): Promise<Instance | undefined> {
  const updated = await table.update(db, current, changes);
  if (updated && changes.tags !== undefined) await writeTags(db, updated, changes.tags);
  return updated;
}

/** Deletes the row (its tags go with it) if it is still at the version read; false otherwise. */
export async function deleteInstance(db: Executor, current: Instance): Promise<boolean> {
  await db.deleteFrom('instance_tags').where('instance_id', '=', current.id).execute();
  if (!(await table.delete(db, current))) return false;
  // Its public address is a public IP's, released or kept by resources/public-ips/with-instance.ts.
  await returnAddress(db, privateScopeKey(current.account_id, current.region), current.private_ip);
  return true;
}

function filtered(db: Executor, accountId: string, filters: InstanceFilters) {
  let query = db.selectFrom('instances').selectAll().where('account_id', '=', accountId);
  if (filters.status !== undefined) query = query.where('status', '=', filters.status);
  if (filters.region !== undefined) query = query.where('region', '=', filters.region);
  if (filters.name !== undefined) query = query.where('name', '=', filters.name);
  for (const [key, value] of filters.tags ?? []) {
    query = query.where('id', 'in', (eb: ExpressionBuilder<Database, 'instances'>) =>
      eb
        .selectFrom('instance_tags')
        .select('instance_tags.instance_id')
        .where('instance_tags.account_id', '=', accountId)
        .where('instance_tags.key', '=', key)
        .where('instance_tags.value', '=', value),
    );
  }
  return query;
}

/** The maintained count, when the filters are ones it is kept by (status, region); else null. */
async function countedTotal(
  db: Executor,
  accountId: string,
  filters: InstanceFilters,
): Promise<number | null> {
  if (filters.name !== undefined || (filters.tags?.length ?? 0) > 0) return null;
  let query = db
    .selectFrom('instance_counts')
    .select((eb) => eb.fn.coalesce(eb.fn.sum<number>('count'), sql<number>`0`).as('total'))
    .where('account_id', '=', accountId);
  if (filters.status !== undefined) query = query.where('status', '=', filters.status);
  if (filters.region !== undefined) query = query.where('region', '=', filters.region);
  const row = await query.executeTakeFirst();
  return Number(row?.total ?? 0);
}

export async function listInstances(
  db: Executor,
  accountId: string,
  filters: InstanceFilters,
  request: PageRequest<InstanceSort>,
): Promise<Page<Instance>> {
  const total = await countedTotal(db, accountId, filters);
  const page = await fetchPage(filtered(db, accountId, filters), request, {
    ...(total === null ? {} : { total }),
    load: (ids) =>
      ids.length === 0
        ? Promise.resolve([])
        : db.selectFrom('instances').selectAll().where('id', 'in', ids).execute(),
  });
  return { items: page.items.map(table.decode), pagination: page.pagination };
}

/** Instances of the account (every status); the instances quota counts these. */
export async function countAccountInstances(db: Executor, accountId: string): Promise<number> {
  return (await countedTotal(db, accountId, {})) ?? 0;
}

/** How many instances of each type the account has: a full count, for `admin recount`. */
export async function countByType(db: Executor, accountId: string): Promise<Map<string, number>> {
  const rows = await db
    .selectFrom('instances')
    .select(['instance_type', (eb) => eb.fn.countAll<number>().as('count')])
    .where('account_id', '=', accountId)
    .groupBy('instance_type')
    .execute();
  return new Map(rows.map((row) => [row.instance_type, Number(row.count)]));
}

/** The account's private network in a region, as an address scope of its instances' addresses. */
export function privateAddressScope(accountId: string, region: string, block: Cidr): AddressScope {
  return {
    key: privateScopeKey(accountId, region),
    block,
    inUse: async (db) =>
      (
        await db
          .selectFrom('instances')
          .select('private_ip')
          .where('account_id', '=', accountId)
          .where('region', '=', region)
          .execute()
      ).map((row) => row.private_ip),
  };
}

/** Takes `gpus` from the region's capacity; false when that would pass `capacity`. */
export async function reserveGpus(
  db: Executor,
  region: string,
  gpus: number,
  capacity: number,
): Promise<boolean> {
  await db
    .insertInto('region_gpu_usage')
    .values({ region, gpus: 0 })
    .onConflict((oc) => oc.column('region').doNothing())
    .execute();
  const result = await db
    .updateTable('region_gpu_usage')
    .set({ gpus: sql<number>`gpus + ${gpus}` })
    .where('region', '=', region)
    .where(sql<boolean>`gpus + ${gpus} <= ${capacity}`)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

export async function releaseGpus(db: Executor, region: string, gpus: number): Promise<void> {
  await db
    .updateTable('region_gpu_usage')
    .set({ gpus: sql<number>`gpus - ${gpus}` })
    .where('region', '=', region)
    .execute();
}

/**
 * The instance's current public address (resources/public-ips: assign, unassign), in that change's
 * transaction, under the instance's lock. Not a versioned write: it changes no field a request or the
 * reconciler decides on, so it does not make their guarded writes fail.
 */
export async function setInstancePublicIp(
  db: Executor,
  instanceId: string,
  address: string | null,
): Promise<void> {
  await db.updateTable('instances').set({ public_ip: address }).where('id', '=', instanceId).execute();
}

/** What the network reads of an instance (drivers/ovn/vpcs.ts `VpcInstance`): placement, addresses, firewall inputs. */
const NETWORK_COLUMNS = [
  'id',
  'account_id',
  'region',
  'name',
  'private_ip',
  'public_ip',
  'tags',
  'firewall_preset',
] as const;

const networkView = <Row extends { tags: string }>(row: Row) => ({
  ...row,
  tags: codecs.tags.decode(row.tags),
});

/** The instances of an account (every region and status), or of every account when null, as the network reads them. */
export async function networkInstances(db: Executor, accountId: string | null) {
  const query = db.selectFrom('instances').select(NETWORK_COLUMNS);
  const rows = await (accountId === null ? query : query.where('account_id', '=', accountId)).execute();
  return rows.map(networkView);
}

/** The account's instance in the region holding `privateIp`, as the network reads it, or null. */
export async function networkInstanceAt(db: Executor, accountId: string, region: string, privateIp: string) {
  const row = await db
    .selectFrom('instances')
    .select(NETWORK_COLUMNS)
    .where('account_id', '=', accountId)
    .where('region', '=', region)
    .where('private_ip', '=', privateIp)
    .executeTakeFirst();
  return row ? networkView(row) : null;
}
