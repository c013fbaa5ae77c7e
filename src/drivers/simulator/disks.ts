/**
 * The simulator's table of disks (sim_volumes) and the migration that creates it, in the simulator's own
 * history (machines.ts). Like a machine, a disk row holds the change in progress and when it began;
 * where the disk is now is worked out from the clock (simulator.ts), so a disk keeps attaching while
 * the server is down.
 */
import type { Migration } from 'kysely';
import type { AnyDb, SimulatorDb } from './machines.js';

export interface SimVolumesTable {
  id: string;
  size_gb: number;
  filesystem: string | null;
  /** creating, available, attaching, attached, detaching, resizing or deleting: the change in progress or done. */
  state: string;
  state_since: string;
  instance_id: string | null;
  device_name: string | null;
  created_at: string;
}

export type SimVolumeRow = SimVolumesTable;

export const simVolumesMigration: Migration = {
  async up(db: AnyDb) {
    await db.schema
      .createTable('sim_volumes')
      .ifNotExists()
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('size_gb', 'integer', (c) => c.notNull())
      .addColumn('filesystem', 'text')
      .addColumn('state', 'text', (c) => c.notNull())
      .addColumn('state_since', 'text', (c) => c.notNull())
      .addColumn('instance_id', 'text')
      .addColumn('device_name', 'text')
      .addColumn('created_at', 'text', (c) => c.notNull())
      .execute();
  },
  async down(db: AnyDb) {
    await db.schema.dropTable('sim_volumes').ifExists().execute();
  },
};

export function findDisk(db: SimulatorDb, id: string): Promise<SimVolumeRow | undefined> {
  return db.selectFrom('sim_volumes').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function insertDisk(db: SimulatorDb, row: SimVolumesTable): Promise<void> {
  await db
    .insertInto('sim_volumes')
    .values(row)
    .onConflict((oc) => oc.column('id').doNothing())
    .execute();
}

export async function updateDisk(
  db: SimulatorDb,
  id: string,
  changes: Partial<Omit<SimVolumesTable, 'id' | 'created_at'>>,
): Promise<void> {
  await db.updateTable('sim_volumes').set(changes).where('id', '=', id).execute();
}

export async function deleteDisk(db: SimulatorDb, id: string): Promise<void> {
  await db.deleteFrom('sim_volumes').where('id', '=', id).execute();
}
