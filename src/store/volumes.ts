/** Volumes. For now the root volumes of instances; the volumes resource builds on the same table. */
import type { Executor, VolumeRow, VolumesTable } from './schema.js';

export async function insertVolume(db: Executor, row: VolumesTable): Promise<void> {
  await db.insertInto('volumes').values(row).execute();
}

export function findVolume(db: Executor, id: string): Promise<VolumeRow | undefined> {
  return db.selectFrom('volumes').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function resizeVolume(db: Executor, id: string, sizeGb: number, now: string): Promise<void> {
  await db.updateTable('volumes').set({ size_gb: sizeGb, updated_at: now }).where('id', '=', id).execute();
}

export async function deleteRootVolume(db: Executor, instanceId: string): Promise<void> {
  await db.deleteFrom('volumes').where('instance_id', '=', instanceId).where('kind', '=', 'root').execute();
}
