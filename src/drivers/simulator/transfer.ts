/**
 * The simulator's public transfer counters (ComputeDriver.publicTransfer), from its simulated traffic.
 *
 * The split. Of a machine's simulated network bytes (metrics.ts: net_tx_bps, net_rx_bps — the tag
 * `nimbus.sim/metrics` pins them), one quarter is to or from public addresses and three quarters are
 * private (instance to instance in its VPC), which is free. So the simulator bills data transfer the way a
 * real driver does: from counters of public bytes alone.
 *
 * The counters are durable (`sim_transfer`, one row per machine) and deterministic: a reading advances a
 * machine's counters from its previous reading to now by the mean of the simulated rates at up to 60
 * evenly spaced moments in between — the same readings at the same times give the same bytes on any
 * replica. A counter belongs to one boot, as a NIC's does: when the machine boots again it starts from
 * zero, with the new boot as its epoch, and only a running machine is read.
 */
import type { Migration } from 'kysely';
import type { MachineSpec, PublicTransfer } from '../driver.js';
import type { AnyDb } from './machines.js';
import { simulatedSample } from './metrics.js';

/** The share of simulated network bytes that is to or from public addresses. */
export const PUBLIC_SHARE = 0.25;
/** Rates averaged per reading at most (a reading after a long gap is not a long computation). */
const MAX_POINTS = 60;
const POINT_MS = 10_000;

export interface SimTransferTable {
  machine_id: string;
  /** The boot this counter counts (the machine's boot_started_at). */
  boot: string;
  bytes_out: number;
  bytes_in: number;
  read_at: string;
}

export const simTransferMigration: Migration = {
  async up(db: AnyDb) {
    await db.schema
      .createTable('sim_transfer')
      .addColumn('machine_id', 'text', (c) => c.primaryKey())
      .addColumn('boot', 'text', (c) => c.notNull())
      .addColumn('bytes_out', 'bigint', (c) => c.notNull())
      .addColumn('bytes_in', 'bigint', (c) => c.notNull())
      .addColumn('read_at', 'text', (c) => c.notNull())
      .execute();
  },
  async down(db: AnyDb) {
    await db.schema.dropTable('sim_transfer').ifExists().execute();
  },
};

/** Public bytes out and in of a running machine between two moments, from its simulated rates. */
export function simulatedPublicBytes(
  spec: MachineSpec,
  fromMs: number,
  toMs: number,
): { out: number; in: number } {
  if (toMs <= fromMs) return { out: 0, in: 0 };
  const points = Math.min(MAX_POINTS, Math.max(1, Math.ceil((toMs - fromMs) / POINT_MS)));
  const step = (toMs - fromMs) / points;
  let tx = 0;
  let rx = 0;
  for (let i = 0; i < points; i++) {
    const sample = simulatedSample(spec, new Date(fromMs + step * (i + 0.5)), true);
    tx += sample.net_tx_bps;
    rx += sample.net_rx_bps;
  }
  const seconds = (toMs - fromMs) / 1000;
  return {
    out: Math.round((tx / points) * seconds * PUBLIC_SHARE),
    in: Math.round((rx / points) * seconds * PUBLIC_SHARE),
  };
}

/**
 * Reads (and advances, durably) the counters of the machines that are running at `nowMs`; `running`
 * gives each running machine's boot. One transaction, so a reading is never half written.
 */
export async function readPublicTransfer(
  db: AnyDb,
  specs: readonly MachineSpec[],
  running: ReadonlyMap<string, string>,
  nowMs: number,
): Promise<Map<string, PublicTransfer>> {
  const readings = new Map<string, PublicTransfer>();
  const ids = specs.filter((spec) => running.has(spec.id)).map((spec) => spec.id);
  if (ids.length === 0) return readings;
  await db.transaction().execute(async (trx) => {
    const rows = new Map<string, SimTransferTable>();
    for (let i = 0; i < ids.length; i += 500) {
      const found = (await trx
        .selectFrom('sim_transfer')
        .selectAll()
        .where('machine_id', 'in', ids.slice(i, i + 500))
        .execute()) as SimTransferTable[];
      for (const row of found) rows.set(row.machine_id, row);
    }
    for (const spec of specs) {
      const boot = running.get(spec.id);
      if (boot === undefined) continue;
      const row = rows.get(spec.id);
      const sameBoot = row !== undefined && row.boot === boot;
      const fromMs = sameBoot ? Date.parse(row.read_at) : Date.parse(boot);
      const added = simulatedPublicBytes(spec, fromMs, nowMs);
      const bytesOut = (sameBoot ? Number(row.bytes_out) : 0) + added.out;
      const bytesIn = (sameBoot ? Number(row.bytes_in) : 0) + added.in;
      const readFrom = Math.max(fromMs, nowMs);
      const values = {
        boot,
        bytes_out: bytesOut,
        bytes_in: bytesIn,
        read_at: new Date(readFrom).toISOString(),
      };
      await trx
        .insertInto('sim_transfer')
        .values({ machine_id: spec.id, ...values })
        .onConflict((oc) => oc.column('machine_id').doUpdateSet(values))
        .execute();
      readings.set(spec.id, { bytesOut, bytesIn, epoch: boot });
    }
  });
  return readings;
}
