/**
 * The simulator's VPN gateways: their table (sim_gateways, in the simulator's own history, machines.ts),
 * their timings and their state. Like a machine, a row holds the change in progress and when it began;
 * where the gateway is now is worked out from the clock, so a gateway keeps provisioning while the server
 * is down. Only a digest of the configuration is kept: the private key inside it never reaches this table.
 */
import { createHash } from 'node:crypto';
import type { Kysely, Migration } from 'kysely';
import type { Clock } from '../../platform/domain/clock.js';
import { configDigest } from '../../resources/vpns/wireguard.js';
import type { GatewayPeerStats, GatewayPhase, GatewaySpec, GatewayState } from '../driver.js';
import type { AnyDb } from './machines.js';

/** At speed-up 1: a gateway takes 6 s to come up, 3 s to go; a new configuration loads at once. */
export const SIM_GATEWAY_TIMINGS_MS = { provision: 6_000, destroy: 3_000 } as const;

export interface SimGatewaysTable {
  id: string;
  region: string;
  /** `<ip>:<port>`. */
  endpoint: string;
  /** provisioning, active or deleting: the change in progress or done. */
  state: string;
  state_since: string;
  config_digest: string;
  created_at: string;
}

type GatewayDb = Kysely<{ sim_gateways: SimGatewaysTable }>;

export const simGatewaysMigration: Migration = {
  async up(db: AnyDb) {
    await db.schema
      .createTable('sim_gateways')
      .ifNotExists()
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('region', 'text', (c) => c.notNull())
      .addColumn('endpoint', 'text', (c) => c.notNull())
      .addColumn('state', 'text', (c) => c.notNull())
      .addColumn('state_since', 'text', (c) => c.notNull())
      .addColumn('config_digest', 'text', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .execute();
  },
  async down(db: AnyDb) {
    await db.schema.dropTable('sim_gateways').ifExists().execute();
  },
};

/** The gateway calls of the simulated driver, and of QEMU's (SimulatedGatewayDriver). */
export class SimulatedGateways {
  private readonly db: GatewayDb;
  private readonly timings: { provision: number; destroy: number };

  constructor(
    db: AnyDb,
    private readonly clock: Clock,
    speedup: number,
  ) {
    this.db = db as GatewayDb;
    this.timings = {
      provision: SIM_GATEWAY_TIMINGS_MS.provision / speedup,
      destroy: SIM_GATEWAY_TIMINGS_MS.destroy / speedup,
    };
  }

  async provision(spec: GatewaySpec): Promise<void> {
    const now = this.clock.now().toISOString();
    await this.db
      .insertInto('sim_gateways')
      .values({
        id: spec.id,
        region: spec.region,
        endpoint: `${spec.endpoint.ip}:${spec.endpoint.port}`,
        state: 'provisioning',
        state_since: now,
        config_digest: configDigest(spec.config),
        created_at: now,
      })
      .onConflict((oc) => oc.column('id').doNothing())
      .execute();
  }

  async configure(spec: GatewaySpec): Promise<void> {
    const { row, state } = await this.current(spec.id);
    if (!row) throw new Error(`simulator: gateway ${spec.id} does not exist`);
    if (state.state === 'deleting' || state.state === 'deleted') {
      throw new Error(`simulator: gateway ${spec.id} is being destroyed`);
    }
    await this.db
      .updateTable('sim_gateways')
      .set({ config_digest: configDigest(spec.config) })
      .where('id', '=', spec.id)
      .execute();
  }

  async destroy(spec: GatewaySpec): Promise<void> {
    const { row, state } = await this.current(spec.id);
    if (!row || state.state === 'deleting') return;
    if (state.state === 'deleted') {
      await this.db.deleteFrom('sim_gateways').where('id', '=', spec.id).execute();
      return;
    }
    await this.db
      .updateTable('sim_gateways')
      .set({ state: 'deleting', state_since: this.clock.now().toISOString() })
      .where('id', '=', spec.id)
      .execute();
  }

  async inspect(spec: GatewaySpec): Promise<GatewayState> {
    return (await this.current(spec.id)).state;
  }

  /**
   * Simulated figures for the peers of an active gateway: each peer shakes hands every 2 minutes (at an
   * offset of its own) and moves a steady few kB/s each way, counted from when the gateway came up.
   * Deterministic in the key and the clock, so two reads agree.
   */
  async peers(id: string, publicKeys: readonly string[]): Promise<Map<string, GatewayPeerStats>> {
    const { row, state } = await this.current(id);
    const stats = new Map<string, GatewayPeerStats>();
    if (!row || state.state !== 'active') return stats;
    const now = this.clock.now().getTime();
    const upSeconds = Math.max(0, (now - Date.parse(row.state_since)) / 1000 - this.timings.provision / 1000);
    for (const key of publicKeys) {
      const seed = createHash('sha256').update(key).digest();
      const offset = seed.readUInt16BE(0) % 120;
      const sinceHandshake = (Math.floor(upSeconds) + offset) % 120;
      const rate = 1000 + (seed.readUInt16BE(2) % 4000);
      stats.set(key, {
        lastHandshakeAt: upSeconds < 1 ? null : new Date(now - Math.min(sinceHandshake, upSeconds) * 1000),
        receivedBytes: Math.floor(upSeconds * rate),
        sentBytes: Math.floor(upSeconds * rate * 3),
      });
    }
    return stats;
  }

  private async current(id: string): Promise<{ row: SimGatewaysTable | undefined; state: GatewayState }> {
    const row = await this.db.selectFrom('sim_gateways').selectAll().where('id', '=', id).executeTakeFirst();
    if (!row) return { row, state: { state: 'absent', configDigest: null, settlesAt: null } };
    const now = this.clock.now().getTime();
    const since = Date.parse(row.state_since);
    const gateway = (state: GatewayPhase, settlesAt: number | null = null): GatewayState => ({
      state,
      configDigest: row.config_digest,
      settlesAt: settlesAt === null ? null : new Date(settlesAt),
    });
    const change = (during: GatewayPhase, ms: number, then: GatewayPhase) =>
      now < since + ms ? gateway(during, since + ms) : gateway(then);
    switch (row.state) {
      case 'provisioning':
        return { row, state: change('provisioning', this.timings.provision, 'active') };
      case 'deleting':
        return { row, state: change('deleting', this.timings.destroy, 'deleted') };
      default:
        return { row, state: gateway('active') };
    }
  }
}

/**
 * The gateway half of a ComputeDriver, answered by the simulator's gateways: the simulator's own, and
 * QEMU's until its gateways run for real (qemu.ts).
 */
export abstract class SimulatedGatewayDriver {
  protected constructor(private readonly gateways: SimulatedGateways) {}

  provisionGateway(spec: GatewaySpec): Promise<void> {
    return this.gateways.provision(spec);
  }

  configureGateway(spec: GatewaySpec): Promise<void> {
    return this.gateways.configure(spec);
  }

  destroyGateway(spec: GatewaySpec): Promise<void> {
    return this.gateways.destroy(spec);
  }

  inspectGateway(spec: GatewaySpec): Promise<GatewayState> {
    return this.gateways.inspect(spec);
  }

  gatewayPeers(gatewayId: string, publicKeys: readonly string[]): Promise<Map<string, GatewayPeerStats>> {
    return this.gateways.peers(gatewayId, publicKeys);
  }
}
