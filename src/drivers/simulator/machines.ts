/** The simulator's own table of machines (sim_machines). */
import type { Executor, SimMachineRow, SimMachinesTable } from '../../store/schema.js';

export function findMachine(db: Executor, id: string): Promise<SimMachineRow | undefined> {
  return db.selectFrom('sim_machines').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function insertMachine(db: Executor, row: SimMachinesTable): Promise<void> {
  await db
    .insertInto('sim_machines')
    .values(row)
    .onConflict((oc) => oc.column('id').doNothing())
    .execute();
}

export async function updateMachine(
  db: Executor,
  id: string,
  changes: Partial<Omit<SimMachinesTable, 'id' | 'created_at'>>,
): Promise<void> {
  await db.updateTable('sim_machines').set(changes).where('id', '=', id).execute();
}

export async function deleteMachine(db: Executor, id: string): Promise<void> {
  await db.deleteFrom('sim_machines').where('id', '=', id).execute();
}
