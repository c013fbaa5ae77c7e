/**
 * QEMU processes as the driver sees them: started daemonized (so they outlive the Nimbus that started
 * them, and a restarted Nimbus finds them by pid), recognised by their command line (a pid alone may
 * have been reused), and probed from outside: an SSH server answers with its banner.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { KVM_CPU } from './command-line.js';

/** Whether `pid` is a live process whose command line holds `marker` (the VM's own directory). */
export function isOurProcess(pid: number | null, marker: string): boolean {
  if (!pid || pid <= 0) return false;
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    if (!cmdline.split('\0').some((arg) => arg.includes(marker))) return false;
    // A process that has exited but is not yet reaped is no VM.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/** The pid QEMU wrote with -pidfile, or null. */
export function readPidFile(file: string): number | null {
  try {
    const pid = Number(readFileSync(file, 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/**
 * Runs QEMU with -daemonize: it returns once the VM is set up (sockets bound, pid file written) and
 * the VM runs on in the background, in a session of its own. Rejects with what QEMU printed.
 */
export function startDaemonized(binary: string, args: readonly string[], cwd: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString('utf8');
    });
    child.stderr.on('data', (chunk: Buffer) => {
      output += chunk.toString('utf8');
    });
    child.on('error', reject);
    child.on('close', (code, signal) => {
      if (code === 0) resolve();
      else reject(new Error(`QEMU did not start (${code ?? signal}): ${output.trim().slice(-2000)}`));
    });
  });
}

/** Waits up to `timeoutMs` for the process to be gone. */
export async function waitForExit(pid: number, marker: string, timeoutMs: number): Promise<boolean> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (!isOurProcess(pid, marker)) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return !isOurProcess(pid, marker);
}

/** SIGKILL, when the process is still ours. */
export function kill(pid: number, marker: string): void {
  if (!isOurProcess(pid, marker)) return;
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // gone meanwhile
  }
}

/**
 * Whether an SSH server answers at host:port: it sends its identification line ("SSH-2.0-…") first.
 * QEMU's port forward accepts the TCP connection before the guest does, so a connection alone says
 * nothing; the banner is what tells.
 */
export function sshAnswers(host: string, port: number, timeoutMs = 1500): Promise<boolean> {
  return answersAsSsh(net.createConnection({ host, port }), timeoutMs);
}

/** Whether what the stream first says is an SSH server's greeting; the stream is destroyed either way. */
export function answersAsSsh(stream: Duplex, timeoutMs = 1500): Promise<boolean> {
  return new Promise((resolve) => {
    let received = '';
    const done = (ok: boolean) => {
      clearTimeout(timer);
      stream.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    stream.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
      if (received.startsWith('SSH-')) done(true);
      else if (received.length >= 4) done(false);
    });
    stream.on('error', () => done(false));
    stream.on('close', () => done(false));
  });
}

/** Whether `port` on `host` can be bound now (nothing else listens there). */
export function portFree(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/** How long a Linux kernel may take to boot to its end under KVM in the probe (~1 s on an idle host). */
export const KVM_PROBE_MS = 15_000;

/**
 * KVM when it can boot a Linux guest. /dev/kvm may exist without that, and how it fails differs by host:
 * one refused `-cpu host` at once ("failed to set MSR 0x10a", then an abort); another (an Intel Xeon VM,
 * nested KVM) runs the firmware and the kernel's real-mode setup, then hangs for good where the kernel
 * enters protected mode, QEMU still alive. So the probe boots the image's own kernel, with the CPU model
 * the VMs get (command-line.ts) and no root disk: a kernel that ran to its end panics for want of a root
 * ("Kernel panic"), and only that counts. An earlier probe that took "still alive after 1.5 s" for
 * usable chose KVM on the hanging host, and every VM then missed its boot deadline. No kernel to probe
 * with (cloud images only): TCG, unless NIMBUS_QEMU_ACCEL=kvm says otherwise.
 */
export async function kvmUsable(
  binary: string,
  kernel: string | null,
  timeoutMs = KVM_PROBE_MS,
): Promise<boolean> {
  if (!existsSync('/dev/kvm') || kernel === null) return false;
  return bootsLinux(binary, ['-accel', 'kvm', ...KVM_CPU], kernel, timeoutMs);
}

/** Whether `kernel`, booted with `accel` and no root disk, runs to its end (its panic) within `timeoutMs`. */
export function bootsLinux(
  binary: string,
  accel: readonly string[],
  kernel: string,
  timeoutMs: number,
): Promise<boolean> {
  return new Promise((resolve) => {
    const child = spawn(
      binary,
      [
        ...accel,
        '-machine',
        'pc',
        '-m',
        '128',
        '-nodefaults',
        '-display',
        'none',
        '-no-reboot',
        '-serial',
        'stdio',
        '-kernel',
        kernel,
        '-append',
        'console=ttyS0 panic=-1 loglevel=4',
      ],
      { stdio: ['ignore', 'pipe', 'ignore'] },
    );
    let output = '';
    let settled = false;
    const done = (usable: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      child.kill('SIGKILL');
      resolve(usable);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    child.stdout.on('data', (chunk: Buffer) => {
      output = (output + chunk.toString('latin1')).slice(-4096);
      if (output.includes('Kernel panic')) done(true);
    });
    child.on('error', () => done(false));
    child.on('close', () => done(output.includes('Kernel panic')));
  });
}
