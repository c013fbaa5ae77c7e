/**
 * The simulator's call counts (sim_calls): how many times each machine was asked to provision, start,
 * stop, reboot, resize or be destroyed. A real hypervisor would show the same in its logs. Tests read
 * them to prove that a step ran once, even when several server processes share the database (replicas
 * behind a load balancer, a process killed and restarted): each call adds one in the shared table.
 *
 * Rows stay after a machine is destroyed (its `destroy` count is the last thing written); two small
 * rows per machine at most.
 */
import type { Migration } from 'kysely';
import { sql } from 'kysely';
import { compiledOnce } from '../../platform/store/compiled-query.js';
import type { AnyDb } from './machines.js';

export const MACHINE_CALLS = ['provision', 'start', 'stop', 'reboot', 'resize', 'destroy'] as const;
export type MachineCall = (typeof MACHINE_CALLS)[number];

export interface SimCallsTable {
  machine_id: string;
  call: string;
  count: number;
}

export const simCallsMigration: Migration = {
  async up(db: AnyDb) {
    await db.schema
      .createTable('sim_calls')
      .addColumn('machine_id', 'text', (c) => c.notNull())
      .addColumn('call', 'text', (c) => c.notNull())
      .addColumn('count', 'integer', (c) => c.notNull())
      .addPrimaryKeyConstraint('sim_calls_pk', ['machine_id', 'call'])
      .execute();
  },
  async down(db: AnyDb) {
    await db.schema.dropTable('sim_calls').ifExists().execute();
  },
};

/** One more call of `call` on the machine; one statement, so concurrent callers never lose a count. */
const increment = compiledOnce<{ sim_calls: SimCallsTable }, { machineId: string; call: string }, never>(
  (db, p) =>
    db
      .insertInto('sim_calls')
      .values({ machine_id: p.machineId, call: p.call, count: 1 })
      .onConflict((oc) =>
        oc.columns(['machine_id', 'call']).doUpdateSet({ count: sql<number>`sim_calls.count + 1` }),
      ),
);

export async function countCall(db: AnyDb, machineId: string, call: MachineCall): Promise<void> {
  await increment.write(db, { machineId, call });
}
