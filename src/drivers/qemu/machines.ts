/**
 * The VMs of the QEMU driver: one QEMU process per running instance, found again by its record.
 *
 * `machines/<id>/machine.json` (files.ts) holds what the driver asked for and what it needs to find the
 * VM: the pid QEMU wrote, the forwarded SSH port, the type the disk and command line were made for, when
 * the current boot began, whether SSH has answered during it, when a graceful stop was asked for, and why
 * the machine failed, if it did. Where the machine is (`inspect`) is worked out from that record and the
 * live process each time it is asked, and every call only starts a change and records it; so a Nimbus
 * killed at any point, restarted, finds each VM where it is and carries on, and never boots a VM twice
 * (a pid whose command line is that VM's is that VM, whoever started it).
 *
 * Powers: no record → absent; a live process → booting until the guest's SSH server answers on the
 * forwarded port, or on its private address from its VPC's host namespace with NIMBUS_NETWORK=ovn
 * (then running), stopping while an ACPI power-down is under way (sent again every few
 * seconds, forced after STOP_TIMEOUT_MS); no process → off, or failed when the process went away
 * without being asked (killed, crashed) or SSH never answered within BOOT_TIMEOUT_MS. A guest that powers
 * itself off leaves QEMU paused in `shutdown` (-no-shutdown): that is an orderly off.
 */
import { chmodSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { macAddressFor } from '../../resources/addresses/addresses.js';
import type { MachineSpec, MachineState, PowerState } from '../driver.js';
import { qemuArgs, type VmLayout } from './command-line.js';
import { exists, privateDir, type QemuPaths, readRecord, removeFile, writeRecord } from './files.js';
import { builtImage, type GuestImage, listImages } from './images.js';
import type { MetadataSockets } from './metadata-sockets.js';
import type { NetTraffic } from './metrics.js';
import {
  answersAsSsh,
  isOurProcess,
  kill,
  portFree,
  readPidFile,
  startDaemonized,
  waitForExit,
} from './process.js';
import { withQmp } from './qmp.js';
import { PLAIN_SEED_FILES, writeSeed } from './seed.js';
import type { SshProxies } from './ssh-proxy.js';
import { run } from './tools.js';

export const BOOT_TIMEOUT_MS = 300_000;
export const STOP_TIMEOUT_MS = 60_000;
/** How often a graceful stop presses the power button again (a guest still booting ignores it). */
const POWER_BUTTON_REPEAT_MS = 5_000;
/** How soon the reconciler should look again while a machine boots or stops. */
const POLL_MS = 500;

export interface MachineRecord {
  id: string;
  rootVolumeId: string | null;
  image: string;
  /** The built image's version the root disk stands on; null for a cloud image. */
  imageVersion: string | null;
  instanceType: string;
  /** The public SSH port (Nimbus's proxy, firewall in front: ssh-proxy.ts). */
  sshPort: number;
  /** The loopback port QEMU forwards to the guest's port 22, chosen at each boot. */
  sshInternalPort: number | null;
  pid: number | null;
  bootStartedAt: string | null;
  sshReadyAt: string | null;
  stopRequestedAt: string | null;
  powerButtonAt: string | null;
  failure: string | null;
  createdAt: string;
}

/** What the guest is told about itself through its seed. */
export interface GuestIdentity {
  hostname: string;
  sshKeys: string[];
}

/**
 * The NICs of VMs on a network Nimbus plugs them into (NIMBUS_NETWORK=ovn: drivers/ovn/network.ts),
 * instead of QEMU's user-mode network.
 */
export interface GuestTaps {
  /** Before QEMU starts: the tap it opens for the guest's NIC, made or found (a restart keeps it). */
  plug(instanceId: string): Promise<string>;
  /** After QEMU has gone: the tap and its switch port removed; absent ones are fine. */
  unplug(instanceId: string): Promise<void>;
  /** A stream to the guest's TCP port 22, or null when the guest cannot be reached now. */
  connectSsh(instanceId: string): Promise<Duplex | null>;
}

export interface MachineOptions {
  paths: QemuPaths;
  imageDir: string;
  binary: string;
  accel: 'kvm' | 'tcg';
  memoryScale: number;
  ssh: { host: string; ports: { first: number; last: number } };
  metadata: MetadataSockets;
  proxies: SshProxies;
  /** null: QEMU's user-mode network, the guest's SSH forwarded to a loopback port. */
  taps: GuestTaps | null;
  /** Where the frames of each VM's NIC are counted (metrics.ts). */
  traffic: NetTraffic;
  identity: (spec: MachineSpec) => Promise<GuestIdentity>;
  /** The data disks attached to an instance, to put on its command line at boot. */
  attachedDisks: (instanceId: string) => { id: string; file: string; deviceName: string }[];
  /** A root disk restored from a snapshot before the machine existed (disks.ts), to take as its root. */
  pendingRoot: (rootVolumeId: string) => string | null;
  now: () => Date;
}

export class QemuMachines {
  /** The records, as on disk (kept in memory for the sync look-ups: SSH endpoints, the watcher). */
  private readonly records = new Map<string, MachineRecord>();
  /** Whether this process serves the VMs (metadata sockets, SSH ports): the server, not an admin command. */
  private serving = false;
  private readonly sshPorts: PortChooser;

  constructor(private readonly o: MachineOptions) {
    this.sshPorts = new PortChooser(o.ssh.host, o.ssh.ports, () => this.all().map((r) => r.sshPort));
    for (const id of o.paths.machineIds()) {
      const record = readRecord<MachineRecord>(o.paths.machineFile(id, 'machine.json'));
      if (record) this.records.set(id, record);
    }
  }

  /**
   * Serves every machine's metadata socket and SSH port (again, after a restart: the VMs may still be
   * running); returns those found running.
   */
  async adopt(): Promise<string[]> {
    this.serving = true;
    const adopted: string[] = [];
    for (const found of this.records.values()) {
      const record = this.adoptOrphan(found);
      await this.serve(record.id);
      if (this.alive(record)) adopted.push(record.id);
    }
    return adopted;
  }

  /** The machine's metadata socket and public SSH port, when this process serves. */
  private async serve(id: string): Promise<void> {
    if (!this.serving) return;
    await this.o.metadata.open(id, this.o.paths.metadataSocket(id));
    await this.o.traffic.open(id, this.trafficSockets(id));
    const record = this.records.get(id);
    if (!record) return;
    await this.o.proxies.open(id, this.o.ssh.host, record.sshPort, () => {
      const now = this.records.get(id);
      return now && this.alive(now) ? this.connectSsh(now) : Promise.resolve(null);
    });
  }

  record(id: string): MachineRecord | undefined {
    return this.records.get(id);
  }

  all(): MachineRecord[] {
    return [...this.records.values()];
  }

  sshEndpoint(id: string): { host: string; port: number } | null {
    const record = this.records.get(id);
    return record ? { host: this.o.ssh.host, port: record.sshPort } : null;
  }

  alive(record: MachineRecord): boolean {
    return isOurProcess(record.pid, this.marker(record.id));
  }

  async provision(spec: MachineSpec): Promise<void> {
    if (this.records.has(spec.id)) return;
    const image = this.image(spec.image);
    const dir = this.o.paths.machineDir(spec.id);
    privateDir(dir);
    const root = this.o.paths.machineFile(spec.id, 'root.qcow2');
    const restored = spec.rootVolumeId ? this.o.pendingRoot(spec.rootVolumeId) : null;
    if (restored) {
      // Created from a snapshot, restored already: that disk is the root (it stands on no image).
      renameSync(restored, root);
    } else {
      await run('qemu-img', [
        'create',
        '-q',
        '-f',
        'qcow2',
        '-F',
        'qcow2',
        '-b',
        image.root,
        root,
        `${spec.instanceType.storage_gb}G`,
      ]);
    }
    chmodSync(root, 0o600);
    const record: MachineRecord = {
      id: spec.id,
      rootVolumeId: spec.rootVolumeId ?? null,
      image: spec.image,
      imageVersion: image.kind === 'nimbus' ? image.version : null,
      instanceType: spec.instanceType.name,
      sshPort: 0,
      sshInternalPort: null,
      pid: null,
      bootStartedAt: null,
      sshReadyAt: null,
      stopRequestedAt: null,
      powerButtonAt: null,
      failure: null,
      createdAt: this.o.now().toISOString(),
    };
    await this.writeSeed(spec);
    await this.sshPorts.withFreePort(async (sshPort) => {
      // A root restored while this ran (the copy ended after the look above) is taken in the same step
      // as the record is written, which is what lets a restore find this machine (disks.ts): no copy
      // can end between the two and be left for no one.
      const late = restored || !spec.rootVolumeId ? null : this.o.pendingRoot(spec.rootVolumeId);
      if (late) renameSync(late, root);
      this.save({ ...record, sshPort });
    });
    await this.serve(spec.id);
  }

  async start(spec: MachineSpec): Promise<void> {
    const found = this.records.get(spec.id);
    const record = found ? this.adoptOrphan(found) : undefined;
    if (!record || this.alive(record)) return;
    if (!exists(this.o.paths.machineFile(spec.id, 'seed.iso')) || !exists(this.seedDir(spec.id))) {
      await this.writeSeed(spec);
    }
    await this.serve(spec.id);
    const taps = this.o.taps;
    const nic: VmLayout['nic'] = taps
      ? { kind: 'tap', ifname: await taps.plug(spec.id) }
      : { kind: 'user', ssh: { host: '127.0.0.1', port: await loopbackPort() } };
    const internalPort = nic.kind === 'user' ? nic.ssh.port : null;
    const paths = this.o.paths;
    const pidFile = paths.machineFile(spec.id, 'qemu.pid');
    removeFile(pidFile);
    removeFile(paths.qmpSocket(spec.id));
    const type = spec.instanceType;
    const layout: VmLayout = {
      id: spec.id,
      accel: this.o.accel,
      vcpus: type.vcpus,
      memoryMb: this.memoryMb(type.memory_gb),
      image: this.bootImage(record),
      rootDisk: paths.machineFile(spec.id, 'root.qcow2'),
      seedIso: paths.machineFile(spec.id, 'seed.iso'),
      seedFiles: PLAIN_SEED_FILES.map((name) => ({ name, file: `${this.seedDir(spec.id)}/${name}` })).filter(
        (seed) => exists(seed.file),
      ),
      serialLog: paths.machineFile(spec.id, 'serial.log'),
      pidFile,
      qmpSocket: paths.qmpSocket(spec.id),
      metadataSocket: paths.metadataSocket(spec.id),
      mac: macAddressFor(spec.id),
      nic,
      dataDisks: this.o.attachedDisks(spec.id),
      traffic: this.trafficSockets(spec.id),
    };
    const startedAt = this.o.now().toISOString();
    await startDaemonized(this.o.binary, qemuArgs(layout), paths.machineDir(spec.id));
    chmodSync(layout.serialLog, 0o600);
    this.save({
      ...record,
      pid: readPidFile(pidFile),
      sshInternalPort: internalPort,
      bootStartedAt: startedAt,
      sshReadyAt: null,
      stopRequestedAt: null,
      powerButtonAt: null,
      failure: null,
    });
    // Guest memory statistics for the metrics (the balloon driver reports them every few seconds).
    await withQmp(layout.qmpSocket, (qmp) =>
      qmp.execute('qom-set', {
        path: '/machine/peripheral/balloon0',
        property: 'guest-stats-polling-interval',
        value: 5,
      }),
    ).catch(() => {});
  }

  async stop(spec: MachineSpec, force: boolean): Promise<void> {
    const record = this.records.get(spec.id);
    if (!record) return;
    if (!this.alive(record)) {
      // Off already (or dead): a stop from any state ends off, its failure cleared.
      if (record.pid !== null || record.stopRequestedAt !== null || record.failure !== null) {
        this.save({ ...record, pid: null, stopRequestedAt: null, powerButtonAt: null, failure: null });
      }
      return;
    }
    if (force) {
      await this.powerOff(record);
      return;
    }
    if (record.stopRequestedAt !== null) return;
    await this.pressPowerButton(record);
    const now = this.o.now().toISOString();
    this.save({ ...record, stopRequestedAt: now, powerButtonAt: now });
  }

  async resize(spec: MachineSpec): Promise<void> {
    const record = this.records.get(spec.id);
    if (!record) throw new Error(`qemu driver: machine ${spec.id} does not exist`);
    if (record.instanceType === spec.instanceType.name) return;
    if (this.alive(record)) throw new Error(`qemu driver: machine ${spec.id} must be off to resize`);
    // The disk only grows (the service refuses smaller types); qemu-img refuses to shrink anyway.
    const root = this.o.paths.machineFile(spec.id, 'root.qcow2');
    const info = JSON.parse(await run('qemu-img', ['info', '--output=json', '-U', root])) as {
      'virtual-size': number;
    };
    const wanted = spec.instanceType.storage_gb * 1024 ** 3;
    if (info['virtual-size'] < wanted) await run('qemu-img', ['resize', '-q', root, String(wanted)]);
    this.save({ ...record, instanceType: spec.instanceType.name });
  }

  async destroy(spec: MachineSpec): Promise<void> {
    const record = this.records.get(spec.id);
    if (record && this.alive(record)) await this.powerOff(record);
    await this.o.taps?.unplug(spec.id);
    await this.o.metadata.close(spec.id, this.o.paths.metadataSocket(spec.id));
    await this.o.proxies.close(spec.id);
    await this.o.traffic.close(spec.id, this.trafficSockets(spec.id));
    removeFile(this.o.paths.qmpSocket(spec.id));
    rmSync(this.o.paths.machineDir(spec.id), { recursive: true, force: true });
    this.records.delete(spec.id);
  }

  async inspect(spec: MachineSpec): Promise<MachineState & { failure: string | null }> {
    const found = this.records.get(spec.id);
    if (!found) return state('absent', null);
    let record = this.adoptOrphan(found);
    const now = this.o.now();
    const alive = this.alive(record);
    if (alive) {
      const qmpStatus = await this.status(record);
      if (qmpStatus === 'shutdown') {
        // The guest powered off (asked by us, or by itself): an orderly off.
        await this.powerOff(record);
        return this.settled(spec.id, 'off');
      }
      if (record.stopRequestedAt !== null) {
        const asked = Date.parse(record.stopRequestedAt);
        if (now.getTime() - asked >= STOP_TIMEOUT_MS) {
          await this.powerOff(record);
          return this.settled(spec.id, 'off');
        }
        if (
          now.getTime() - Date.parse(record.powerButtonAt ?? record.stopRequestedAt) >=
          POWER_BUTTON_REPEAT_MS
        ) {
          await this.pressPowerButton(record);
          record = this.save({ ...record, powerButtonAt: now.toISOString() });
        }
        return state('stopping', record, new Date(now.getTime() + POLL_MS));
      }
      if (record.sshReadyAt !== null) return state('running', record);
      const stream = await this.connectSsh(record).catch(() => null);
      if (stream && (await answersAsSsh(stream))) {
        record = this.save({ ...record, sshReadyAt: this.o.now().toISOString() });
        return state('running', record);
      }
      if (now.getTime() - Date.parse(record.bootStartedAt ?? now.toISOString()) >= BOOT_TIMEOUT_MS) {
        await this.powerOff(record);
        const failed = this.save({
          ...this.records.get(spec.id)!,
          failure: `the guest's SSH server did not answer within ${BOOT_TIMEOUT_MS / 1000} s of boot`,
        });
        return state('failed', failed);
      }
      return state('booting', record, new Date(now.getTime() + POLL_MS));
    }
    // The VM is gone (or never ran): its tap goes with it.
    await this.o.taps?.unplug(spec.id);
    if (record.pid !== null && record.stopRequestedAt === null) {
      // Gone without being asked: killed from outside, or crashed.
      record = this.save({ ...record, pid: null, failure: this.exitReason(record) });
    } else if (record.pid !== null) {
      record = this.save({ ...record, pid: null, stopRequestedAt: null, powerButtonAt: null });
    }
    return state(record.failure ? 'failed' : 'off', record);
  }

  /**
   * A QEMU that started but whose pid never reached the record (Nimbus killed between the two): its pid
   * file names it, and it is taken as this machine's boot rather than started a second time.
   */
  private adoptOrphan(record: MachineRecord): MachineRecord {
    if (record.pid !== null) return record;
    const pid = readPidFile(this.o.paths.machineFile(record.id, 'qemu.pid'));
    if (pid === null || !isOurProcess(pid, this.marker(record.id))) return record;
    return this.save({
      ...record,
      pid,
      bootStartedAt: this.o.now().toISOString(),
      sshReadyAt: null,
      stopRequestedAt: null,
      powerButtonAt: null,
      failure: null,
    });
  }

  /** Machines whose process is gone though nobody asked: the watcher reports them (within seconds). */
  lost(): MachineRecord[] {
    return this.all().filter((r) => r.pid !== null && r.stopRequestedAt === null && !this.alive(r));
  }

  /** Running machines whose guest powered itself off (QEMU paused in `shutdown`). */
  async poweredOff(): Promise<MachineRecord[]> {
    const found: MachineRecord[] = [];
    for (const record of this.all()) {
      if (record.pid === null || record.stopRequestedAt !== null || record.sshReadyAt === null) continue;
      if (this.alive(record) && (await this.status(record)) === 'shutdown') found.push(record);
    }
    return found;
  }

  /** A stream to the guest's SSH server: QEMU's forward on loopback, or the tap network's way there. */
  private connectSsh(record: MachineRecord): Promise<Duplex | null> {
    if (this.o.taps) return this.o.taps.connectSsh(record.id);
    if (record.sshInternalPort === null) return Promise.resolve(null);
    return Promise.resolve(net.createConnection({ host: '127.0.0.1', port: record.sshInternalPort }));
  }

  memoryMb(memoryGb: number): number {
    return Math.max(128, Math.round(memoryGb * 1024 * this.o.memoryScale));
  }

  /** The QMP socket of a running machine, or null. */
  qmpSocket(id: string): string | null {
    const record = this.records.get(id);
    return record && this.alive(record) ? this.o.paths.qmpSocket(id) : null;
  }

  private settled(id: string, power: PowerState) {
    return state(power, this.records.get(id) ?? null);
  }

  private async status(record: MachineRecord): Promise<string | null> {
    try {
      return await withQmp(this.o.paths.qmpSocket(record.id), async (qmp) => {
        const status = await qmp.execute<{ status: string }>('query-status', undefined, 5000);
        return status.status;
      });
    } catch {
      return null;
    }
  }

  private async pressPowerButton(record: MachineRecord): Promise<void> {
    await withQmp(this.o.paths.qmpSocket(record.id), (qmp) => qmp.execute('system_powerdown')).catch(
      () => {},
    );
  }

  /** QMP quit, then SIGKILL if QEMU is still there; the record shows the machine off. */
  private async powerOff(record: MachineRecord): Promise<void> {
    const marker = this.marker(record.id);
    if (record.pid !== null && isOurProcess(record.pid, marker)) {
      await withQmp(this.o.paths.qmpSocket(record.id), (qmp) => qmp.execute('quit', undefined, 3000)).catch(
        () => {},
      );
      if (!(await waitForExit(record.pid, marker, 5000))) {
        kill(record.pid, marker);
        await waitForExit(record.pid, marker, 5000);
      }
    }
    removeFile(this.o.paths.qmpSocket(record.id));
    await this.o.taps?.unplug(record.id);
    this.save({
      ...(this.records.get(record.id) ?? record),
      pid: null,
      stopRequestedAt: null,
      powerButtonAt: null,
    });
  }

  private exitReason(record: MachineRecord): string {
    let tail = '';
    try {
      const log = readFileSync(this.o.paths.machineFile(record.id, 'serial.log'), 'utf8');
      tail = log.trim().split('\n').slice(-1)[0]?.slice(0, 200) ?? '';
    } catch {
      // no log
    }
    return `the QEMU process (pid ${record.pid}) exited without being asked to${tail ? `; the console's last line: ${tail}` : ''}`;
  }

  private save(record: MachineRecord): MachineRecord {
    writeRecord(this.o.paths.machineFile(record.id, 'machine.json'), record);
    this.records.set(record.id, record);
    return record;
  }

  /** The machine's own directory: on every QEMU command line of this VM, and on no other's. */
  private marker(id: string): string {
    return `${this.o.paths.machineDir(id)}/`;
  }

  private image(name: string): GuestImage {
    const image = listImages(this.o.imageDir).get(name);
    if (!image) {
      throw new Error(
        `qemu driver: no image ${name} in ${this.o.imageDir}; build one with "nimbus admin images build"`,
      );
    }
    return image;
  }

  /** The image a machine boots: the built version its disk stands on (kernel and initramfs included). */
  private bootImage(record: MachineRecord): GuestImage {
    if (record.imageVersion !== null) {
      const built = builtImage(this.o.imageDir, record.image, record.imageVersion);
      if (!built) {
        throw new Error(
          `qemu driver: image ${record.image} version ${record.imageVersion}, which ${record.id}'s disk stands on, is gone from ${this.o.imageDir}`,
        );
      }
      return built;
    }
    return this.image(record.image);
  }

  private async writeSeed(spec: MachineSpec): Promise<void> {
    const identity = await this.o.identity(spec);
    await writeSeed(
      this.o.paths.machineFile(spec.id, 'seed.iso'),
      this.seedDir(spec.id),
      `${this.o.paths.machineDir(spec.id)}/seed.d`,
      {
        instanceId: spec.id,
        hostname: identity.hostname,
        sshKeys: identity.sshKeys,
        userData: spec.userData,
      },
    );
  }

  /** The sockets that count the VM's frames: beside its QMP socket (as short, so within the path limit). */
  private trafficSockets(id: string): { rx: string; tx: string } {
    const qmp = this.o.paths.qmpSocket(id);
    return { rx: qmp.replace(/\.qmp$/, '.rx'), tx: qmp.replace(/\.qmp$/, '.tx') };
  }

  private seedDir(id: string): string {
    return `${this.o.paths.machineDir(id)}/seed`;
  }
}

/**
 * The public SSH ports of a range (NIMBUS_QEMU_SSH_PORTS). A port no record holds and nothing listens on is
 * held while `use` records it, so that concurrent provisions (eight creates at once) never get the same
 * one: the probe for a listener awaits, and without the hold two provisions both found the same port
 * free, and the second's listener then failed with EADDRINUSE at every retry.
 */
export class PortChooser {
  private readonly choosing = new Set<number>();

  constructor(
    private readonly host: string,
    private readonly range: { first: number; last: number },
    /** The ports the records hold. */
    private readonly held: () => number[],
  ) {}

  async withFreePort<T>(use: (port: number) => Promise<T> | T): Promise<T> {
    const { first, last } = this.range;
    for (let port = first; port <= last; port++) {
      if (this.choosing.has(port) || this.held().includes(port)) continue;
      this.choosing.add(port);
      try {
        if (await portFree(this.host, port)) return await use(port);
      } finally {
        this.choosing.delete(port);
      }
    }
    throw new Error(`qemu driver: no free SSH port left in ${first}-${last} (NIMBUS_QEMU_SSH_PORTS)`);
  }
}

function state(
  power: PowerState,
  record: MachineRecord | null,
  settlesAt: Date | null = null,
): MachineState & { failure: string | null } {
  return {
    power,
    instanceType: record?.instanceType ?? null,
    settlesAt,
    bootStartedAt: record?.bootStartedAt ? new Date(record.bootStartedAt) : null,
    failure: record?.failure ?? null,
  };
}

/** The size of a file in bytes (0 when missing). */
export function fileSize(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
}

/** A port free on loopback now, for QEMU's forward of the guest's SSH (only Nimbus connects to it). */
function loopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', reject);
    probe.listen({ host: '127.0.0.1', port: 0, exclusive: true }, () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}
