/**
 * The KVM probe's "no", remembered in the data dir. On a host whose KVM hangs a guest the probe waits out
 * its whole deadline (process.ts, KVM_PROBE_MS) on every start; the same host, QEMU and guest kernel
 * give the same answer, so a start finds it here instead. Only "no" is kept: it costs a slower guest
 * (TCG) at worst, while a stale "yes" would hang every VM, and a "yes" is quick to find again anyway.
 * Deleting the file makes the next start probe again.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { kvmUsable } from './process.js';

type Probe = (binary: string, kernel: string | null) => Promise<boolean>;

/** What the answer depends on: the host's kernel, QEMU's version and the guest kernel file. */
function probeKey(binary: string, kernel: string): string {
  const version = spawnSync(binary, ['--version'], { encoding: 'utf8' }).stdout?.split('\n')[0] ?? '';
  const file = statSync(kernel);
  return JSON.stringify([os.release(), version, kernel, file.size, file.mtimeMs]);
}

function rememberedNo(file: string, key: string): boolean {
  try {
    return (JSON.parse(readFileSync(file, 'utf8')) as { kvm_unusable_for?: string }).kvm_unusable_for === key;
  } catch {
    return false;
  }
}

export async function kvmUsableRemembered(
  binary: string,
  kernel: string | null,
  file: string,
  probe: Probe = kvmUsable,
): Promise<boolean> {
  // Without /dev/kvm (or a kernel to probe with) the answer is immediate, and /dev/kvm may appear later.
  if (kernel === null || !existsSync('/dev/kvm')) return probe(binary, kernel);
  const key = probeKey(binary, kernel);
  if (rememberedNo(file, key)) return false;
  const usable = await probe(binary, kernel);
  if (!usable) writeFileSync(file, `${JSON.stringify({ kvm_unusable_for: key })}\n`, { mode: 0o600 });
  return usable;
}
