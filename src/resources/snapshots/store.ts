/**
 * Snapshots. Every write goes through `updateSnapshot`, guarded by the version the caller read. Callers
 * see `Snapshot` records (resources/snapshots/record.ts); the JSON text of the tags column stays in this module.
 * The account's quota usage moves with each write the lifecycle core makes (resources/snapshots/kind.ts `usage`).
 */
import type { Page, PageRequest } from '../../platform/domain/pagination.js';
import { isPostgres } from '../../platform/store/dialect.js';
import { fetchPage } from '../../platform/store/lists.js';
import type { Executor, SnapshotRow, SnapshotsTable } from '../../platform/store/schema.js';
import type { Snapshot, SnapshotChanges, SnapshotKind, SnapshotSort } from './record.js';
import type { SnapshotStatus } from './states.js';

function fromRow(row: SnapshotRow): Snapshot {
  return {
    ...row,
    status: row.status as SnapshotStatus,
    kind: row.kind as SnapshotKind,
    tags: JSON.parse(row.tags) as Record<string, string>,
  };
}

function toColumns(changes: SnapshotChanges): Partial<SnapshotsTable> {
  const { tags, ...plain } = changes;
  return { ...plain, ...(tags !== undefined ? { tags: JSON.stringify(tags) } : {}) };
}

export async function insertSnapshot(db: Executor, snapshot: Snapshot): Promise<void> {
  await db
    .insertInto('snapshots')
    .values({ ...snapshot, tags: JSON.stringify(snapshot.tags) })
    .execute();
}

export async function findSnapshot(db: Executor, id: string): Promise<Snapshot | undefined> {
  const row = await db.selectFrom('snapshots').selectAll().where('id', '=', id).executeTakeFirst();
  return row && fromRow(row);
}

export async function findAccountSnapshot(
  db: Executor,
  accountId: string,
  id: string,
): Promise<Snapshot | undefined> {
  const row = await db
    .selectFrom('snapshots')
    .selectAll()
    .where('id', '=', id)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
  return row && fromRow(row);
}

/** Reads the account's snapshot and holds it until the transaction ends (FOR UPDATE on PostgreSQL). */
export async function lockAccountSnapshot(
  db: Executor,
  accountId: string,
  id: string,
): Promise<Snapshot | undefined> {
  let query = db.selectFrom('snapshots').selectAll().where('id', '=', id).where('account_id', '=', accountId);
  if (isPostgres(db)) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  return row && fromRow(row);
}

/** Applies `changes` if the snapshot is still at the version read; undefined when another writer won. */
export async function updateSnapshot(
  db: Executor,
  current: Snapshot,
  changes: SnapshotChanges,
): Promise<Snapshot | undefined> {
  const row = await db
    .updateTable('snapshots')
    .set({ ...toColumns(changes), version: current.version + 1 })
    .where('id', '=', current.id)
    .where('version', '=', current.version)
    .returningAll()
    .executeTakeFirst();
  return row && fromRow(row);
}

export async function deleteSnapshot(db: Executor, current: Snapshot): Promise<boolean> {
  const deleted = await db
    .deleteFrom('snapshots')
    .where('id', '=', current.id)
    .where('version', '=', current.version)
    .executeTakeFirst();
  return deleted.numDeletedRows > 0n;
}

/** The scheduled snapshots of a source (every status), newest first; retention reads these. */
export async function scheduledSnapshotsOf(db: Executor, sourceVolumeId: string): Promise<Snapshot[]> {
  const rows = await db
    .selectFrom('snapshots')
    .selectAll()
    .where('source_volume_id', '=', sourceVolumeId)
    .where('kind', '=', 'scheduled')
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .execute();
  return rows.map(fromRow);
}

export interface SnapshotFilters {
  status?: string | undefined;
  kind?: string | undefined;
  source_volume_id?: string | undefined;
  source_instance_id?: string | undefined;
  region?: string | undefined;
}

export async function listSnapshots(
  db: Executor,
  accountId: string,
  filters: SnapshotFilters,
  request: PageRequest<SnapshotSort>,
): Promise<Page<Snapshot>> {
  let query = db.selectFrom('snapshots').selectAll().where('account_id', '=', accountId);
  if (filters.status !== undefined) query = query.where('status', '=', filters.status);
  if (filters.kind !== undefined) query = query.where('kind', '=', filters.kind);
  if (filters.region !== undefined) query = query.where('region', '=', filters.region);
  if (filters.source_volume_id !== undefined) {
    query = query.where('source_volume_id', '=', filters.source_volume_id);
  }
  if (filters.source_instance_id !== undefined) {
    query = query.where('source_instance_id', '=', filters.source_instance_id);
  }
  const page = await fetchPage(query, request, {
    load: (ids) =>
      ids.length === 0
        ? Promise.resolve([])
        : db.selectFrom('snapshots').selectAll().where('id', 'in', ids).execute(),
  });
  return { items: page.items.map(fromRow), pagination: page.pagination };
}

/** Snapshots of the account (every status); the snapshots quota counts these. */
export async function countSnapshots(db: Executor, accountId: string): Promise<number> {
  const row = await db
    .selectFrom('snapshots')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .where('account_id', '=', accountId)
    .executeTakeFirst();
  return Number(row?.count ?? 0);
}
