/**
 * Metrics of real VMs, for the same collector and streams as the simulator's:
 *
 * - cpu_percent: the QEMU process's CPU time (user + system, /proc/<pid>/stat) over the wall time since
 *   the previous sample, divided by the VM's vCPUs (so 100 % is every vCPU busy); the first sample of a
 *   process measures from its start. It includes QEMU's own work for the guest (device emulation; all
 *   of it under TCG), as a host's view of a VM does.
 * - memory_used_bytes: the guest's own figure through the balloon driver's statistics (total minus
 *   available), which QEMU refreshes every 5 s; the process's resident memory when the guest gives none.
 * - disk_read_bps / disk_write_bps: bytes read and written by the guest on all its disks
 *   (QMP `query-blockstats`) over the time since the previous sample.
 * - net_rx_bps / net_tx_bps: 0 — QEMU's user-mode network keeps no counters QMP can read (docs/api.md).
 *
 * Rates need a previous sample; they are kept per process in memory, so the first sample after a
 * Nimbus restart (or a new boot) reports disk rates of 0.
 */
import { readFileSync } from 'node:fs';
import type { MetricSample } from '../driver.js';
import { withQmp } from './qmp.js';

const TICKS_PER_SECOND = 100; // USER_HZ on Linux

interface Previous {
  pid: number;
  at: number;
  cpuSeconds: number;
  readBytes: number;
  writtenBytes: number;
}

export class QemuMetrics {
  private readonly previous = new Map<string, Previous>();

  async sample(
    id: string,
    vm: { pid: number; qmpSocket: string; vcpus: number; memoryBytes: number } | null,
    at: Date,
  ): Promise<MetricSample> {
    const zero: MetricSample = {
      timestamp: at.toISOString(),
      cpu_percent: 0,
      memory_used_bytes: 0,
      memory_total_bytes: vm?.memoryBytes ?? 0,
      disk_read_bps: 0,
      disk_write_bps: 0,
      net_rx_bps: 0,
      net_tx_bps: 0,
    };
    if (!vm) {
      this.previous.delete(id);
      return zero;
    }
    const cpu = processCpu(vm.pid);
    if (!cpu) return zero;
    const { memoryUsed, readBytes, writtenBytes } = await withQmp(vm.qmpSocket, async (qmp) => {
      const stats = await qmp
        .execute<{ stats?: Record<string, number> }>('qom-get', {
          path: '/machine/peripheral/balloon0',
          property: 'guest-stats',
        })
        .catch(() => ({ stats: undefined }));
      const total = stats.stats?.['stat-total-memory'] ?? -1;
      const available = stats.stats?.['stat-available-memory'] ?? stats.stats?.['stat-free-memory'] ?? -1;
      const blocks =
        await qmp.execute<{ stats: { rd_bytes: number; wr_bytes: number } }[]>('query-blockstats');
      return {
        memoryUsed: total > 0 && available >= 0 ? total - available : null,
        readBytes: blocks.reduce((sum, b) => sum + b.stats.rd_bytes, 0),
        writtenBytes: blocks.reduce((sum, b) => sum + b.stats.wr_bytes, 0),
      };
    }).catch(() => ({ memoryUsed: null, readBytes: 0, writtenBytes: 0 }));

    const now = at.getTime();
    const before = this.previous.get(id);
    const same = before && before.pid === vm.pid && before.at < now;
    const since = same ? before.at : cpu.startedAt;
    const seconds = Math.max((now - since) / 1000, 0.001);
    const cpuSeconds = same ? cpu.seconds - before.cpuSeconds : cpu.seconds;
    this.previous.set(id, { pid: vm.pid, at: now, cpuSeconds: cpu.seconds, readBytes, writtenBytes });
    return {
      ...zero,
      cpu_percent: round1(Math.min(100, Math.max(0, (cpuSeconds / seconds / vm.vcpus) * 100))),
      memory_used_bytes: Math.min(vm.memoryBytes, memoryUsed ?? residentBytes(vm.pid)),
      disk_read_bps: same ? Math.max(0, Math.round((readBytes - before.readBytes) / seconds)) : 0,
      disk_write_bps: same ? Math.max(0, Math.round((writtenBytes - before.writtenBytes) / seconds)) : 0,
    };
  }
}

const round1 = (n: number) => Math.round(n * 10) / 10;

/** CPU seconds used by the process, and when it started (ms since the epoch). */
function processCpu(pid: number): { seconds: number; startedAt: number } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // After the command: state is field 3, utime 14, stime 15, starttime 22 (1-based, man proc).
    const utime = Number(fields[11]);
    const stime = Number(fields[12]);
    const startTicks = Number(fields[19]);
    const uptime = Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]);
    const startedAt = Date.now() - (uptime - startTicks / TICKS_PER_SECOND) * 1000;
    return { seconds: (utime + stime) / TICKS_PER_SECOND, startedAt };
  } catch {
    return null;
  }
}

function residentBytes(pid: number): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
    return kb * 1024;
  } catch {
    return 0;
  }
}
