/** Volumes. For now the root volumes of instances; the volumes resource builds on the same table. */
import type { Executor, VolumesTable } from './schema.js';

export async function insertVolume(db: Executor, row: VolumesTable): Promise<void> {
  await db.insertInto('volumes').values(row).execute();
}

export async function resizeVolume(db: Executor, id: string, sizeGb: number, now: string): Promise<void> {
  await db.updateTable('volumes').set({ size_gb: sizeGb, updated_at: now }).where('id', '=', id).execute();
}

export async function deleteRootVolume(db: Executor, instanceId: string): Promise<void> {
  await db.deleteFrom('volumes').where('instance_id', '=', instanceId).where('kind', '=', 'root').execute();
}
