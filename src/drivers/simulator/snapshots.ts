/**
 * The simulator's tables of snapshots (sim_snapshots) and of restores (sim_restores), and the migration
 * that creates them, in the simulator's own history (machines.ts). As with machines and disks, a row
 * holds the change in progress and when it began; where it is now is worked out from the clock
 * (simulator.ts), so a snapshot keeps copying while the server is down.
 */
import type { Migration } from 'kysely';
import type { AnyDb, SimulatorDb } from './machines.js';

export interface SimSnapshotsTable {
  id: string;
  source_volume_id: string;
  size_gb: number;
  /** creating or deleting: the change in progress or done. */
  state: string;
  state_since: string;
  /** Why the copy fails (a fault tag on the source), decided when it began; null: it succeeds. */
  failure: string | null;
  created_at: string;
}

/** The latest restore of each disk: the snapshot written over it and when that began. */
export interface SimRestoresTable {
  volume_id: string;
  snapshot_id: string;
  started_at: string;
  size_gb: number;
  /** When the simulator began writing (started_at names the restore; this times it). */
  began_at: string;
}

export const simSnapshotsMigration: Migration = {
  async up(db: AnyDb) {
    await db.schema
      .createTable('sim_snapshots')
      .ifNotExists()
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('source_volume_id', 'text', (c) => c.notNull())
      .addColumn('size_gb', 'integer', (c) => c.notNull())
      .addColumn('state', 'text', (c) => c.notNull())
      .addColumn('state_since', 'text', (c) => c.notNull())
      .addColumn('failure', 'text')
      .addColumn('created_at', 'text', (c) => c.notNull())
      .execute();
    await db.schema
      .createTable('sim_restores')
      .ifNotExists()
      .addColumn('volume_id', 'text', (c) => c.primaryKey())
      .addColumn('snapshot_id', 'text', (c) => c.notNull())
      .addColumn('started_at', 'text', (c) => c.notNull())
      .addColumn('size_gb', 'integer', (c) => c.notNull())
      .addColumn('began_at', 'text', (c) => c.notNull())
      .execute();
  },
  async down(db: AnyDb) {
    await db.schema.dropTable('sim_restores').ifExists().execute();
    await db.schema.dropTable('sim_snapshots').ifExists().execute();
  },
};

export function findSimSnapshot(db: SimulatorDb, id: string): Promise<SimSnapshotsTable | undefined> {
  return db.selectFrom('sim_snapshots').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function insertSimSnapshot(db: SimulatorDb, row: SimSnapshotsTable): Promise<void> {
  await db
    .insertInto('sim_snapshots')
    .values(row)
    .onConflict((oc) => oc.column('id').doNothing())
    .execute();
}

export async function updateSimSnapshot(
  db: SimulatorDb,
  id: string,
  changes: Partial<Omit<SimSnapshotsTable, 'id' | 'created_at'>>,
): Promise<void> {
  await db.updateTable('sim_snapshots').set(changes).where('id', '=', id).execute();
}

export async function deleteSimSnapshot(db: SimulatorDb, id: string): Promise<void> {
  await db.deleteFrom('sim_snapshots').where('id', '=', id).execute();
}

export function findRestore(db: SimulatorDb, volumeId: string): Promise<SimRestoresTable | undefined> {
  return db.selectFrom('sim_restores').selectAll().where('volume_id', '=', volumeId).executeTakeFirst();
}

/** Records the volume's latest restore, replacing an earlier one. */
export async function putRestore(db: SimulatorDb, row: SimRestoresTable): Promise<void> {
  await db
    .insertInto('sim_restores')
    .values(row)
    .onConflict((oc) =>
      oc.column('volume_id').doUpdateSet({
        snapshot_id: row.snapshot_id,
        started_at: row.started_at,
        size_gb: row.size_gb,
        began_at: row.began_at,
      }),
    )
    .execute();
}
