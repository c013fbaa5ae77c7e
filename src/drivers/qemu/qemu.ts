/**
 * The QEMU compute driver (NIMBUS_DRIVER=qemu): every instance a virtual machine on this host, behind the
 * same interface as the simulator (driver.ts). Machines (machines.ts), disks and snapshots (disks.ts),
 * the guests' metadata sockets (metadata-sockets.ts) and metrics (metrics.ts) each keep their part; this
 * class puts them behind ComputeDriver and watches the VMs.
 *
 * The watcher looks at every VM every WATCH_MS: a QEMU process that went away without being asked (killed,
 * crashed), or a guest that powered itself off, is reported through the host's `machineChanged`, which
 * the composition root turns into a look by the instance reconciler — so the instance shows it within
 * seconds (`error` with an `instance.error` event, or `stopped`; docs/api.md). On OVN it also looks at
 * the VPN gateways every 5 s: one whose wireguard-go went away is reported through `gatewayChanged`,
 * and the VPN's job starts it again with its configuration.
 *
 * VPN gateways: with NIMBUS_NETWORK=ovn each is real, wireguard-go in a namespace of its own on the
 * account's VPC (drivers/ovn/vpn-gateways.ts); with the user-mode network they stay simulated (the
 * simulator's gateways, in the same store), since there is no network of Nimbus's own to attach them to.
 *
 * One Nimbus process drives the VMs of a data dir; replicas sharing a store need the simulator.
 *
 * With NIMBUS_NETWORK=ovn the VMs' NICs are taps on OVN (drivers/ovn/network.ts): `serve` starts the
 * embedded OVN (or connects to the configured central) and reconciles every VPC before the jobs run,
 * the per-account VPC job (`networkReconcile`, through the driver interface) keeps them matching the store, and `close` stops the daemons.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ConfigError, type NetworkConfig } from '../../platform/config.js';
import type { Clock } from '../../platform/domain/clock.js';
import { configDigest } from '../../resources/vpns/wireguard.js';
import type {
  ComputeDriver,
  GatewayPeerStats,
  GatewaySpec,
  GatewayState,
  GuestHost,
  MachineSpec,
  MachineState,
  MetricSample,
  NetworkDrift,
  NetworkReconcile,
  PublicTransfer,
  RestoreSpec,
  RestoreState,
  SnapshotSpec,
  SnapshotState,
  VolumeAttachment,
  VolumeSpec,
  VolumeState,
} from '../driver.js';
import { missingOvnPrograms } from '../ovn/daemons.js';
import { VpcMetadataPath } from '../ovn/metadata-path.js';
import { OvnNetwork } from '../ovn/network.js';
import { SnatCounters } from '../ovn/snat-transfer.js';
import { type ApplyResult, diffRows, readRows, vpcKey, vpcRows } from '../ovn/topology.js';
import { TransferCounters } from '../ovn/transfer-flows.js';
import { type PublicLink, plugUplink, type UplinkState, unplugUplink } from '../ovn/uplink.js';
import { readVpcState, type VpcInstanceReader, vpcsOf } from '../ovn/vpcs.js';
import { OvnGateways } from '../ovn/vpn-gateways.js';
import { SimulatedGatewayDriver, SimulatedGateways } from '../simulator/gateways.js';
import { type AnyDb, migrateSimulatorTables } from '../simulator/machines.js';
import { QemuDisks } from './disks.js';
import { QemuPaths } from './files.js';
import { listImages } from './images.js';
import { kvmUsableRemembered } from './kvm-verdict.js';
import { type GuestIdentity, type GuestTaps, QemuMachines } from './machines.js';
import { MetadataSockets } from './metadata-sockets.js';
import { QemuMetrics } from './metrics.js';
import { SshProxies } from './ssh-proxy.js';
import { describeMissing, missingPrograms, type ProgramNeed } from './tools.js';

const WATCH_MS = 1000;
/** Gateways are looked at every 5th round (each look runs `wg` once per gateway). */
const GATEWAY_LOOK_EVERY = 5;
export const QEMU_BINARY = 'qemu-system-x86_64';

/**
 * Every program the driver runs, checked at start: one found missing later would fail a create minutes
 * in (the seed ISO is made after the disks) and leave the instance in `error`.
 */
export const DRIVER_PROGRAMS: readonly ProgramNeed[] = [
  { programs: [QEMU_BINARY], debianPackage: 'qemu-system-x86' },
  { programs: ['qemu-img'], debianPackage: 'qemu-utils' },
  // One per guest connection to the metadata service (guestfwd … cmd:socat).
  { programs: ['socat'], debianPackage: 'socat' },
  // The seed ISO: genisoimage, else xorriso with the same options (seed.ts).
  { programs: ['genisoimage', 'xorriso'], debianPackage: 'genisoimage' },
  // Formatting volumes (disks.ts).
  { programs: ['truncate'], debianPackage: 'coreutils' },
  { programs: ['mke2fs'], debianPackage: 'e2fsprogs' },
  { programs: ['mkfs.xfs'], debianPackage: 'xfsprogs' },
];

export interface QemuDriverOptions {
  db: AnyDb;
  clock: Clock;
  dataDir: string;
  imageDir: string;
  /** Where forwarded SSH ports listen (NIMBUS_HOST) and the range they come from. */
  ssh: { host: string; ports: { first: number; last: number } };
  memoryScale: number;
  accel: 'auto' | 'kvm' | 'tcg';
  /** The hostname and SSH public keys the guest is given (read from the store by the composition root). */
  identity: (spec: MachineSpec) => Promise<GuestIdentity>;
  /** NIMBUS_NETWORK; with `ovn`, the instances the VPCs are made of (read from the store). */
  network?: NetworkConfig;
  vpcInstances?: VpcInstanceReader;
  /** With `ovn` and NIMBUS_PUBLIC_UPLINK: the public link the VPCs' routers stand on (drivers/ovn/uplink.ts). */
  publicLink?: PublicLink;
}

/** A setting or a host the driver cannot run with: the process refuses to start, saying why. */
export class QemuDriverError extends ConfigError {}

export class QemuDriver extends SimulatedGatewayDriver implements ComputeDriver {
  readonly name = 'qemu';
  readonly faultInjection = null;
  readonly accel: 'kvm' | 'tcg';
  private readonly paths: QemuPaths;
  private readonly machines: QemuMachines;
  private readonly disks: QemuDisks;
  private readonly metadata = new MetadataSockets();
  private readonly proxies = new SshProxies();
  private readonly metrics = new QemuMetrics();
  private readonly imageDir: string;
  private watcher: NodeJS.Timeout | null = null;
  private watching = false;
  /** The watcher's rounds, so gateways are looked at every GATEWAY_LOOK_EVERY-th. */
  private looks = 0;
  private host: GuestHost | null = null;
  private readonly networkConfig: NetworkConfig;
  private readonly vpcInstances: VpcInstanceReader | null;
  private readonly dataDir: string;
  /** The OVN network while serving with NIMBUS_NETWORK=ovn. */
  private network: OvnNetwork | null = null;
  /** How guests on OVN reach the metadata service (drivers/ovn/metadata-path.ts), while serving. */
  private metadataPath: VpcMetadataPath | null = null;
  private readonly publicLink: PublicLink | undefined;
  /** How the uplink was before serve plugged it (put back at close). */
  private uplinkBefore: UplinkState | null = null;
  /** The public IPs' byte counters on the provider bridge (drivers/ovn/transfer-flows.ts), while serving with a link. */
  private transfer: TransferCounters | null = null;
  /** The real VPN gateways on OVN, once serve started the network. */
  private ovnGateways: OvnGateways | null = null;
  /** The router policies' counters of instances without a public IP (drivers/ovn/snat-transfer.ts). */
  private snatTransfer: SnatCounters | null = null;

  /**
   * Checks every program it runs is installed (DRIVER_PROGRAMS) and picks KVM or TCG. VMs of an earlier run are found by their records (pid and
   * command line); `serve` opens their metadata sockets again.
   */
  static async open(options: QemuDriverOptions): Promise<QemuDriver> {
    const ovn = options.network?.mode === 'ovn';
    const missing = [
      ...missingPrograms(DRIVER_PROGRAMS),
      // The packages of the network named apart, so that each is installed once.
      ...(ovn ? missingOvnPrograms() : []),
    ];
    if (missing.length > 0) {
      throw new QemuDriverError(
        `NIMBUS_DRIVER=qemu${ovn ? ' NIMBUS_NETWORK=ovn' : ''} needs programs that are not installed: ${describeMissing(missing)}`,
      );
    }
    // KVM is probed by booting a built image's kernel (process.ts).
    const kernel = [...listImages(options.imageDir).values()].flatMap((i) =>
      i.kind === 'nimbus' ? [i.kernel] : [],
    )[0];
    const accel =
      options.accel === 'auto'
        ? (await kvmUsableRemembered(QEMU_BINARY, kernel ?? null, new QemuPaths(options.dataDir).kvmVerdict))
          ? 'kvm'
          : 'tcg'
        : options.accel;
    await migrateSimulatorTables(options.db);
    return new QemuDriver(options, accel);
  }

  private constructor(options: QemuDriverOptions, accel: 'kvm' | 'tcg') {
    // Real time: a VPN gateway here is a record, as in the simulator at its own pace.
    super(new SimulatedGateways(options.db, options.clock, 1));
    this.accel = accel;
    this.imageDir = options.imageDir;
    this.dataDir = options.dataDir;
    this.networkConfig = options.network ?? { mode: 'user' };
    this.vpcInstances = options.vpcInstances ?? null;
    this.publicLink = this.networkConfig.mode === 'ovn' ? options.publicLink : undefined;
    if (this.networkConfig.mode === 'ovn' && !this.vpcInstances) {
      throw new QemuDriverError('NIMBUS_NETWORK=ovn: the driver was given no reader of the instances');
    }
    this.paths = new QemuPaths(options.dataDir);
    const now = () => options.clock.now();
    this.machines = new QemuMachines({
      paths: this.paths,
      imageDir: options.imageDir,
      binary: QEMU_BINARY,
      accel,
      memoryScale: options.memoryScale,
      ssh: options.ssh,
      metadata: this.metadata,
      proxies: this.proxies,
      traffic: this.metrics.traffic,
      taps: this.networkConfig.mode === 'ovn' ? this.taps() : null,
      identity: options.identity,
      attachedDisks: (id) => this.disks.attachedTo(id),
      pendingRoot: (rootVolumeId) => this.disks.pendingRoot(rootVolumeId),
      now,
    });
    this.disks = new QemuDisks(this.paths, this.machines, now);
  }

  /** The VMs' taps on OVN: usable once `serve` has started the network. */
  private taps(): GuestTaps {
    const network = () => {
      if (!this.network) throw new QemuDriverError('NIMBUS_NETWORK=ovn: the network is not started (serve)');
      return this.network;
    };
    return {
      plug: (id) => network().plug(id),
      unplug: async (id) => {
        // An admin command (no network started) never runs a VM, nor has one to unplug.
        if (this.network) await this.network.unplug(id);
      },
      connectSsh: async (id) => {
        const instance = this.network ? await this.vpcInstances!.find(id) : null;
        if (!instance || !this.network) return null;
        const vpc = { accountId: instance.account_id, region: instance.region };
        return this.network.connect(vpc, instance.private_ip, 22);
      },
    };
  }

  private ovnDir(): string {
    return path.join(this.dataDir, 'ovn');
  }

  /**
   * The per-account VPC reconcile (drivers/ovn/vpcs.ts), the handler of the `vpc` job; null with the
   * user-mode network.
   */
  get networkReconcile(): NetworkReconcile | null {
    if (this.networkConfig.mode !== 'ovn') return null;
    return {
      run: async (accountId) => {
        if (!this.network) throw new QemuDriverError('NIMBUS_NETWORK=ovn: the network is not started yet');
        await this.network.reconcile(
          accountId,
          await readVpcState(this.vpcInstances!, accountId),
          this.publicLink,
        );
        await this.syncTransferCounters();
        return null;
      },
      giveUp: async (accountId, error) => {
        this.host?.log.warn(
          { err: error, account: accountId },
          'OVN: the VPC reconcile gave up; the next change or restart tries again',
        );
      },
    };
  }

  /** Every VPC made to match the store now (at serve: a restart, a wiped database). */
  private async reconcileAll(): Promise<ApplyResult> {
    const applied = await this.network!.reconcile(
      null,
      await readVpcState(this.vpcInstances!, null),
      this.publicLink,
    );
    await this.syncTransferCounters();
    return applied;
  }

  /**
   * The counting flows made to match the NATs just applied, so an address assigned counts from now. A
   * failure only delays that (the VPC is applied): the transfer collector's next reading syncs again.
   */
  private async syncTransferCounters(): Promise<void> {
    await this.transfer?.sync().catch((error: unknown) => {
      this.host?.log.warn({ err: error }, 'OVN: the public transfer counters could not be synced');
    });
  }

  /**
   * Each instance's bytes to and from public addresses: an instance with a public IP from the provider
   * bridge's counters of that IP (drivers/ovn/transfer-flows.ts), one going out through its router's own
   * address from its router policies' counters (drivers/ovn/snat-transfer.ts); none without a public link
   * (the user-mode network reaches nothing public). An instance with no counter yet is left out; one with
   * both (its public IP just assigned or taken, the next reconcile not done) is read from the bridge.
   */
  async publicTransfer(specs: readonly MachineSpec[]): Promise<Map<string, PublicTransfer>> {
    if (!this.transfer) return new Map();
    const ids = specs.map((spec) => spec.id);
    const bridge = await this.transfer.read(ids);
    const unnated = ids.filter((id) => !bridge.has(id));
    const viaSnat =
      this.snatTransfer && unnated.length > 0 ? await this.snatTransfer.read(unnated) : new Map();
    return new Map([...viaSnat, ...bridge]);
  }

  /**
   * What differs between the VPCs the store describes and the rows OVN holds (and the interfaces on this
   * host's bridge), for `nimbus admin network check`; null with the user-mode network. Reads only: the
   * daemons are the server's, neither started nor stopped here.
   */
  async networkDrift(): Promise<NetworkDrift | null> {
    if (this.networkConfig.mode !== 'ovn') return null;
    const network = OvnNetwork.attach({ dir: this.ovnDir(), central: this.networkConfig.central });
    try {
      const state = await readVpcState(this.vpcInstances!, null);
      const { instances } = state;
      const existing = await readRows(network.nb).catch((error: unknown) => {
        throw new QemuDriverError(
          `network check: cannot read OVN's northbound database (${(error as Error).message}); with the embedded OVN the server must be running`,
        );
      });
      // Read only: a VPC whose router holds no public address yet is shown without its public side.
      const desired = (await network.desiredVpcs(null, state, this.publicLink, false)).flatMap(vpcRows);
      const changes = diffRows(desired, existing);
      const name = (change: { table: string; key: string }) => `${change.table} ${change.key}`;
      const ids = new Set(instances.map((i) => i.id));
      const vpcs = new Set(vpcsOf(instances, undefined, state.vpns).map(vpcKey));
      const vpns = new Set(state.vpns.map((vpn) => vpn.id));
      return {
        missing: changes.filter((c) => c.op === 'insert').map(name),
        differing: changes.filter((c) => c.op === 'update').map(name),
        extra: changes.filter((c) => c.op === 'delete').map(name),
        strayInterfaces: [
          ...(await network.instanceTaps())
            .filter((t) => !ids.has(t.instanceId))
            .map((t) => `tap ${t.name} (${t.instanceId})`),
          ...(await network.hostPortInterfaces())
            .filter((h) => !vpcs.has(h.vpc))
            .map((h) => `host port ${h.name} (${h.vpc})`),
          ...(await network.gatewayInterfaces())
            .filter((g) => !vpns.has(g.vpnId))
            .map((g) => `VPN gateway ${g.name} (${g.vpnId})`),
        ],
      };
    } finally {
      network.nb.close();
    }
  }

  /** The images present in the image dir: with this driver, the catalogue's images are those. */
  availableImages(): string[] {
    return [...listImages(this.imageDir).keys()].sort();
  }

  /** With a public link a guest answers SSH on its public IP (null: the API shows it, port 22). */
  sshEndpoint(instanceId: string): { host: string; port: number } | null {
    if (this.publicLink) return null;
    return this.machines.sshEndpoint(instanceId);
  }

  /**
   * Serving (the server only; operator commands never do): it refuses to start without an image to boot,
   * then puts the metadata app behind every guest's socket and the firewall's verdict in front of every
   * SSH port (ssh-proxy.ts), opens the sockets and ports of machines from an earlier run again (re-adopting
   * VMs still running) and starts the watcher, which has an instance whose VM went away or powered itself
   * off looked at again.
   */
  async serve(host: GuestHost): Promise<void> {
    const images = this.availableImages();
    if (images.length === 0) {
      throw new QemuDriverError(
        `NIMBUS_DRIVER=qemu: no guest image in ${this.imageDir}; build one with "nimbus admin images build"`,
      );
    }
    if (this.networkConfig.mode === 'ovn' && !this.network) {
      const central = this.networkConfig.central;
      const metadataPath = new VpcMetadataPath(
        ({ accountId, region }, ip) => this.vpcInstances!.atAddress(accountId, region, ip),
        (error) => host.log.warn({ err: error }, 'metadata: a guest connection could not be looked up'),
      );
      metadataPath.setHandler((instanceId, request, response) =>
        host.metadata(instanceId, request, response),
      );
      this.metadataPath = metadataPath;
      const network = await OvnNetwork.start({
        dir: this.ovnDir(),
        central,
        onGuestConnection: (place, socket) => metadataPath.accept(place, socket),
        onRestart: (daemon, error) =>
          error
            ? host.log.warn({ daemon, err: error }, 'OVN: a daemon died and could not be started again')
            : host.log.warn({ daemon }, 'OVN: a daemon died and was started again'),
      });
      this.network = network;
      // Gateways still running from an earlier run are found as they are (nothing of them is in memory).
      this.ovnGateways = new OvnGateways(network.endpoints, path.join(this.ovnDir(), 'gateways'));
      try {
        if (this.publicLink) {
          const bridge = await this.plugPublicLink(this.network, this.publicLink);
          this.transfer = new TransferCounters(this.network.endpoints, bridge, this.network.nb);
          this.snatTransfer = new SnatCounters(this.network.endpoints, this.network.nb);
        }
        const applied = await this.reconcileAll();
        host.log.info(
          {
            ...applied,
            embedded: central === null,
            bridge: this.network.endpoints.integrationBridge,
            uplink: this.publicLink?.uplink ?? null,
          },
          'qemu driver: OVN network up, every VPC reconciled with the store',
        );
      } catch (error) {
        await this.unplugPublicLink(this.network).catch(() => {});
        await this.network.close();
        this.network = null;
        this.transfer = null;
        this.ovnGateways = null;
        this.snatTransfer = null;
        throw error;
      }
    }
    this.metadata.setHandler((instanceId, request, response) => host.metadata(instanceId, request, response));
    this.proxies.setCheck((instanceId, port, address) => host.allowsInbound(instanceId, port, address));
    const adopted = await this.machines.adopt();
    this.host = host;
    if (!this.watcher) {
      this.watcher = setInterval(() => void this.look(), WATCH_MS);
      this.watcher.unref();
    }
    host.log.info(
      { accel: this.accel, images, adopted },
      'qemu driver: serving VMs (re-adopted those still running)',
    );
  }

  /**
   * The upstream routers' addresses held where the pools would hand them out, then the uplink plugged
   * into the provider bridge. An uplink that is no interface of this host refuses the start, naming it.
   * How the interface was is kept in `<data dir>/ovn/uplink.json` until it is put back, so a server
   * killed with -9 and started again still knows it (the interface is plugged by then).
   */
  private async plugPublicLink(network: OvnNetwork, link: PublicLink): Promise<string> {
    for (const [region, gateway] of Object.entries(link.gateways)) {
      await link.routers.holdGateway(region, gateway).catch((error: unknown) => {
        throw new QemuDriverError((error as Error).message);
      });
    }
    try {
      const { bridge, before } = await plugUplink(network.endpoints, link.uplink);
      const kept = this.keptUplinkState(link.uplink);
      this.uplinkBefore = kept ?? before;
      if (!kept) {
        mkdirSync(this.ovnDir(), { recursive: true });
        writeFileSync(this.uplinkStateFile(), JSON.stringify({ uplink: link.uplink, before }), {
          mode: 0o600,
        });
      }
      return bridge;
    } catch (error) {
      throw new QemuDriverError(`NIMBUS_PUBLIC_UPLINK=${link.uplink}: ${(error as Error).message}`);
    }
  }

  private uplinkStateFile(): string {
    return path.join(this.ovnDir(), 'uplink.json');
  }

  private keptUplinkState(uplink: string): UplinkState | null {
    try {
      const kept = JSON.parse(readFileSync(this.uplinkStateFile(), 'utf8')) as {
        uplink: string;
        before: UplinkState;
      };
      return kept.uplink === uplink ? kept.before : null;
    } catch {
      return null;
    }
  }

  /** The uplink out of OVS and as it was before serve; the VPCs' rows stay (the next serve converges). */
  private async unplugPublicLink(network: OvnNetwork): Promise<void> {
    if (!this.publicLink || !this.uplinkBefore) return;
    await unplugUplink(network.endpoints, this.publicLink.uplink, this.uplinkBefore);
    this.uplinkBefore = null;
    rmSync(this.uplinkStateFile(), { force: true });
  }

  async close(): Promise<void> {
    if (this.watcher) clearInterval(this.watcher);
    this.watcher = null;
    await this.metadata.closeAll();
    this.metadataPath?.close();
    await this.proxies.closeAll();
    await this.metrics.traffic.closeAll();
    if (this.network) {
      await this.unplugPublicLink(this.network).catch((error: unknown) => {
        this.host?.log.warn({ err: error }, 'qemu driver: could not unplug the public uplink');
      });
    }
    // The VPN gateways keep running: a restarted Nimbus re-adopts their tunnels as they are.
    await this.network?.close();
    this.network = null;
    this.transfer = null;
    this.ovnGateways = null;
    this.snatTransfer = null;
  }

  /** The real gateways with NIMBUS_NETWORK=ovn (serve must have started the network); null: simulated. */
  private realGateways(): OvnGateways | null {
    if (this.networkConfig.mode !== 'ovn') return null;
    if (!this.ovnGateways)
      throw new QemuDriverError('NIMBUS_NETWORK=ovn: the network is not started (serve)');
    return this.ovnGateways;
  }

  override provisionGateway(spec: GatewaySpec): Promise<void> {
    return this.realGateways()?.provision(spec) ?? super.provisionGateway(spec);
  }

  override configureGateway(spec: GatewaySpec): Promise<void> {
    return this.realGateways()?.configure(spec) ?? super.configureGateway(spec);
  }

  override destroyGateway(spec: GatewaySpec): Promise<void> {
    return this.realGateways()?.destroy(spec) ?? super.destroyGateway(spec);
  }

  override inspectGateway(spec: GatewaySpec): Promise<GatewayState> {
    return this.realGateways()?.inspect(spec, configDigest) ?? super.inspectGateway(spec);
  }

  override async gatewayPeers(
    gatewayId: string,
    publicKeys: readonly string[],
  ): Promise<Map<string, GatewayPeerStats>> {
    const real = this.realGateways();
    if (!real) return super.gatewayPeers(gatewayId, publicKeys);
    const wanted = new Set(publicKeys);
    const stats = new Map<string, GatewayPeerStats>();
    for (const peer of (await real.peers(gatewayId)) ?? []) {
      if (!wanted.has(peer.publicKey)) continue;
      stats.set(peer.publicKey, {
        lastHandshakeAt: peer.latestHandshake > 0 ? new Date(peer.latestHandshake * 1000) : null,
        receivedBytes: peer.rxBytes,
        sentBytes: peer.txBytes,
      });
    }
    return stats;
  }

  private async look(): Promise<void> {
    if (this.watching || !this.host) return;
    this.watching = true;
    try {
      for (const record of this.machines.lost()) this.changed(record.id);
      for (const record of await this.machines.poweredOff()) this.changed(record.id);
      this.looks += 1;
      if (this.ovnGateways && this.looks % GATEWAY_LOOK_EVERY === 0) {
        for (const vpnId of await this.ovnGateways.broken()) this.gatewayChanged(vpnId);
      }
    } catch {
      // the next look tries again
    } finally {
      this.watching = false;
    }
  }

  /** Has the control plane look at the VPN again; a failure to ask is logged, and the next look asks again. */
  private gatewayChanged(vpnId: string): void {
    const host = this.host;
    host?.gatewayChanged(vpnId).catch((error: unknown) => {
      host.log.warn({ err: error, vpn: vpnId }, 'could not look at a VPN gateway again');
    });
  }

  /** Has the control plane look at the instance again; a failure to ask is logged, and the next look asks again. */
  private changed(instanceId: string): void {
    const host = this.host;
    host?.machineChanged(instanceId).catch((error: unknown) => {
      host.log.warn({ err: error, instance: instanceId }, 'could not look at a VM again');
    });
  }

  provision(spec: MachineSpec): Promise<void> {
    return this.machines.provision(spec);
  }

  start(spec: MachineSpec): Promise<void> {
    return this.machines.start(spec);
  }

  stop(spec: MachineSpec, options: { force: boolean }): Promise<void> {
    return this.machines.stop(spec, options.force);
  }

  /** A graceful power-off; the reconciler boots the machine again once it is off. */
  reboot(spec: MachineSpec): Promise<void> {
    return this.machines.stop(spec, false);
  }

  resize(spec: MachineSpec): Promise<void> {
    return this.machines.resize(spec);
  }

  async destroy(spec: MachineSpec): Promise<void> {
    await this.machines.destroy(spec);
    if (spec.rootVolumeId) this.disks.forgetRoot(spec.rootVolumeId);
  }

  inspect(spec: MachineSpec): Promise<MachineState> {
    return this.machines.inspect(spec);
  }

  async sampleMetrics(spec: MachineSpec, at: Date): Promise<MetricSample> {
    const record = this.machines.record(spec.id);
    const qmpSocket = this.machines.qmpSocket(spec.id);
    const memoryBytes = this.machines.memoryMb(spec.instanceType.memory_gb) * 1024 * 1024;
    const vm =
      record?.pid && qmpSocket && record.sshReadyAt
        ? { pid: record.pid, qmpSocket, vcpus: spec.instanceType.vcpus, memoryBytes }
        : null;
    const sample = await this.metrics.sample(spec.id, vm, at);
    return vm ? sample : { ...sample, memory_total_bytes: memoryBytes };
  }

  createVolume(spec: VolumeSpec): Promise<void> {
    return this.disks.createVolume(spec);
  }

  attachVolume(spec: VolumeSpec, attachment: VolumeAttachment): Promise<void> {
    return this.disks.attachVolume(spec, attachment);
  }

  detachVolume(spec: VolumeSpec): Promise<void> {
    return this.disks.detachVolume(spec);
  }

  resizeVolume(spec: VolumeSpec): Promise<void> {
    return this.disks.resizeVolume(spec);
  }

  deleteVolume(spec: VolumeSpec): Promise<void> {
    return this.disks.deleteVolume(spec);
  }

  inspectVolume(spec: VolumeSpec): Promise<VolumeState> {
    return this.disks.inspectVolume(spec);
  }

  createSnapshot(spec: SnapshotSpec): Promise<void> {
    return this.disks.createSnapshot(spec);
  }

  deleteSnapshot(spec: SnapshotSpec): Promise<void> {
    return this.disks.deleteSnapshot(spec);
  }

  inspectSnapshot(spec: SnapshotSpec): Promise<SnapshotState> {
    return this.disks.inspectSnapshot(spec);
  }

  restoreVolume(spec: RestoreSpec): Promise<void> {
    return this.disks.restoreVolume(spec);
  }

  inspectRestore(spec: RestoreSpec): Promise<RestoreState> {
    return this.disks.inspectRestore(spec);
  }
}
