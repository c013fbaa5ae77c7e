/**
 * The compute driver: what the control plane asks of whatever runs instances (the simulator, QEMU).
 *
 * Every call is idempotent and returns quickly: a call starts a change on the machine, and `inspect`
 * reports where the machine is, with the time the current change is expected to settle. The reconciler
 * (resources/instances/reconciler.ts) drives a machine by calling, persisting, and coming back at that
 * time, so nothing is lost when the server dies mid-change. A driver keeps its own durable state.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { InstanceType } from '../resources/catalog/catalog.js';

/** What the driver needs to know about the machine it runs for an instance. */
export interface MachineSpec {
  /** The instance id; the machine's identity. */
  id: string;
  instanceType: InstanceType;
  image: string;
  region: string;
  userData: string | null;
  tags: Readonly<Record<string, string>>;
  /** The instance's root volume: snapshots and restores of it name this id (the qemu driver's root disk). */
  rootVolumeId?: string;
}

export type PowerState =
  /** No machine (never provisioned, or destroyed). */
  | 'absent'
  | 'off'
  | 'booting'
  | 'running'
  /** Graceful shutdown in progress. */
  | 'stopping'
  /** Changing the machine's type while it is off. */
  | 'resizing'
  /** The guest failed to boot. */
  | 'failed';

export interface MachineState {
  power: PowerState;
  /** The type the machine has now (after a finished resize: the new one). */
  instanceType: string | null;
  /** When the current change should settle; null when settled, or when it will not settle by itself (stuck). */
  settlesAt: Date | null;
  /** When the machine last began to boot; tells whether a reboot asked for at some time has happened. */
  bootStartedAt: Date | null;
  /** Why a `failed` machine failed, when the driver can say (a VM whose process died, a guest that never answered). */
  failure?: string | null;
}

export interface MetricSample {
  timestamp: string;
  cpu_percent: number;
  memory_used_bytes: number;
  memory_total_bytes: number;
  disk_read_bps: number;
  disk_write_bps: number;
  net_rx_bps: number;
  net_tx_bps: number;
  /** GPU types only. */
  gpu_percent?: number;
}

/** A machine's public transfer counters (ComputeDriver.publicTransfer): cumulative bytes. */
export interface PublicTransfer {
  bytesOut: number;
  bytesIn: number;
  /** One life of the counter (e.g. the boot it began with); null when the driver cannot tell. */
  epoch: string | null;
}

/**
 * Misbehaviour a driver can be asked for through a tag on the instance, for users testing their own
 * recovery code (docs/design.md, "Fault injection"); the service validates the tag's value against it.
 */
export interface FaultInjection {
  tag: string;
  /** The values the tag may take on an instance (faults of its root volume's snapshots included). */
  instanceFaults: readonly string[];
  /** The values the tag may take on a data volume. */
  volumeFaults: readonly string[];
}

/** What the driver needs to know about a block volume. */
export interface VolumeSpec {
  /** The volume id; the disk's identity. */
  id: string;
  region: string;
  /** The size the disk should have (a resize grows it to this). */
  sizeGb: number;
  /** Formatted with this on create; null: a raw disk. */
  filesystem: string | null;
}

/** Where a disk is to be attached. */
export interface VolumeAttachment {
  instanceId: string;
  /** The device the guest sees (`/dev/vdb`…). */
  deviceName: string;
}

export type DiskState =
  /** No disk (never created, or deleted and purged). */
  | 'absent'
  /** Allocating (and formatting, when a filesystem was asked for). */
  | 'creating'
  | 'available'
  | 'attaching'
  | 'attached'
  | 'detaching'
  /** Growing; an attached disk stays attached (online resize). */
  | 'resizing'
  | 'deleting'
  /** Deleted, the record not yet purged: a further deleteVolume purges it. */
  | 'deleted';

export interface VolumeState {
  state: DiskState;
  /** The size the disk has now (during a resize: the size it is growing to). */
  sizeGb: number | null;
  /** The attachment the disk has, or is taking or giving up. */
  attachment: VolumeAttachment | null;
  /** When the current change should settle; null when settled. */
  settlesAt: Date | null;
}

/** What the driver needs to know about a snapshot of a disk. */
export interface SnapshotSpec {
  /** The snapshot id; the copy's identity. */
  id: string;
  region: string;
  /** The disk copied (a volume id; for a root volume, the root volume's id). */
  sourceVolumeId: string;
  sizeGb: number;
  /** The tags of the source (the volume's, or the instance's for its root volume): fault tags are read here. */
  sourceTags: Readonly<Record<string, string>>;
}

export type SnapshotDiskState =
  | 'absent'
  | 'creating'
  | 'available'
  /** The copy could not be made; `error` says why. */
  | 'failed'
  | 'deleting'
  /** Deleted, the record not yet purged: a further deleteSnapshot purges it. */
  | 'deleted';

export interface SnapshotState {
  state: SnapshotDiskState;
  settlesAt: Date | null;
  error: string | null;
}

/** One restore of a snapshot over a disk: the volume and when the restore was asked for name it. */
export interface RestoreSpec {
  volumeId: string;
  snapshotId: string;
  /** The restore's identity among the restores of this volume. */
  startedAt: string;
  sizeGb: number;
}

export interface RestoreState {
  /** absent: not begun (or another restore of the volume is the latest); done: the disk holds the snapshot. */
  state: 'absent' | 'restoring' | 'done';
  settlesAt: Date | null;
}

/** What the driver needs to know about a VPN gateway (WireGuard). */
export interface GatewaySpec {
  /** The VPN id; the gateway's identity. */
  id: string;
  region: string;
  /** The public address and UDP port it listens on. */
  endpoint: { ip: string; port: number };
  /**
   * The gateway's wg-quick file (resources/vpns/wireguard.ts renderGatewayConfig): its private key, tunnel address,
   * port and one [Peer] per client. Secret: a driver must not log or store it in clear.
   */
  config: string;
}

export type GatewayPhase =
  /** No gateway (never provisioned, or destroyed and purged). */
  | 'absent'
  | 'provisioning'
  | 'active'
  | 'deleting'
  /** Destroyed, the record not yet purged: a further destroyGateway purges it. */
  | 'deleted';

export interface GatewayState {
  state: GatewayPhase;
  /** SHA-256 (hex) of the configuration the gateway runs, to tell whether peers changed since. */
  configDigest: string | null;
  /** When the current change should settle; null when settled. */
  settlesAt: Date | null;
}

/** One peer of a gateway as the gateway counts it (ComputeDriver.gatewayPeers). */
export interface GatewayPeerStats {
  /** When its last handshake completed; null: none yet. */
  lastHandshakeAt: Date | null;
  /** Bytes the gateway received from the peer and sent to it (since the gateway started). */
  receivedBytes: number;
  sentBytes: number;
}

/** Where a driver says how its serving goes (the server's logger). */
export interface DriverLog {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

/** What the control plane lends a driver that serves its guests itself (ComputeDriver.serve). */
export interface GuestHost {
  /**
   * The instance metadata service (resources/instances/metadata-server.ts), answering one request of the
   * guest of `instanceId` — which the driver knows from where the request came in, never from the request.
   */
  metadata(instanceId: string, request: IncomingMessage, response: ServerResponse): void;
  /** Whether a TCP connection from `address` to the instance's `port` is let in: its firewall's verdict. */
  allowsInbound(instanceId: string, port: number, address: string): Promise<boolean>;
  /** Has the instance looked at again, because its machine changed by itself (went away, powered off). */
  machineChanged(instanceId: string): Promise<void>;
  /** Has the VPN looked at again, because its gateway changed by itself (its process went away). */
  gatewayChanged(vpnId: string): Promise<void>;
  log: DriverLog;
}

/** What `nimbus admin network check` reports: rows of Nimbus's the store and the network disagree on. */
export interface NetworkDrift {
  /** Rows the store wants that the network lacks or holds otherwise, and rows it holds that it does not want. */
  missing: string[];
  differing: string[];
  extra: string[];
  /** Taps, host ports and VPN gateways on the bridge for no instance, VPC or VPN of the store. */
  strayInterfaces: string[];
}

/**
 * The job that makes an account's virtual network match the store (qemu with NIMBUS_NETWORK=ovn: its
 * VPCs), run by the job runner for one account at a time.
 */
export interface NetworkReconcile {
  run(accountId: string): Promise<null>;
  giveUp(accountId: string, error: unknown): Promise<void>;
}

export interface ComputeDriver {
  readonly name: string;
  /** null for a driver that runs real machines and takes no fault tags. */
  readonly faultInjection: FaultInjection | null;
  /** Creates the machine and its root disk from the image, powered off. */
  provision(spec: MachineSpec): Promise<void>;
  /** Boots an off machine; a booting or running one is left alone. */
  start(spec: MachineSpec): Promise<void>;
  /** Graceful shutdown, or with `force` an immediate power-off (from any state). */
  stop(spec: MachineSpec, options: { force: boolean }): Promise<void>;
  /** Graceful shutdown followed by a boot; only a running machine reboots. */
  reboot(spec: MachineSpec): Promise<void>;
  /** Changes an off machine to `spec.instanceType` (CPU, memory, and a root disk that only grows). */
  resize(spec: MachineSpec): Promise<void>;
  /** Powers off and deletes the machine and its root disk; absent machines are fine. */
  destroy(spec: MachineSpec): Promise<void>;
  inspect(spec: MachineSpec): Promise<MachineState>;
  /** Utilisation at one moment; zero when the machine is not running. */
  sampleMetrics(spec: MachineSpec, at: Date): Promise<MetricSample>;
  /**
   * What sampleMetrics answers for each of many machines at one moment, in one go (one query, one call
   * to a host): the metrics collector and the live streams sample every watched machine each round, and
   * a round trip per machine costs more than the sample. A machine whose sample failed maps to its error.
   * Optional: without it, callers ask sampleMetrics machine by machine (resources/metrics/sampling.ts).
   */
  sampleMetricsMany?(specs: readonly MachineSpec[], at: Date): Promise<Map<string, MetricSample | Error>>;

  /** Allocates the disk (formatting it when `spec.filesystem` is set); an existing disk is left alone. */
  createVolume(spec: VolumeSpec): Promise<void>;
  /** Attaches an available disk to the instance as `deviceName`; one attached or attaching is left alone. */
  attachVolume(spec: VolumeSpec, attachment: VolumeAttachment): Promise<void>;
  /** Detaches the disk from its instance (also when that machine is gone); a detached one is left alone. */
  detachVolume(spec: VolumeSpec): Promise<void>;
  /** Grows the disk to `spec.sizeGb`, attached or not; a disk of that size or larger is left alone. */
  resizeVolume(spec: VolumeSpec): Promise<void>;
  /** Deletes a detached disk; once deleted, a further call purges it; absent disks are fine. */
  deleteVolume(spec: VolumeSpec): Promise<void>;
  inspectVolume(spec: VolumeSpec): Promise<VolumeState>;

  /** Starts a gateway with `spec.config` at `spec.endpoint`; an existing gateway is left alone. */
  provisionGateway(spec: GatewaySpec): Promise<void>;
  /** Loads `spec.config` into an active gateway (peers added or removed); the same config is a no-op. */
  configureGateway(spec: GatewaySpec): Promise<void>;
  /** Stops and deletes the gateway; once deleted, a further call purges it; absent gateways are fine. */
  destroyGateway(spec: GatewaySpec): Promise<void>;
  inspectGateway(spec: GatewaySpec): Promise<GatewayState>;
  /**
   * The peers named (by public key) as the gateway `gatewayId` counts them: the real gateway's figures,
   * or the simulator's. A peer the gateway does not know, or a gateway not running, is left out.
   */
  gatewayPeers(gatewayId: string, publicKeys: readonly string[]): Promise<Map<string, GatewayPeerStats>>;

  /** Copies the source disk into a snapshot (point in time: the copy is of the disk as it is now); idempotent. */
  createSnapshot(spec: SnapshotSpec): Promise<void>;
  /** Deletes the snapshot; once deleted, a further call purges it; absent ones are fine. */
  deleteSnapshot(spec: SnapshotSpec): Promise<void>;
  inspectSnapshot(spec: SnapshotSpec): Promise<SnapshotState>;
  /**
   * Writes the snapshot over the volume's disk (a data volume, or an instance's root disk while the
   * machine is off); the same restore asked again is left alone. The snapshot must be available.
   */
  restoreVolume(spec: RestoreSpec): Promise<void>;
  inspectRestore(spec: RestoreSpec): Promise<RestoreState>;

  /**
   * Cumulative bytes each running machine has sent to and received from PUBLIC addresses (not its VPC's
   * private block, not link-local), for the `data_transfer` meter (resources/billing/transfer.ts). A
   * counter may start again from zero (the driver or the VM restarted): `epoch` names one life of it when
   * the driver can tell (a boot), and billing takes a changed epoch or a lower reading as a new base.
   * Machines it has no counter for are left out (no bytes are billed for them). Optional: a driver without
   * it bills no data transfer.
   */
  publicTransfer?(specs: readonly MachineSpec[]): Promise<Map<string, PublicTransfer>>;

  /**
   * Where to SSH into the machine, for a driver that forwards a port of its own (qemu: NIMBUS_HOST and the
   * machine's port); null (or absent) for the instance's public address and port 22.
   */
  sshEndpoint?(instanceId: string): { host: string; port: number } | null;
  /** The images the driver can boot, for a driver whose catalogue is what is installed (qemu); absent: all. */
  availableImages?(): string[];

  /**
   * Starts what a driver whose guests are real serves them itself (qemu: each guest's metadata socket and
   * forwarded SSH port, and the watcher of its VMs). The server calls it once, after the metadata service
   * is ready; operator commands never do. Throws ConfigError when the driver cannot serve as configured.
   */
  serve?(host: GuestHost): Promise<void>;
  /** Stops whatever the driver runs in this process (its servers, its watcher). */
  close?(): Promise<void>;

  /**
   * A driver that keeps a virtual network per account: the job that reconciles one account's, which the
   * composition root registers and queues when the account's instances change; null or absent: none.
   */
  readonly networkReconcile?: NetworkReconcile | null;
  /**
   * Where the driver's network differs from what the store wants (`nimbus admin network check`); null
   * or absent for a driver that keeps no network of its own.
   */
  networkDrift?(): Promise<NetworkDrift | null>;
}
