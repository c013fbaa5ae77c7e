/**
 * Snapshots. Every write goes through `updateSnapshot`, guarded by the version the caller read. Callers
 * see `Snapshot` records (resources/snapshots/record.ts); the columns are the record's fields
 * (platform/store/record-table.ts), the JSON text of the tags column stays in this module.
 * The account's quota usage moves with each write the lifecycle core makes (resources/snapshots/kind.ts `usage`).
 */
import type { Page, PageRequest } from '../../platform/domain/pagination.js';
import { fetchPage } from '../../platform/store/lists.js';
import { jsonText, type RowFor, recordTable } from '../../platform/store/record-table.js';
import type { Executor } from '../../platform/store/schema.js';
import { type Snapshot, type SnapshotChanges, SnapshotRecord, type SnapshotSort } from './record.js';

/** The snapshots table; tags are JSON text. */
/** Tags are kept as JSON text; every other field is its own column. */
const codecs = { tags: jsonText<Snapshot['tags']>() };

/** The snapshots table: the record's fields as columns. */
export type SnapshotsTable = RowFor<Snapshot, typeof codecs>;
declare module '../../platform/store/schema.js' {
  interface Database {
    snapshots: SnapshotsTable;
  }
}

const table = recordTable({ table: 'snapshots', record: SnapshotRecord, codecs });

export const insertSnapshot = table.insert;
export const findSnapshot = table.find;
export const findAccountSnapshot = table.findOwned;
export const lockAccountSnapshot = table.lock;
/** Applies `changes` if the snapshot is still at the version read; undefined when another writer won. */
export const updateSnapshot: (
  db: Executor,
  current: Snapshot,
  changes: SnapshotChanges,
) => Promise<Snapshot | undefined> = table.update;
export const deleteSnapshot = table.delete;

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
  return rows.map(table.decode);
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
  return { items: page.items.map(table.decode), pagination: page.pagination };
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
