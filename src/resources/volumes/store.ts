/**
 * Volumes: data volumes and the root volumes of instances, with their tags (mirrored into volume_tags
 * for filtering). Every write that changes a volume goes through `updateVolume`, which guards on the
 * version the caller read. Callers see `Volume` records (resources/volumes/record.ts); the JSON text of the tags
 * column stays in this module. The account's quota usage moves with each write the lifecycle core makes
 * (resources/volumes/kind.ts `usage`).
 */
import type { ExpressionBuilder } from 'kysely';
import type { Page, PageRequest } from '../../platform/domain/pagination.js';
import { compiledOnce } from '../../platform/store/compiled-query.js';
import { isPostgres } from '../../platform/store/dialect.js';
import { fetchPage } from '../../platform/store/lists.js';
import type { Database, Executor, VolumeRow, VolumesTable } from '../../platform/store/schema.js';
import type { BackupSchedule } from './backup-schedule.js';
import type { Filesystem, PendingAction, Volume, VolumeChanges, VolumeKind, VolumeSort } from './record.js';
import type { VolumeStatus } from './states.js';

function fromRow(row: VolumeRow): Volume {
  return {
    ...row,
    status: row.status as VolumeStatus,
    kind: row.kind as VolumeKind,
    filesystem: row.filesystem as Filesystem | null,
    pending_action: row.pending_action as PendingAction | null,
    tags: JSON.parse(row.tags) as Record<string, string>,
    backup_schedule: row.backup_schedule ? (JSON.parse(row.backup_schedule) as BackupSchedule) : null,
  };
}

function toColumns(changes: VolumeChanges): Partial<VolumesTable> {
  const { tags, backup_schedule, ...plain } = changes;
  return {
    ...plain,
    ...(tags !== undefined ? { tags: JSON.stringify(tags) } : {}),
    ...(backup_schedule !== undefined
      ? { backup_schedule: backup_schedule ? JSON.stringify(backup_schedule) : null }
      : {}),
  };
}

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

/** Every column of `volumes` (the type makes the list whole: a column added to the table must be here). */
const VOLUME_COLUMNS = Object.keys({
  id: true,
  account_id: true,
  name: true,
  region: true,
  size_gb: true,
  status: true,
  kind: true,
  instance_id: true,
  created_at: true,
  updated_at: true,
  version: true,
  tags: true,
  device_name: true,
  attached_at: true,
  filesystem: true,
  pending_action: true,
  backup_schedule: true,
  restore_snapshot_id: true,
  restore_started_at: true,
} satisfies Record<keyof VolumeRow, true>) as (keyof VolumeRow)[];

/** Compiled once (platform/store/compiled-query.ts): every create of an instance inserts its root volume. */
const volumeInsert = compiledOnce<Database, VolumeRow, never>((db, p) =>
  db
    .insertInto('volumes')
    .values(Object.fromEntries(VOLUME_COLUMNS.map((column) => [column, p[column]])) as VolumeRow),
);

export async function insertVolume(db: Executor, volume: Volume): Promise<void> {
  const row: Record<string, unknown> = {
    ...volume,
    tags: JSON.stringify(volume.tags),
    backup_schedule: volume.backup_schedule ? JSON.stringify(volume.backup_schedule) : null,
  };
  // A column the record leaves out is null, as Kysely's insert of the record left it (the SQL is fixed).
  for (const column of VOLUME_COLUMNS) row[column] ??= null;
  await volumeInsert.run(db, row as VolumeRow);
  // A new volume has no tag rows to replace.
  if (Object.keys(volume.tags).length > 0) await writeTags(db, volume, volume.tags);
}

/** Compiled once (platform/store/compiled-query.ts): a boot reads its root volume (is a restore writing it?). */
const volumeById = compiledOnce<Database, { id: string }, VolumeRow>((db, p) =>
  db.selectFrom('volumes').selectAll().where('id', '=', p.id),
);

export async function findVolume(db: Executor, id: string): Promise<Volume | undefined> {
  const row = await volumeById.executeTakeFirst(db, { id });
  return row && fromRow(row);
}

export async function findAccountVolume(
  db: Executor,
  accountId: string,
  id: string,
): Promise<Volume | undefined> {
  const row = await db
    .selectFrom('volumes')
    .selectAll()
    .where('id', '=', id)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
  return row && fromRow(row);
}

/**
 * Reads the account's volume and holds it until the transaction ends (a row lock on PostgreSQL; SQLite
 * runs one write transaction at a time), so of two requests on one volume the second sees the first.
 */
export async function lockAccountVolume(
  db: Executor,
  accountId: string,
  id: string,
): Promise<Volume | undefined> {
  let query = db.selectFrom('volumes').selectAll().where('id', '=', id).where('account_id', '=', accountId);
  if (isPostgres(db)) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  return row && fromRow(row);
}

/** Applies `changes` if the volume is still at the version read; undefined when another writer won. */
export async function updateVolume(
  db: Executor,
  current: Volume,
  changes: VolumeChanges,
): Promise<Volume | undefined> {
  const row = await db
    .updateTable('volumes')
    .set({ ...toColumns(changes), version: current.version + 1 })
    .where('id', '=', current.id)
    .where('version', '=', current.version)
    .returningAll()
    .executeTakeFirst();
  if (!row) return undefined;
  const updated = fromRow(row);
  if (changes.tags !== undefined) await writeTags(db, updated, changes.tags);
  return updated;
}

/** Deletes the volume (its tags go with it) if it is still at the version read; false otherwise. */
export async function deleteVolume(db: Executor, current: Volume): Promise<boolean> {
  await db.deleteFrom('volume_tags').where('volume_id', '=', current.id).execute();
  const deleted = await db
    .deleteFrom('volumes')
    .where('id', '=', current.id)
    .where('version', '=', current.version)
    .executeTakeFirst();
  return deleted.numDeletedRows > 0n;
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
  return rows.map(fromRow);
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
  return { items: page.items.map(fromRow), pagination: page.pagination };
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
