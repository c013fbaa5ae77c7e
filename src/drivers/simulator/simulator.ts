/**
 * The simulated compute driver: machines that exist only as rows in the store, with realistic timings.
 *
 * A machine row holds the change in progress and when it began (`state`, `state_since`); where the
 * machine is now is worked out from the clock when asked, so a machine keeps booting while the server
 * is down and is found running when it comes back, exactly as a real one would be. Durations are
 * SIM_TIMINGS_MS divided by the configured speed-up; the clock is injected, so tests that hold a manual
 * clock step machines through their changes deterministically.
 *
 * Fault injection (docs/design.md, "Fault injection"): the tag `nimbus.sim/fault` on the instance makes boots hang
 * (`stuck-starting`), graceful shutdowns hang (`stuck-stopping`) or boots fail (`boot-error`). Faults are
 * read from the spec on every call, so removing the tag lets a hung change finish. `snapshot-fail` on a
 * volume (or on an instance, for its root volume) makes snapshots of it fail; that one is read when the
 * copy begins, as a real copy fails or not once started.
 */
import type { Clock } from '../../platform/domain/clock.js';
import type {
  ComputeDriver,
  DiskState,
  FaultInjection,
  MachineSpec,
  MachineState,
  MetricSample,
  PowerState,
  PublicTransfer,
  RestoreSpec,
  RestoreState,
  SnapshotSpec,
  SnapshotState,
  VolumeAttachment,
  VolumeSpec,
  VolumeState,
} from '../driver.js';
import { countCall, type MachineCall } from './calls.js';
import { deleteDisk, findDisk, insertDisk, type SimVolumeRow, updateDisk } from './disks.js';
import { SimulatedGatewayDriver, SimulatedGateways } from './gateways.js';
import {
  type AnyDb,
  deleteMachine,
  findMachine,
  findMachines,
  insertMachine,
  migrateSimulatorTables,
  type SimMachineRow,
  type SimulatorDb,
  updateMachine,
} from './machines.js';
import { simulatedSample } from './metrics.js';
import {
  deleteSimSnapshot,
  findRestore,
  findSimSnapshot,
  insertSimSnapshot,
  putRestore,
  type SimSnapshotsTable,
  updateSimSnapshot,
} from './snapshots.js';
import { readPublicTransfer } from './transfer.js';

/** Realistic durations at speed-up 1: boot about 8 s, graceful stop about 5 s, a resize about 25 s. */
export const SIM_TIMINGS_MS = { boot: 8_000, stop: 5_000, resize: 25_000 } as const;

/**
 * Disks at speed-up 1: allocating takes 4 s and formatting 3 s more, attaching and detaching 2 s each, a
 * resize 6 s, a delete 3 s.
 */
export const SIM_DISK_TIMINGS_MS = {
  create: 4_000,
  format: 3_000,
  attach: 2_000,
  detach: 2_000,
  resize: 6_000,
  delete: 3_000,
} as const;
type DiskTimings = Record<keyof typeof SIM_DISK_TIMINGS_MS, number>;

/**
 * Snapshots at speed-up 1: a copy takes 3 s plus 50 ms per GB (a 100 GB volume: 8 s), a delete 2 s; a
 * restore 4 s plus 50 ms per GB of the snapshot.
 */
export const SIM_SNAPSHOT_TIMINGS_MS = {
  create: 3_000,
  createPerGb: 50,
  delete: 2_000,
  restore: 4_000,
  restorePerGb: 50,
} as const;
type SnapshotTimings = Record<keyof typeof SIM_SNAPSHOT_TIMINGS_MS, number>;

export const FAULT_TAG = 'nimbus.sim/fault';
/** Fault tag values for snapshots: on a volume, or on an instance for its root volume. */
export const SNAPSHOT_FAULTS = ['snapshot-fail'] as const;
export const FAULTS = ['stuck-starting', 'stuck-stopping', 'boot-error', ...SNAPSHOT_FAULTS] as const;
type Fault = (typeof FAULTS)[number];
/** The reason a snapshot failed by the fault tag gives. */
export const SNAPSHOT_FAULT_ERROR = `simulated failure: the source carries ${FAULT_TAG}=snapshot-fail`;

/** What a machine row stores: the driver's powers plus a reboot (a shutdown then a boot, in one change). */
type StoredState = Exclude<PowerState, 'absent'> | 'rebooting';

export interface SimulatorOptions {
  /** The store's database; the simulator keeps its machines in a table of its own there. */
  db: AnyDb;
  /**
   * Where `inspect` reads machines: the store's committed reads (Store.committedReads), which do not
   * wait for the writes of others in progress; the machine's own changes were committed before the
   * caller looks again. Defaults to `db`.
   */
  reads?: AnyDb;
  clock: Clock;
  /** Simulated durations are divided by this. */
  speedup: number;
}

function faultOf(spec: MachineSpec): Fault | null {
  const value = spec.tags[FAULT_TAG];
  return (FAULTS as readonly string[]).includes(value ?? '') ? (value as Fault) : null;
}

const at = (ms: number) => new Date(ms);

export class SimulatedDriver extends SimulatedGatewayDriver implements ComputeDriver {
  readonly name = 'simulator';
  readonly faultInjection: FaultInjection = {
    tag: FAULT_TAG,
    instanceFaults: FAULTS,
    volumeFaults: SNAPSHOT_FAULTS,
  };
  private readonly db: SimulatorDb;
  private readonly reads: SimulatorDb;
  private readonly clock: Clock;
  private readonly timings: { boot: number; stop: number; resize: number };
  private readonly diskTimings: DiskTimings;
  private readonly snapshotTimings: SnapshotTimings;

  /** Creates the simulator's tables if needed, then the driver. */
  static async open(options: SimulatorOptions): Promise<SimulatedDriver> {
    await migrateSimulatorTables(options.db);
    return new SimulatedDriver(options);
  }

  private constructor(options: SimulatorOptions) {
    super(new SimulatedGateways(options.db, options.clock, options.speedup));
    this.db = options.db as SimulatorDb;
    this.reads = (options.reads ?? options.db) as SimulatorDb;
    this.clock = options.clock;
    this.timings = {
      boot: SIM_TIMINGS_MS.boot / options.speedup,
      stop: SIM_TIMINGS_MS.stop / options.speedup,
      resize: SIM_TIMINGS_MS.resize / options.speedup,
    };
    this.diskTimings = Object.fromEntries(
      Object.entries(SIM_DISK_TIMINGS_MS).map(([change, ms]) => [change, ms / options.speedup]),
    ) as DiskTimings;
    this.snapshotTimings = Object.fromEntries(
      Object.entries(SIM_SNAPSHOT_TIMINGS_MS).map(([change, ms]) => [change, ms / options.speedup]),
    ) as SnapshotTimings;
  }

  async provision(spec: MachineSpec): Promise<void> {
    await this.machineCall(spec, 'provision', async (db) => {
      // The insert leaves a machine that exists as it is: provisioning twice changes nothing.
      const now = this.clock.now().toISOString();
      await insertMachine(db, {
        id: spec.id,
        instance_type: spec.instanceType.name,
        image: spec.image,
        state: 'off',
        state_since: now,
        boot_started_at: null,
        created_at: now,
      });
    });
  }

  async start(spec: MachineSpec): Promise<void> {
    await this.machineCall(spec, 'start', async (db) => {
      const { row, state } = await this.current(spec, db);
      if (!row || (state.power !== 'off' && state.power !== 'failed')) return;
      const now = this.clock.now().toISOString();
      await updateMachine(db, spec.id, { state: 'booting', state_since: now, boot_started_at: now });
    });
  }

  async stop(spec: MachineSpec, options: { force: boolean }): Promise<void> {
    await this.machineCall(spec, 'stop', async (db) => {
      const { row, state } = await this.current(spec, db);
      if (!row || state.power === 'off') return;
      const now = this.clock.now().toISOString();
      if (options.force || state.power === 'failed') {
        await updateMachine(db, spec.id, { state: 'off', state_since: now });
      } else if (state.power === 'running' || state.power === 'booting') {
        await updateMachine(db, spec.id, { state: 'stopping', state_since: now });
      }
    });
  }

  async reboot(spec: MachineSpec): Promise<void> {
    await this.machineCall(spec, 'reboot', async (db) => {
      const { row, state } = await this.current(spec, db);
      if (!row || state.power !== 'running') return;
      const now = this.clock.now().getTime();
      await updateMachine(db, spec.id, {
        state: 'rebooting',
        state_since: at(now).toISOString(),
        boot_started_at: at(now + this.timings.stop).toISOString(),
      });
    });
  }

  async resize(spec: MachineSpec): Promise<void> {
    await this.machineCall(spec, 'resize', async (db) => {
      const { row, state } = await this.current(spec, db);
      if (!row) throw new Error(`simulator: machine ${spec.id} does not exist`);
      if (row.instance_type === spec.instanceType.name) return;
      if (state.power !== 'off' && state.power !== 'failed') {
        throw new Error(`simulator: machine ${spec.id} must be off to resize, it is ${state.power}`);
      }
      await updateMachine(db, spec.id, {
        state: 'resizing',
        state_since: this.clock.now().toISOString(),
        instance_type: spec.instanceType.name,
      });
    });
  }

  async destroy(spec: MachineSpec): Promise<void> {
    await this.machineCall(spec, 'destroy', (db) => deleteMachine(db, spec.id));
  }

  /**
   * One call on a machine: counted on every call, changing anything or not (calls.ts: how tests see a
   * step run twice), and its change to the machine, in one transaction: one durable commit per call, as
   * a hypervisor call is one, and never a count without its change. A call that throws still counts.
   */
  private async machineCall(
    spec: MachineSpec,
    call: MachineCall,
    change: (db: SimulatorDb) => Promise<void>,
  ): Promise<void> {
    let failure: unknown = null;
    await this.db.transaction().execute(async (trx) => {
      await countCall(trx, spec.id, call);
      try {
        await change(trx);
      } catch (error) {
        failure = error;
      }
    });
    if (failure !== null) throw failure;
  }

  async inspect(spec: MachineSpec): Promise<MachineState> {
    return (await this.current(spec)).state;
  }

  async sampleMetrics(spec: MachineSpec, when: Date): Promise<MetricSample> {
    const { state } = await this.current(spec);
    return simulatedSample(spec, when, state.power === 'running');
  }

  /** sampleMetrics of each, the machines read in one query per 500. */
  async sampleMetricsMany(
    specs: readonly MachineSpec[],
    when: Date,
  ): Promise<Map<string, MetricSample | Error>> {
    const rows = new Map(
      (
        await findMachines(
          this.db,
          specs.map((spec) => spec.id),
        )
      ).map((row) => [row.id, row]),
    );
    const now = this.clock.now().getTime();
    const samples = new Map<string, MetricSample | Error>();
    for (const spec of specs) {
      const row = rows.get(spec.id);
      const running = row !== undefined && this.stateOf(row, faultOf(spec), now).power === 'running';
      try {
        samples.set(spec.id, simulatedSample(spec, when, running));
      } catch (error) {
        samples.set(spec.id, error instanceof Error ? error : new Error(String(error)));
      }
    }
    return samples;
  }

  /** The public share of each running machine's simulated traffic, counted since its boot (transfer.ts). */
  async publicTransfer(specs: readonly MachineSpec[]): Promise<Map<string, PublicTransfer>> {
    const rows = await findMachines(
      this.db,
      specs.map((spec) => spec.id),
    );
    const now = this.clock.now().getTime();
    const byId = new Map(specs.map((spec) => [spec.id, spec]));
    const running = new Map<string, string>();
    for (const row of rows) {
      const spec = byId.get(row.id);
      if (!spec || row.boot_started_at === null) continue;
      if (this.stateOf(row, faultOf(spec), now).power === 'running') running.set(row.id, row.boot_started_at);
    }
    return readPublicTransfer(this.db, specs, running, now);
  }

  async createVolume(spec: VolumeSpec): Promise<void> {
    const now = this.clock.now().toISOString();
    await insertDisk(this.db, {
      id: spec.id,
      size_gb: spec.sizeGb,
      filesystem: spec.filesystem,
      state: 'creating',
      state_since: now,
      instance_id: null,
      device_name: null,
      created_at: now,
    });
  }

  async attachVolume(spec: VolumeSpec, attachment: VolumeAttachment): Promise<void> {
    const { row, state } = await this.currentDisk(spec);
    if (!row) throw new Error(`simulator: disk ${spec.id} does not exist`);
    if (state.state === 'attaching' || state.state === 'attached') return;
    if (state.state !== 'available') {
      throw new Error(`simulator: disk ${spec.id} must be available to attach, it is ${state.state}`);
    }
    await updateDisk(this.db, spec.id, {
      state: 'attaching',
      state_since: this.clock.now().toISOString(),
      instance_id: attachment.instanceId,
      device_name: attachment.deviceName,
    });
  }

  async detachVolume(spec: VolumeSpec): Promise<void> {
    const { row, state } = await this.currentDisk(spec);
    if (!row || state.state === 'detaching' || state.attachment === null) return;
    if (state.state !== 'attached' && state.state !== 'attaching') {
      throw new Error(`simulator: disk ${spec.id} cannot detach while ${state.state}`);
    }
    await updateDisk(this.db, spec.id, { state: 'detaching', state_since: this.clock.now().toISOString() });
  }

  async resizeVolume(spec: VolumeSpec): Promise<void> {
    const { row, state } = await this.currentDisk(spec);
    if (!row) throw new Error(`simulator: disk ${spec.id} does not exist`);
    if (row.size_gb >= spec.sizeGb) return;
    if (state.state !== 'available' && state.state !== 'attached') {
      throw new Error(`simulator: disk ${spec.id} cannot grow while ${state.state}`);
    }
    await updateDisk(this.db, spec.id, {
      state: 'resizing',
      state_since: this.clock.now().toISOString(),
      size_gb: spec.sizeGb,
      // A detach that has finished leaves its instance on the row; the new change starts detached.
      ...(state.attachment ? {} : { instance_id: null, device_name: null }),
    });
  }

  async deleteVolume(spec: VolumeSpec): Promise<void> {
    const { row, state } = await this.currentDisk(spec);
    if (!row || state.state === 'deleting') return;
    if (state.state === 'deleted') {
      await deleteDisk(this.db, spec.id);
      return;
    }
    if (state.attachment !== null) {
      throw new Error(`simulator: disk ${spec.id} is attached to ${state.attachment.instanceId}`);
    }
    await updateDisk(this.db, spec.id, { state: 'deleting', state_since: this.clock.now().toISOString() });
  }

  async inspectVolume(spec: VolumeSpec): Promise<VolumeState> {
    return (await this.currentDisk(spec)).state;
  }

  async createSnapshot(spec: SnapshotSpec): Promise<void> {
    const now = this.clock.now().toISOString();
    await insertSimSnapshot(this.db, {
      id: spec.id,
      source_volume_id: spec.sourceVolumeId,
      size_gb: spec.sizeGb,
      state: 'creating',
      state_since: now,
      failure: spec.sourceTags[FAULT_TAG] === 'snapshot-fail' ? SNAPSHOT_FAULT_ERROR : null,
      created_at: now,
    });
  }

  async deleteSnapshot(spec: SnapshotSpec): Promise<void> {
    const row = await findSimSnapshot(this.db, spec.id);
    if (!row) return;
    const state = this.snapshotStateOf(row, this.clock.now().getTime());
    if (state.state === 'deleting') return;
    if (state.state === 'deleted') {
      await deleteSimSnapshot(this.db, spec.id);
      return;
    }
    await updateSimSnapshot(this.db, spec.id, {
      state: 'deleting',
      state_since: this.clock.now().toISOString(),
    });
  }

  async inspectSnapshot(spec: SnapshotSpec): Promise<SnapshotState> {
    const row = await findSimSnapshot(this.db, spec.id);
    if (!row) return { state: 'absent', settlesAt: null, error: null };
    return this.snapshotStateOf(row, this.clock.now().getTime());
  }

  async restoreVolume(spec: RestoreSpec): Promise<void> {
    const current = await findRestore(this.db, spec.volumeId);
    if (current && current.started_at === spec.startedAt && current.snapshot_id === spec.snapshotId) return;
    const snapshot = await findSimSnapshot(this.db, spec.snapshotId);
    const state = snapshot ? this.snapshotStateOf(snapshot, this.clock.now().getTime()).state : 'absent';
    if (state !== 'available') {
      throw new Error(`simulator: snapshot ${spec.snapshotId} cannot be restored while ${state}`);
    }
    await putRestore(this.db, {
      volume_id: spec.volumeId,
      snapshot_id: spec.snapshotId,
      started_at: spec.startedAt,
      size_gb: snapshot?.size_gb ?? spec.sizeGb,
      began_at: this.clock.now().toISOString(),
    });
  }

  async inspectRestore(spec: RestoreSpec): Promise<RestoreState> {
    const row = await findRestore(this.db, spec.volumeId);
    if (!row || row.started_at !== spec.startedAt || row.snapshot_id !== spec.snapshotId) {
      return { state: 'absent', settlesAt: null };
    }
    const t = this.snapshotTimings;
    const done = Date.parse(row.began_at) + t.restore + t.restorePerGb * row.size_gb;
    return this.clock.now().getTime() < done
      ? { state: 'restoring', settlesAt: at(done) }
      : { state: 'done', settlesAt: null };
  }

  /** Where a snapshot is at `now`, given the change it began at `state_since`. */
  private snapshotStateOf(row: SimSnapshotsTable, now: number): SnapshotState {
    const since = Date.parse(row.state_since);
    const t = this.snapshotTimings;
    if (row.state === 'deleting') {
      const done = since + t.delete;
      return now < done
        ? { state: 'deleting', settlesAt: at(done), error: null }
        : { state: 'deleted', settlesAt: null, error: null };
    }
    const done = since + t.create + t.createPerGb * row.size_gb;
    if (now < done) return { state: 'creating', settlesAt: at(done), error: null };
    return row.failure
      ? { state: 'failed', settlesAt: null, error: row.failure }
      : { state: 'available', settlesAt: null, error: null };
  }

  private async currentDisk(
    spec: VolumeSpec,
  ): Promise<{ row: SimVolumeRow | undefined; state: VolumeState }> {
    const row = await findDisk(this.db, spec.id);
    if (!row) return { row, state: { state: 'absent', sizeGb: null, attachment: null, settlesAt: null } };
    return { row, state: this.diskStateOf(row, this.clock.now().getTime()) };
  }

  /** Where a disk is at `now`, given the change it began at `state_since`. */
  private diskStateOf(row: SimVolumeRow, now: number): VolumeState {
    const since = Date.parse(row.state_since);
    const attachment =
      row.instance_id !== null && row.device_name !== null
        ? { instanceId: row.instance_id, deviceName: row.device_name }
        : null;
    const rested: DiskState = attachment ? 'attached' : 'available';
    const disk = (state: DiskState, settlesAt: number | null = null): VolumeState => ({
      state,
      sizeGb: row.size_gb,
      attachment,
      settlesAt: settlesAt === null ? null : at(settlesAt),
    });
    const change = (state: DiskState, ms: number, then: DiskState, thenRow: Partial<VolumeState> = {}) =>
      now < since + ms ? disk(state, since + ms) : { ...disk(then), ...thenRow };
    const t = this.diskTimings;
    switch (row.state) {
      case 'creating':
        return change('creating', t.create + (row.filesystem ? t.format : 0), 'available');
      case 'attaching':
        return change('attaching', t.attach, 'attached');
      case 'detaching':
        return change('detaching', t.detach, 'available', { attachment: null });
      case 'resizing':
        return change('resizing', t.resize, rested);
      case 'deleting':
        return change('deleting', t.delete, 'deleted');
      default:
        return disk(rested);
    }
  }

  private async current(
    spec: MachineSpec,
    db: SimulatorDb = this.reads,
  ): Promise<{ row: SimMachineRow | undefined; state: MachineState }> {
    const row = await findMachine(db, spec.id);
    if (!row)
      return { row, state: { power: 'absent', instanceType: null, settlesAt: null, bootStartedAt: null } };
    return { row, state: this.stateOf(row, faultOf(spec), this.clock.now().getTime()) };
  }

  /** Where a machine is at `now`, given the change it began at `state_since`. */
  private stateOf(row: SimMachineRow, fault: Fault | null, now: number): MachineState {
    const since = Date.parse(row.state_since);
    const settled = (power: PowerState, settlesAt: number | null = null): MachineState => ({
      power,
      instanceType: row.instance_type,
      settlesAt: settlesAt === null ? null : at(settlesAt),
      bootStartedAt: row.boot_started_at ? new Date(row.boot_started_at) : null,
    });
    const booting = (bootBegan: number): MachineState => {
      if (fault === 'stuck-starting') return settled('booting');
      const done = bootBegan + this.timings.boot;
      if (now < done) return settled('booting', done);
      return settled(fault === 'boot-error' ? 'failed' : 'running');
    };
    const stopping = (): MachineState | null => {
      if (fault === 'stuck-stopping') return settled('stopping');
      const done = since + this.timings.stop;
      return now < done ? settled('stopping', done) : null;
    };
    switch (row.state as StoredState) {
      case 'booting':
        return booting(since);
      case 'stopping':
        return stopping() ?? settled('off');
      case 'rebooting':
        return stopping() ?? booting(since + this.timings.stop);
      case 'resizing': {
        const done = since + this.timings.resize;
        return now < done ? settled('resizing', done) : settled('off');
      }
      case 'running':
        return settled('running');
      case 'failed':
        return settled('failed');
      default:
        return settled('off');
    }
  }
}
