/**
 * Data volumes, snapshots and restores of the QEMU driver: qcow2 files under `<data dir>/qemu`, each with
 * a JSON record beside it (files.ts).
 *
 * - A volume is `volumes/<id>.qcow2`, formatted when asked (mke2fs or mkfs.xfs on a sparse raw file,
 *   converted to qcow2). Attaching to a running VM hot-plugs it over QMP (`blockdev-add`, then
 *   `device_add` of a virtio-blk-pci in the PCI slot of its device name, so the guest calls it what the
 *   API does); to a VM that is off, it is only recorded and goes on the next boot's command line.
 *   Detaching asks the guest to let go (`device_del`, an ACPI unplug) and settles once QEMU reports the
 *   device gone. Growing an attached disk of a running VM is `block_resize`, online.
 * - A snapshot is a full, flattened copy (`snapshots/<id>.qcow2`), crash-consistent: of a disk in use
 *   by a running VM, QEMU copies it with a `drive-backup` job (sync=full), which copies the disk as it was
 *   when the job began while the guest goes on writing; of any other disk, `qemu-img convert`.
 * - A restore writes the snapshot over a detached volume, or over the root disk of a stopped VM (which
 *   then stands on its own, no longer an overlay of the image); a root disk restored before its VM exists
 *   (an instance created from a snapshot) waits as `volumes/<root volume id>.qcow2` until provisioning
 *   takes it; one whose VM was provisioned while it was copied replaces that VM's root disk.
 *
 * Copies made outside QEMU run in this process; a record still `creating` (or `restoring`) with no copy
 * running here (Nimbus was restarted) starts the copy again from the beginning.
 */
import { chmodSync, readdirSync, renameSync, rmSync } from 'node:fs';
import type {
  RestoreSpec,
  RestoreState,
  SnapshotSpec,
  SnapshotState,
  VolumeAttachment,
  VolumeSpec,
  VolumeState,
} from '../driver.js';
import { dataDevice, dataDiskSlot, dataNode, diskSerial, hex } from './command-line.js';
import { exists, type QemuPaths, readRecord, removeFile, writeRecord } from './files.js';
import type { QemuMachines } from './machines.js';
import { QmpError, withQmp } from './qmp.js';
import { run } from './tools.js';

const POLL_MS = 500;
const GIB = 1024 ** 3;

interface VolumeRecord {
  id: string;
  sizeGb: number;
  filesystem: string | null;
  state: 'available' | 'attached' | 'detaching' | 'deleted';
  attachment: VolumeAttachment | null;
  createdAt: string;
}

interface SnapshotRecord {
  id: string;
  sourceVolumeId: string;
  sizeGb: number;
  state: 'creating' | 'available' | 'failed' | 'deleted';
  /** How the copy is being made: a QEMU job (named after the snapshot) or a copy in this process. */
  method: 'drive-backup' | 'convert' | null;
  /** The VM whose QEMU runs the drive-backup job. */
  machineId: string | null;
  error: string | null;
  createdAt: string;
}

interface RestoreRecord {
  volumeId: string;
  snapshotId: string;
  startedAt: string;
  sizeGb: number;
  state: 'restoring' | 'done';
}

/** Where a disk is: a data volume's file, or a machine's root disk. */
type DiskLocation =
  | { kind: 'volume'; file: string; attachedTo: string | null }
  | { kind: 'root'; file: string; machineId: string }
  | { kind: 'pending-root'; file: string };

export class QemuDisks {
  /** Copies running in this process, by snapshot id or `restore:<volume id>`. */
  private readonly copies = new Map<string, Promise<void>>();

  constructor(
    private readonly paths: QemuPaths,
    private readonly machines: QemuMachines,
    private readonly now: () => Date,
  ) {}

  /** The data disks attached to an instance, for its command line at boot. */
  attachedTo(instanceId: string): { id: string; file: string; deviceName: string }[] {
    const disks: { id: string; file: string; deviceName: string }[] = [];
    for (const name of readdirSync(this.paths.volumes)) {
      if (!name.endsWith('.json') || name.includes('.restore')) continue;
      const record = readRecord<VolumeRecord>(`${this.paths.volumes}/${name}`);
      if (record?.attachment?.instanceId === instanceId && record.state !== 'deleted') {
        disks.push({
          id: record.id,
          file: this.paths.volumeDisk(record.id),
          deviceName: record.attachment.deviceName,
        });
      }
    }
    return disks;
  }

  // --- volumes ---

  async createVolume(spec: VolumeSpec): Promise<void> {
    if (this.volume(spec.id)) return;
    const disk = this.paths.volumeDisk(spec.id);
    const size = spec.sizeGb * GIB;
    if (spec.filesystem) {
      const raw = `${disk}.raw`;
      removeFile(raw);
      try {
        await run('truncate', ['-s', String(size), raw]);
        if (spec.filesystem === 'xfs') await run('mkfs.xfs', ['-q', '-f', raw]);
        else
          await run('mke2fs', [
            '-q',
            '-F',
            '-t',
            spec.filesystem,
            '-E',
            'lazy_itable_init=1,lazy_journal_init=1',
            raw,
          ]);
        await run('qemu-img', ['convert', '-q', '-f', 'raw', '-O', 'qcow2', raw, `${disk}.part`]);
      } finally {
        removeFile(raw);
      }
    } else {
      await run('qemu-img', ['create', '-q', '-f', 'qcow2', `${disk}.part`, String(size)]);
    }
    chmodSync(`${disk}.part`, 0o600);
    renameSync(`${disk}.part`, disk);
    this.saveVolume({
      id: spec.id,
      sizeGb: spec.sizeGb,
      filesystem: spec.filesystem,
      state: 'available',
      attachment: null,
      createdAt: this.now().toISOString(),
    });
  }

  async attachVolume(spec: VolumeSpec, attachment: VolumeAttachment): Promise<void> {
    const record = this.volume(spec.id);
    if (!record || record.state === 'deleted') throw new Error(`qemu driver: disk ${spec.id} does not exist`);
    if (record.state === 'attached') return;
    if (record.state !== 'available') {
      throw new Error(`qemu driver: disk ${spec.id} must be available to attach, it is ${record.state}`);
    }
    // A running VM gets it plugged in now; one that is off has it on its command line at the next boot.
    const socket = this.machines.qmpSocket(attachment.instanceId);
    if (socket) await hotPlug(socket, spec.id, this.paths.volumeDisk(spec.id), attachment.deviceName);
    this.saveVolume({ ...record, state: 'attached', attachment });
  }

  async detachVolume(spec: VolumeSpec): Promise<void> {
    const record = this.volume(spec.id);
    if (!record?.attachment || record.state === 'detaching') return;
    const socket = this.machines.qmpSocket(record.attachment.instanceId);
    if (socket && (await devicePresent(socket, spec.id))) {
      await withQmp(socket, (qmp) => qmp.execute('device_del', { id: dataDevice(spec.id) })).catch(
        ignoreMissing,
      );
      this.saveVolume({ ...record, state: 'detaching' });
      return;
    }
    if (socket)
      await withQmp(socket, (qmp) => qmp.execute('blockdev-del', { 'node-name': dataNode(spec.id) })).catch(
        () => {},
      );
    this.saveVolume({ ...record, state: 'available', attachment: null });
  }

  async resizeVolume(spec: VolumeSpec): Promise<void> {
    const record = this.volume(spec.id);
    if (!record || record.state === 'deleted') throw new Error(`qemu driver: disk ${spec.id} does not exist`);
    if (record.sizeGb >= spec.sizeGb) return;
    const size = spec.sizeGb * GIB;
    const socket = record.attachment ? this.machines.qmpSocket(record.attachment.instanceId) : null;
    if (socket) {
      await withQmp(socket, (qmp) => qmp.execute('block_resize', { 'node-name': dataNode(spec.id), size }));
    } else {
      await run('qemu-img', ['resize', '-q', this.paths.volumeDisk(spec.id), String(size)]);
    }
    this.saveVolume({ ...record, sizeGb: spec.sizeGb });
  }

  async deleteVolume(spec: VolumeSpec): Promise<void> {
    const record = this.volume(spec.id);
    if (!record) return;
    if (record.state === 'deleted') {
      removeFile(this.paths.volumeRecord(spec.id));
      return;
    }
    if (record.attachment) {
      throw new Error(`qemu driver: disk ${spec.id} is attached to ${record.attachment.instanceId}`);
    }
    removeFile(this.paths.volumeDisk(spec.id));
    this.saveVolume({ ...record, state: 'deleted' });
  }

  async inspectVolume(spec: VolumeSpec): Promise<VolumeState> {
    let record = this.volume(spec.id);
    if (!record) return { state: 'absent', sizeGb: null, attachment: null, settlesAt: null };
    if (record.state === 'detaching' && record.attachment) {
      const socket = this.machines.qmpSocket(record.attachment.instanceId);
      if (socket && (await devicePresent(socket, spec.id))) {
        return {
          state: 'detaching',
          sizeGb: record.sizeGb,
          attachment: record.attachment,
          settlesAt: new Date(this.now().getTime() + POLL_MS),
        };
      }
      if (socket) {
        await withQmp(socket, (qmp) => qmp.execute('blockdev-del', { 'node-name': dataNode(spec.id) })).catch(
          () => {},
        );
      }
      record = this.saveVolume({ ...record, state: 'available', attachment: null });
    }
    return { state: record.state, sizeGb: record.sizeGb, attachment: record.attachment, settlesAt: null };
  }

  // --- snapshots ---

  async createSnapshot(spec: SnapshotSpec): Promise<void> {
    if (this.snapshot(spec.id)) return;
    const record: SnapshotRecord = {
      id: spec.id,
      sourceVolumeId: spec.sourceVolumeId,
      sizeGb: spec.sizeGb,
      state: 'creating',
      method: null,
      machineId: null,
      error: null,
      createdAt: this.now().toISOString(),
    };
    const source = this.locate(spec.sourceVolumeId);
    if (!source) {
      this.saveSnapshot({
        ...record,
        state: 'failed',
        error: `the disk ${spec.sourceVolumeId} was not found`,
      });
      return;
    }
    const runningVm =
      source.kind === 'root' ? source.machineId : source.kind === 'volume' ? source.attachedTo : null;
    const socket = runningVm ? this.machines.qmpSocket(runningVm) : null;
    if (socket && runningVm) {
      const target = `${this.paths.snapshotDisk(spec.id)}.part`;
      removeFile(target);
      await withQmp(socket, (qmp) =>
        qmp.execute('drive-backup', {
          'job-id': jobId(spec.id),
          device: source.kind === 'root' ? 'root' : dataNode(spec.sourceVolumeId),
          target,
          format: 'qcow2',
          sync: 'full',
          mode: 'absolute-paths',
          'auto-dismiss': false,
        }),
      );
      this.saveSnapshot({ ...record, method: 'drive-backup', machineId: runningVm });
      return;
    }
    this.saveSnapshot({ ...record, method: 'convert' });
    this.copyInBackground(spec.id, source.file);
  }

  async inspectSnapshot(spec: SnapshotSpec): Promise<SnapshotState> {
    const record = this.snapshot(spec.id);
    if (!record) return { state: 'absent', settlesAt: null, error: null };
    if (record.state !== 'creating') {
      return { state: record.state, settlesAt: null, error: record.error };
    }
    const creating: SnapshotState = {
      state: 'creating',
      settlesAt: new Date(this.now().getTime() + POLL_MS),
      error: null,
    };
    if (record.method === 'drive-backup' && record.machineId) {
      const socket = this.machines.qmpSocket(record.machineId);
      const job = socket ? await backupJob(socket, spec.id) : undefined;
      if (job && job.status !== 'concluded') return creating;
      if (job && socket) {
        await withQmp(socket, (qmp) => qmp.execute('job-dismiss', { id: jobId(spec.id) })).catch(() => {});
      }
      if (job && !job.error) {
        this.finishCopy(spec.id);
        return { state: 'available', settlesAt: null, error: null };
      }
      if (job?.error) {
        this.saveSnapshot({ ...record, state: 'failed', error: `QEMU's copy failed: ${job.error}` });
        return { state: 'failed', settlesAt: null, error: `QEMU's copy failed: ${job.error}` };
      }
      // The VM (and its job) went away: copy the disk as it is now, from outside.
      const source = this.locate(record.sourceVolumeId);
      if (!source) return this.failSnapshot(record, `the disk ${record.sourceVolumeId} was not found`);
      this.saveSnapshot({ ...record, method: 'convert', machineId: null });
      this.copyInBackground(spec.id, source.file);
      return creating;
    }
    if (!this.copies.has(spec.id)) {
      // Not copying here: the copy was cut short by a restart (or failed: the record says so then).
      const source = this.locate(record.sourceVolumeId);
      if (!source) return this.failSnapshot(record, `the disk ${record.sourceVolumeId} was not found`);
      this.copyInBackground(spec.id, source.file);
    }
    return creating;
  }

  async deleteSnapshot(spec: SnapshotSpec): Promise<void> {
    const record = this.snapshot(spec.id);
    if (!record) return;
    if (record.state === 'deleted') {
      removeFile(this.paths.snapshotRecord(spec.id));
      return;
    }
    if (record.state === 'creating' && record.method === 'drive-backup' && record.machineId) {
      const socket = this.machines.qmpSocket(record.machineId);
      if (socket) {
        await withQmp(socket, async (qmp) => {
          await qmp.execute('job-cancel', { id: jobId(spec.id) }).catch(() => {});
          await qmp.execute('job-dismiss', { id: jobId(spec.id) }).catch(() => {});
        }).catch(() => {});
      }
    }
    removeFile(this.paths.snapshotDisk(spec.id));
    removeFile(`${this.paths.snapshotDisk(spec.id)}.part`);
    this.saveSnapshot({ ...record, state: 'deleted' });
  }

  // --- restores ---

  async restoreVolume(spec: RestoreSpec): Promise<void> {
    const current = this.restore(spec.volumeId);
    if (current && current.startedAt === spec.startedAt && current.snapshotId === spec.snapshotId) return;
    const snapshot = this.snapshot(spec.snapshotId);
    if (snapshot?.state !== 'available') {
      throw new Error(
        `qemu driver: snapshot ${spec.snapshotId} cannot be restored while ${snapshot?.state ?? 'absent'}`,
      );
    }
    writeRecord(this.restoreFile(spec.volumeId), {
      volumeId: spec.volumeId,
      snapshotId: spec.snapshotId,
      startedAt: spec.startedAt,
      sizeGb: spec.sizeGb,
      state: 'restoring',
    } satisfies RestoreRecord);
    this.restoreInBackground(spec);
  }

  async inspectRestore(spec: RestoreSpec): Promise<RestoreState> {
    const record = this.restore(spec.volumeId);
    if (!record || record.startedAt !== spec.startedAt || record.snapshotId !== spec.snapshotId) {
      return { state: 'absent', settlesAt: null };
    }
    if (record.state === 'done') {
      this.takeMissedRoot(spec.volumeId);
      return { state: 'done', settlesAt: null };
    }
    if (!this.copies.has(`restore:${spec.volumeId}`)) this.restoreInBackground(spec);
    return { state: 'restoring', settlesAt: new Date(this.now().getTime() + POLL_MS) };
  }

  /**
   * A restored root disk left waiting for a machine that was provisioned meanwhile (the copy finished
   * while provisioning made the machine's own disk from the image, before its record was written) goes
   * to that machine now, before the restore is reported done: the instance boots only after that.
   */
  private takeMissedRoot(rootVolumeId: string): void {
    const pending = this.pendingRoot(rootVolumeId);
    const machine = pending ? this.machines.all().find((m) => m.rootVolumeId === rootVolumeId) : undefined;
    if (!pending || !machine || this.machines.qmpSocket(machine.id)) return;
    renameSync(pending, this.paths.machineFile(machine.id, 'root.qcow2'));
  }

  /** A root disk restored before its machine existed, for provisioning to take; null when none. */
  pendingRoot(rootVolumeId: string): string | null {
    const file = this.paths.volumeDisk(rootVolumeId);
    return !this.volume(rootVolumeId) && exists(file) ? file : null;
  }

  // --- internals ---

  /** Where the disk of a volume id is: a data volume, a machine's root disk, or a root disk waiting for its machine. */
  private locate(volumeId: string): DiskLocation | null {
    const volume = this.volume(volumeId);
    if (volume && volume.state !== 'deleted') {
      return {
        kind: 'volume',
        file: this.paths.volumeDisk(volumeId),
        attachedTo: volume.attachment?.instanceId ?? null,
      };
    }
    const machine = this.machines.all().find((m) => m.rootVolumeId === volumeId);
    if (machine)
      return { kind: 'root', file: this.paths.machineFile(machine.id, 'root.qcow2'), machineId: machine.id };
    const pending = this.pendingRoot(volumeId);
    return pending ? { kind: 'pending-root', file: pending } : null;
  }

  private copyInBackground(snapshotId: string, source: string): void {
    const target = this.paths.snapshotDisk(snapshotId);
    const copy = (async () => {
      removeFile(`${target}.part`);
      await run('qemu-img', ['convert', '-q', '-U', '-O', 'qcow2', source, `${target}.part`], {
        timeoutMs: 6 * 3600_000,
      });
      this.finishCopy(snapshotId);
    })()
      .catch((error: unknown) => {
        const record = this.snapshot(snapshotId);
        if (record?.state === 'creating')
          this.failSnapshot(record, String((error as Error).message ?? error));
      })
      .finally(() => this.copies.delete(snapshotId));
    this.copies.set(snapshotId, copy);
  }

  private finishCopy(snapshotId: string): void {
    const record = this.snapshot(snapshotId);
    if (record?.state !== 'creating') return;
    const target = this.paths.snapshotDisk(snapshotId);
    chmodSync(`${target}.part`, 0o600);
    renameSync(`${target}.part`, target);
    this.saveSnapshot({ ...record, state: 'available', method: null, machineId: null });
  }

  private failSnapshot(record: SnapshotRecord, error: string): SnapshotState {
    removeFile(`${this.paths.snapshotDisk(record.id)}.part`);
    this.saveSnapshot({ ...record, state: 'failed', error });
    return { state: 'failed', settlesAt: null, error };
  }

  private restoreInBackground(spec: RestoreSpec): void {
    const key = `restore:${spec.volumeId}`;
    const copy = (async () => {
      const location = this.locate(spec.volumeId);
      const target = location?.file ?? this.paths.volumeDisk(spec.volumeId);
      if (location?.kind === 'root' && this.machines.qmpSocket(location.machineId)) {
        throw new Error(`qemu driver: ${location.machineId} must be off to restore its root disk`);
      }
      if (
        location?.kind === 'volume' &&
        location.attachedTo &&
        this.machines.qmpSocket(location.attachedTo)
      ) {
        throw new Error(`qemu driver: ${spec.volumeId} is in use by a running VM`);
      }
      const part = `${target}.restore-part`;
      removeFile(part);
      await run(
        'qemu-img',
        ['convert', '-q', '-O', 'qcow2', this.paths.snapshotDisk(spec.snapshotId), part],
        {
          timeoutMs: 6 * 3600_000,
        },
      );
      const info = JSON.parse(await run('qemu-img', ['info', '--output=json', part])) as {
        'virtual-size': number;
      };
      if (info['virtual-size'] < spec.sizeGb * GIB)
        await run('qemu-img', ['resize', '-q', part, String(spec.sizeGb * GIB)]);
      chmodSync(part, 0o600);
      // Where the copy goes is looked at again now: an instance created from the snapshot is provisioned
      // while its root disk is copied (the reconciler does not wait for the restore to make the machine,
      // only to boot it), and its machine then has a root disk of its own, made from the image, which
      // must be the one replaced; the pending file would never be taken.
      const now = this.locate(spec.volumeId);
      if (now?.kind === 'root' && this.machines.qmpSocket(now.machineId)) {
        throw new Error(`qemu driver: ${now.machineId} must be off to restore its root disk`);
      }
      renameSync(part, now?.kind === 'root' ? now.file : target);
      const record = this.restore(spec.volumeId);
      if (record && record.startedAt === spec.startedAt)
        writeRecord(this.restoreFile(spec.volumeId), { ...record, state: 'done' });
    })()
      .catch(() => {
        // Left restoring: the next look starts it again (the reconciler's retries bound how often).
      })
      .finally(() => this.copies.delete(key));
    this.copies.set(key, copy);
  }

  private volume(id: string): VolumeRecord | undefined {
    return readRecord<VolumeRecord>(this.paths.volumeRecord(id));
  }

  private saveVolume(record: VolumeRecord): VolumeRecord {
    writeRecord(this.paths.volumeRecord(record.id), record);
    return record;
  }

  private snapshot(id: string): SnapshotRecord | undefined {
    return readRecord<SnapshotRecord>(this.paths.snapshotRecord(id));
  }

  private saveSnapshot(record: SnapshotRecord): void {
    writeRecord(this.paths.snapshotRecord(record.id), record);
  }

  private restoreFile(volumeId: string): string {
    return this.paths.volumeRecord(volumeId).replace(/\.json$/, '.restore.json');
  }

  private restore(volumeId: string): RestoreRecord | undefined {
    return readRecord<RestoreRecord>(this.restoreFile(volumeId));
  }

  /** Removes what a machine's delete leaves of its root disk's restores. */
  forgetRoot(rootVolumeId: string): void {
    removeFile(this.restoreFile(rootVolumeId));
    if (!this.volume(rootVolumeId)) rmSync(this.paths.volumeDisk(rootVolumeId), { force: true });
  }
}

const jobId = (snapshotId: string) => `backup-${snapshotId}`;

async function hotPlug(socket: string, volumeId: string, file: string, deviceName: string): Promise<void> {
  await withQmp(socket, async (qmp) => {
    await qmp
      .execute('blockdev-add', {
        driver: 'qcow2',
        'node-name': dataNode(volumeId),
        discard: 'unmap',
        file: { driver: 'file', filename: file, aio: 'threads' },
      })
      .catch(ignoreDuplicate);
    await qmp
      .execute('device_add', {
        driver: 'virtio-blk-pci',
        drive: dataNode(volumeId),
        id: dataDevice(volumeId),
        bus: 'pci.0',
        addr: hex(dataDiskSlot(deviceName)),
        serial: diskSerial(volumeId),
      })
      .catch(ignoreDuplicate);
  });
}

async function devicePresent(socket: string, volumeId: string): Promise<boolean> {
  const children = await withQmp(socket, (qmp) =>
    qmp.execute<{ name: string }[]>('qom-list', { path: '/machine/peripheral' }),
  );
  return children.some((child) => child.name === dataDevice(volumeId));
}

async function backupJob(
  socket: string,
  snapshotId: string,
): Promise<{ status: string; error?: string } | undefined> {
  try {
    const jobs = await withQmp(socket, (qmp) =>
      qmp.execute<{ id: string; status: string; error?: string }[]>('query-jobs'),
    );
    return jobs.find((job) => job.id === jobId(snapshotId));
  } catch {
    return undefined;
  }
}

/** A step repeated after a crash finds its work done: QEMU says the node or device exists. */
function ignoreDuplicate(error: unknown): void {
  if (error instanceof QmpError && /already|Duplicate|in use/i.test(error.message)) return;
  throw error;
}

function ignoreMissing(error: unknown): void {
  if (error instanceof QmpError && error.qmpClass === 'DeviceNotFound') return;
  throw error;
}
