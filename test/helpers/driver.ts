/**
 * The compute driver the HTTP suites run against. The simulator by default; NIMBUS_TEST_DRIVER=qemu
 * (`npm run test:qemu-instances`, vitest.qemu.config.ts) makes every suite server boot real VMs with the
 * qemu driver, so the instance suites check the same API against real machines. Cases that rest on
 * what only the simulator has (a fault tag holding an instance) skip under qemu with the reason in
 * their name (QEMU_SKIP, qemuSkipName); suites resting on simulated time are left out of that run
 * (docs/testing.md lists both).
 */
import { readdirSync, readFileSync } from 'node:fs';

export type TestDriver = 'simulator' | 'qemu';

export const TEST_DRIVER: TestDriver = process.env.NIMBUS_TEST_DRIVER === 'qemu' ? 'qemu' : 'simulator';
export const UNDER_QEMU = TEST_DRIVER === 'qemu';

/**
 * The reason a case cannot run against real VMs, as vitest shows it: the skipped case's name is
 * prefixed with it, so a reader of the run (or of the JUnit report) sees why.
 */
export const QEMU_SKIP = {
  faults: '[simulator only: a fault-injection tag holds the instance or fails its boot]',
} as const;

/**
 * A case name for `it`/`it.skipIf(UNDER_QEMU)`: under qemu the name carries the reason it is skipped.
 * Used as `it.skipIf(UNDER_QEMU)(qemuSkipName(name, QEMU_SKIP.faults), …)`.
 */
export function qemuSkipName(name: string, reason: string): string {
  return UNDER_QEMU ? `${name} ${reason}` : name;
}

/**
 * Pids of the QEMU processes whose command line mentions `marker`: a data dir (their files are under
 * it) or an instance id. A test server's close leaves its VMs running, as `serve` does for adoption
 * after a restart; the suites kill them so that none outlives its server.
 */
export function qemuProcessesMentioning(marker: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (cmdline.startsWith('qemu-system') && cmdline.includes(marker)) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

/** Pids of the QEMU processes started for a data dir. */
export function qemuProcessesOf(dataDir: string): number[] {
  return qemuProcessesMentioning(`${dataDir}/`);
}

/**
 * The stores a suite runs on: under qemu SQLite only. The driver is what that run checks, and the store
 * is the same under either driver; booting every VM a second time for PostgreSQL would double the
 * minutes the run takes on two cores.
 */
export function storesFor<T extends string>(stores: readonly T[]): T[] {
  return UNDER_QEMU ? stores.filter((store) => store === 'sqlite') : [...stores];
}
