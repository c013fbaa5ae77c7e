/**
 * Where the QEMU driver keeps things, and its durable records. Everything lives under
 * `<data dir>/qemu` (mode 0700; every file 0600):
 *
 *   machines/<instance id>/machine.json   what the driver needs to find the VM again (pid, port, type…)
 *   machines/<instance id>/root.qcow2     the root disk: a thin overlay on the image's root.qcow2
 *   machines/<instance id>/seed.iso       the NoCloud seed (cidata): hostname, SSH keys, user data
 *   machines/<instance id>/serial.log     the guest's console, appended boot after boot
 *   machines/<instance id>/qemu.pid       written by QEMU itself
 *   volumes/<volume id>.qcow2 + .json     data volumes and their attachment
 *   snapshots/<snapshot id>.qcow2 + .json crash-consistent copies of disks
 *   run/<instance id>.qmp / .meta          the QMP socket and the metadata socket of each VM
 *
 * A unix socket's path must fit in 107 bytes; when `run/` under the data dir is too deep for that, the
 * sockets go to a private directory under the system's temporary directory instead (named after the
 * data dir, mode 0700, checked to be ours).
 *
 * Records are JSON written to a temporary file and renamed over the old one, so a crash leaves either the
 * old record or the new one, never half of one.
 */
import { createHash } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  existsSync,
  fsyncSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** The longest unix socket path Linux takes (sun_path is 108 bytes with its terminating NUL). */
const MAX_SOCKET_PATH = 107;
/** The longest id that may name a socket (prefix, underscore, 26 characters). */
const LONGEST_ID = 'snap_'.length + 26;

export class QemuPaths {
  readonly root: string;
  readonly machines: string;
  readonly volumes: string;
  readonly snapshots: string;
  readonly run: string;
  /** The KVM probe's remembered "no" (kvm-verdict.ts). */
  readonly kvmVerdict: string;

  constructor(dataDir: string) {
    this.root = path.join(path.resolve(dataDir), 'qemu');
    this.kvmVerdict = path.join(this.root, 'kvm-verdict.json');
    this.machines = path.join(this.root, 'machines');
    this.volumes = path.join(this.root, 'volumes');
    this.snapshots = path.join(this.root, 'snapshots');
    const run = path.join(this.root, 'run');
    this.run =
      run.length + 1 + LONGEST_ID + '.meta'.length <= MAX_SOCKET_PATH
        ? run
        : path.join(
            os.tmpdir(),
            `nimbus-${process.getuid?.() ?? 0}-${createHash('sha256').update(this.root).digest('hex').slice(0, 12)}`,
          );
    for (const dir of [this.root, this.machines, this.volumes, this.snapshots, this.run]) privateDir(dir);
  }

  machineDir(id: string): string {
    return path.join(this.machines, safeId(id));
  }

  machineFile(id: string, file: 'machine.json' | 'root.qcow2' | 'seed.iso' | 'serial.log' | 'qemu.pid') {
    return path.join(this.machineDir(id), file);
  }

  qmpSocket(id: string): string {
    return path.join(this.run, `${safeId(id)}.qmp`);
  }

  metadataSocket(id: string): string {
    return path.join(this.run, `${safeId(id)}.meta`);
  }

  volumeDisk(id: string): string {
    return path.join(this.volumes, `${safeId(id)}.qcow2`);
  }

  volumeRecord(id: string): string {
    return path.join(this.volumes, `${safeId(id)}.json`);
  }

  snapshotDisk(id: string): string {
    return path.join(this.snapshots, `${safeId(id)}.qcow2`);
  }

  snapshotRecord(id: string): string {
    return path.join(this.snapshots, `${safeId(id)}.json`);
  }

  /** The ids of every machine with a directory. */
  machineIds(): string[] {
    return readdirSync(this.machines).filter((name) => ID.test(name));
  }
}

const ID = /^[a-z]{2,5}_[0-9a-z]{1,40}$/;

/** Ids name files: only the shape Nimbus makes gets through. */
export function safeId(id: string): string {
  if (!ID.test(id)) throw new Error(`qemu driver: refusing the id ${JSON.stringify(id)}`);
  return id;
}

/** A directory only we can enter; one that exists must be a directory of ours, not a link. */
export function privateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const stat = lstatSync(dir);
  if (!stat.isDirectory() || (process.getuid && stat.uid !== process.getuid())) {
    throw new Error(`qemu driver: ${dir} is not a directory of this user`);
  }
  if ((stat.mode & 0o077) !== 0) chmodSync(dir, 0o700);
}

/** Reads a JSON record; undefined when there is none. */
export function readRecord<T>(file: string): T | undefined {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as T;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/** Writes a JSON record durably: a temporary file, fsync, rename over the old one (mode 0600). */
export function writeRecord(file: string, record: unknown): void {
  writeFileDurably(file, `${JSON.stringify(record, null, 2)}\n`);
}

export function writeFileDurably(file: string, data: string | Buffer): void {
  const tmp = `${file}.tmp-${process.pid}`;
  const fd = openSync(tmp, 'w', 0o600);
  try {
    writeSync(fd, typeof data === 'string' ? Buffer.from(data) : data);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, file);
}

export function removeFile(file: string): void {
  rmSync(file, { force: true });
}

export function exists(file: string): boolean {
  return existsSync(file);
}
