/**
 * Volumes: data volumes and the root volumes of instances, with their tags (mirrored into volume_tags
 * for filtering). Every write that changes a volume goes through `updateVolume`, which guards on the
 * version the caller read. Callers see `Volume` records (resources/volumes/record.ts); the columns are the
 * record's fields (platform/store/record-table.ts), the JSON text of tags and schedules stays in this module. The account's quota usage moves with each write the lifecycle core makes
 * (resources/volumes/kind.ts `usage`).
 */
import type { ExpressionBuilder } from 'kysely';
import type { Page, PageRequest } from '../../platform/domain/pagination.js';
import { fetchPage } from '../../platform/store/lists.js';
import { jsonText, nullableJsonText, type RowFor, recordTable } from '../../platform/store/record-table.js';
import type { Database, Executor } from '../../platform/store/schema.js';
import type { BackupSchedule } from './backup-schedule.js';
import { type Volume, type VolumeChanges, VolumeRecord, type VolumeSort } from './record.js';

/** Tags and backup schedules are kept as JSON text; every other field is its own column. */
const codecs = {
  tags: jsonText<Volume['tags']>(),
  backup_schedule: nullableJsonText<BackupSchedule>(),
  protection: jsonText<Volume['protection']>(),
};

/** The volumes table: the record's fields as columns (tags are also mirrored into volume_tags). */
export type VolumesTable = RowFor<Volume, typeof codecs>;
declare module '../../platform/store/schema.js' {
  interface Database {
    volumes: VolumesTable;
  }
}

const table = recordTable({ table: 'volumes', record: VolumeRecord, codecs });

async function writeTags(
  db: Executor,
  volume: Pick<Volume, 'id' | 'account_id'>,
  tags: Record<string, string>,
) {
  await db.deleteFrom('volume_tags').where('volume_id', '=', volume.id).execute();
  const entries = Object.entries(tags);
  if (entries.length === 0) return;
  await db
    .insertInto('volume_tags')
    .values(
      entries.map(([key, value]) => ({ volume_id: volume.id, account_id: volume.account_id, key, value })),
    )
    .execute();
}

export async function insertVolume(db: Executor, volume: Volume): Promise<void> {
  await table.insert(db, volume);
  // A new volume has no tag rows to replace.
  if (Object.keys(volume.tags).length > 0) await writeTags(db, volume, volume.tags);
}

export const findVolume = table.find;
export const findAccountVolume = table.findOwned;
export const lockAccountVolume = table.lock;

/** Applies `changes` if the volume is still at the version read; undefined when another writer won. */
export async function updateVolume(
  db: Executor,
  current: Volume,
  changes: VolumeChanges,
): Promise<Volume | undefined> {
  const updated = await table.update(db, current, changes);
  if (updated && changes.tags !== undefined) await writeTags(db, updated, changes.tags);
  return updated;
}

/** Deletes the volume (its tags go with it) if it is still at the version read; false otherwise. */
export async function deleteVolume(db: Executor, current: Volume): Promise<boolean> {
  await db.deleteFrom('volume_tags').where('volume_id', '=', current.id).execute();
  return table.delete(db, current);
}

export async function deleteRootVolume(db: Executor, instanceId: string): Promise<void> {
  const ids = db
    .selectFrom('volumes')
    .select('id')
    .where('instance_id', '=', instanceId)
    .where('kind', '=', 'root');
  await db.deleteFrom('volume_tags').where('volume_id', 'in', ids).execute();
  await db.deleteFrom('volumes').where('instance_id', '=', instanceId).where('kind', '=', 'root').execute();
}

/** The volumes on an instance (root first, then by device), whatever their status. */
export async function volumesOfInstance(db: Executor, instanceId: string): Promise<Volume[]> {
  const rows = await db
    .selectFrom('volumes')
    .selectAll()
    .where('instance_id', '=', instanceId)
    .orderBy('device_name')
    .orderBy('id')
    .execute();
  return rows.map(table.decode);
}

export interface VolumeFilters {
  status?: string | undefined;
  region?: string | undefined;
  kind?: string | undefined;
  instance_id?: string | undefined;
  name?: string | undefined;
  /** Every [key, value] pair must be a tag of the volume. */
  tags?: readonly (readonly [string, string])[] | undefined;
}

function filtered(db: Executor, accountId: string, filters: VolumeFilters) {
  let query = db.selectFrom('volumes').selectAll().where('account_id', '=', accountId);
  if (filters.status !== undefined) query = query.where('status', '=', filters.status);
  if (filters.region !== undefined) query = query.where('region', '=', filters.region);
  if (filters.kind !== undefined) query = query.where('kind', '=', filters.kind);
  if (filters.instance_id !== undefined) query = query.where('instance_id', '=', filters.instance_id);
  if (filters.name !== undefined) query = query.where('name', '=', filters.name);
  for (const [key, value] of filters.tags ?? []) {
    query = query.where('id', 'in', (eb: ExpressionBuilder<Database, 'volumes'>) =>
      eb
        .selectFrom('volume_tags')
        .select('volume_tags.volume_id')
        .where('volume_tags.account_id', '=', accountId)
        .where('volume_tags.key', '=', key)
        .where('volume_tags.value', '=', value),
    );
  }
  return query;
}

export async function listVolumes(
  db: Executor,
  accountId: string,
  filters: VolumeFilters,
  request: PageRequest<VolumeSort>,
): Promise<Page<Volume>> {
  const page = await fetchPage(filtered(db, accountId, filters), request, {
    load: (ids) =>
      ids.length === 0
        ? Promise.resolve([])
        : db.selectFrom('volumes').selectAll().where('id', 'in', ids).execute(),
  });
  return { items: page.items.map(table.decode), pagination: page.pagination };
}

/** Data volumes of the account (every status); the volumes quota counts these. */
export async function countDataVolumes(db: Executor, accountId: string): Promise<number> {
  const row = await db
    .selectFrom('volumes')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .where('account_id', '=', accountId)
    .where('kind', '=', 'data')
    .executeTakeFirst();
  return Number(row?.count ?? 0);
}

/** GB of the account's data volumes; the volume_storage_gb quota counts these. */
export async function sumDataVolumeGb(db: Executor, accountId: string): Promise<number> {
  const row = await db
    .selectFrom('volumes')
    .select((eb) => eb.fn.sum<number>('size_gb').as('total'))
    .where('account_id', '=', accountId)
    .where('kind', '=', 'data')
    .executeTakeFirst();
  return Number(row?.total ?? 0);
}

/** Volumes being written from this snapshot (restoring into, or created from it); a delete waits for them. */
export async function countRestoresFrom(db: Executor, snapshotId: string): Promise<number> {
  const row = await db
    .selectFrom('volumes')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .where('restore_snapshot_id', '=', snapshotId)
    .executeTakeFirst();
  return Number(row?.count ?? 0);
}
