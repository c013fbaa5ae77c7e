/**
 * The simulator's own table of machines (sim_machines), and the migration history that creates it and
 * the table of disks (disks.ts). The driver owns them: the shared schema (platform/store/schema.ts,
 * platform/store/migrations/) knows nothing of them, and a store used with another driver never gets them.
 */
import { type Kysely, type Migration, Migrator, type Selectable } from 'kysely';
import { columnsShape, compiledOnce, compiledPerShape } from '../../platform/store/compiled-query.js';
import { type SimCallsTable, simCallsMigration } from './calls.js';
import { type SimVolumesTable, simVolumesMigration } from './disks.js';
import { simGatewaysMigration } from './gateways.js';
import { type SimRestoresTable, type SimSnapshotsTable, simSnapshotsMigration } from './snapshots.js';
import { type SimTransferTable, simTransferMigration } from './transfer.js';

/** One simulated machine: durable, so a restart finds every machine as it was. */
export interface SimMachinesTable {
  id: string;
  instance_type: string;
  image: string;
  state: string;
  state_since: string;
  boot_started_at: string | null;
  created_at: string;
}

export type SimulatorTables = {
  sim_machines: SimMachinesTable;
  sim_volumes: SimVolumesTable;
  sim_snapshots: SimSnapshotsTable;
  sim_restores: SimRestoresTable;
  sim_calls: SimCallsTable;
  sim_transfer: SimTransferTable;
};

export type SimMachineRow = Selectable<SimMachinesTable>;
export type SimulatorDb = Kysely<SimulatorTables>;

// The store's database, whatever its other tables (the simulator sees only its own); migrations too
// take Kysely<any>, as they describe the schema as it was at their time.
// biome-ignore lint/suspicious/noExplicitAny: see above
export type AnyDb = Kysely<any>;

const migrations: Record<string, Migration> = {
  '0001_sim_machines': {
    // IF NOT EXISTS: stores made before the simulator owned its table got it from the shared 0002.
    async up(db: AnyDb) {
      await db.schema
        .createTable('sim_machines')
        .ifNotExists()
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('instance_type', 'text', (c) => c.notNull())
        .addColumn('image', 'text', (c) => c.notNull())
        .addColumn('state', 'text', (c) => c.notNull())
        .addColumn('state_since', 'text', (c) => c.notNull())
        .addColumn('boot_started_at', 'text')
        .addColumn('created_at', 'text', (c) => c.notNull())
        .execute();
    },
    async down(db: AnyDb) {
      await db.schema.dropTable('sim_machines').ifExists().execute();
    },
  },
  '0002_sim_volumes': simVolumesMigration,
  '0003_sim_snapshots': simSnapshotsMigration,
  '0004_sim_gateways': simGatewaysMigration,
  '0005_sim_calls': simCallsMigration,
  '0006_sim_transfer': simTransferMigration,
};

/** Brings the simulator's tables up to date, with a history of their own; returns what it applied. */
export async function migrateSimulatorTables(db: AnyDb): Promise<string[]> {
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => migrations },
    migrationTableName: 'sim_migrations',
    migrationLockTableName: 'sim_migrations_lock',
  });
  const { error, results } = await migrator.migrateToLatest();
  if (error) throw error;
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => `simulator/${r.migrationName}`);
}

const byId = compiledOnce<SimulatorTables, { id: string }, SimMachineRow>((db, p) =>
  db.selectFrom('sim_machines').selectAll().where('id', '=', p.id),
);

export function findMachine(db: SimulatorDb, id: string): Promise<SimMachineRow | undefined> {
  return byId.executeTakeFirst(db, { id });
}

/** Rows read per query by findMachines: well inside both engines' limits on parameters. */
const FIND_CHUNK = 500;

/** The machines of these ids that exist (any order). */
export async function findMachines(db: SimulatorDb, ids: readonly string[]): Promise<SimMachineRow[]> {
  const found: SimMachineRow[] = [];
  for (let i = 0; i < ids.length; i += FIND_CHUNK) {
    const chunk = ids.slice(i, i + FIND_CHUNK);
    found.push(...(await db.selectFrom('sim_machines').selectAll().where('id', 'in', chunk).execute()));
  }
  return found;
}

const insert = compiledOnce<SimulatorTables, SimMachinesTable, never>((db, p) =>
  db
    .insertInto('sim_machines')
    .values({
      id: p.id,
      instance_type: p.instance_type,
      image: p.image,
      state: p.state,
      state_since: p.state_since,
      boot_started_at: p.boot_started_at,
      created_at: p.created_at,
    })
    .onConflict((oc) => oc.column('id').doNothing()),
);

export async function insertMachine(db: SimulatorDb, row: SimMachinesTable): Promise<void> {
  await insert.write(db, row);
}

/** The UPDATE of `updateMachine`, per set of columns written (their names, comma-separated). */
const update = compiledPerShape<SimulatorTables, Record<string, unknown>, never>(
  (shape) => (db, p) =>
    db
      .updateTable('sim_machines')
      .set(Object.fromEntries(shape.split(',').map((column) => [column, p[column]])))
      .where('id', '=', p.machine_id as string),
);

export async function updateMachine(
  db: SimulatorDb,
  id: string,
  changes: Partial<Omit<SimMachinesTable, 'id' | 'created_at'>>,
): Promise<void> {
  await update(columnsShape(changes)).write(db, { ...changes, machine_id: id });
}

export async function deleteMachine(db: SimulatorDb, id: string): Promise<void> {
  await db.deleteFrom('sim_machines').where('id', '=', id).execute();
}
