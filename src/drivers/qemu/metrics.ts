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
 * - net_rx_bps / net_tx_bps: the Ethernet frames the guest's NIC received and sent, counted on the host
 *   (NetTraffic below) over the time since the previous sample. QEMU 7.2 has no counter to read for a
 *   user-mode network: `query-stats` serves KVM's statistics only (its schemas are empty under TCG), and
 *   neither the netdev nor virtio-net has a counting property. So QEMU mirrors every frame of the
 *   netdev (`filter-mirror`, one per direction: command-line.ts) to a unix socket Nimbus listens on,
 *   and Nimbus adds up their lengths. Counted on the host, not reported by the guest, so a guest cannot
 *   make them up.
 *
 * Rates need a previous sample; they are kept per process in memory, so the first sample after a
 * Nimbus restart (or a new boot) reports disk and network rates of 0.
 */
import { readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import type { MetricSample } from '../driver.js';
import { withQmp } from './qmp.js';

const TICKS_PER_SECOND = 100; // USER_HZ on Linux

interface Previous {
  pid: number;
  at: number;
  cpuSeconds: number;
  readBytes: number;
  writtenBytes: number;
  rxBytes: number;
  txBytes: number;
}

export class QemuMetrics {
  private readonly previous = new Map<string, Previous>();
  readonly traffic = new NetTraffic();

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

    const { rxBytes, txBytes } = this.traffic.totals(id);

    const now = at.getTime();
    const before = this.previous.get(id);
    const same = before && before.pid === vm.pid && before.at < now;
    const since = same ? before.at : cpu.startedAt;
    const seconds = Math.max((now - since) / 1000, 0.001);
    const cpuSeconds = same ? cpu.seconds - before.cpuSeconds : cpu.seconds;
    const rate = (current: number, previous: number | undefined) =>
      same && previous !== undefined ? Math.max(0, Math.round((current - previous) / seconds)) : 0;
    this.previous.set(id, {
      pid: vm.pid,
      at: now,
      cpuSeconds: cpu.seconds,
      readBytes,
      writtenBytes,
      rxBytes,
      txBytes,
    });
    return {
      ...zero,
      cpu_percent: round1(Math.min(100, Math.max(0, (cpuSeconds / seconds / vm.vcpus) * 100))),
      memory_used_bytes: Math.min(vm.memoryBytes, memoryUsed ?? residentBytes(vm.pid)),
      disk_read_bps: rate(readBytes, before?.readBytes),
      disk_write_bps: rate(writtenBytes, before?.writtenBytes),
      net_rx_bps: rate(rxBytes, before?.rxBytes),
      net_tx_bps: rate(txBytes, before?.txBytes),
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

/**
 * The bytes each VM's NIC received (rx) and sent (tx), from QEMU's mirrors of its frames. Nimbus listens
 * on two unix sockets per VM; QEMU connects to them as a client (again within a second when Nimbus
 * restarts: `reconnect=1`) and writes each frame as a 4-byte big-endian length and the frame. While
 * nobody listens QEMU drops the copies, so the guest's network never waits on Nimbus being there; it
 * would wait if Nimbus stopped reading while connected, which a live Node process does not (it reads
 * every socket as data comes). Totals start at 0 with each Nimbus process; rates are differences.
 */
export class NetTraffic {
  private readonly servers = new Map<string, { servers: net.Server[]; sockets: Set<net.Socket> }>();
  private readonly counts = new Map<string, { rxBytes: number; txBytes: number }>();

  /** Listens on the VM's two sockets (once; again after a restart). */
  async open(id: string, files: { rx: string; tx: string }): Promise<void> {
    if (this.servers.has(id)) return;
    const counts = { rxBytes: 0, txBytes: 0 };
    this.counts.set(id, counts);
    const sockets = new Set<net.Socket>();
    const listen = async (file: string, add: (bytes: number) => void) => {
      const server = net.createServer((socket) => {
        sockets.add(socket);
        socket.on('close', () => sockets.delete(socket));
        const frames = new FrameLengths(add);
        socket.on('data', (chunk: Buffer) => frames.push(chunk));
        socket.on('error', () => socket.destroy());
      });
      rmSync(file, { force: true });
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(file, () => resolve());
      });
      return server;
    };
    const servers = [
      await listen(files.rx, (n) => {
        counts.rxBytes += n;
      }),
      await listen(files.tx, (n) => {
        counts.txBytes += n;
      }),
    ];
    this.servers.set(id, { servers, sockets });
  }

  totals(id: string): { rxBytes: number; txBytes: number } {
    return { ...(this.counts.get(id) ?? { rxBytes: 0, txBytes: 0 }) };
  }

  async close(id: string, files?: { rx: string; tx: string }): Promise<void> {
    const { servers, sockets } = this.servers.get(id) ?? { servers: [], sockets: new Set<net.Socket>() };
    this.servers.delete(id);
    this.counts.delete(id);
    for (const socket of sockets) socket.destroy();
    await Promise.all(
      servers.map(
        (server) =>
          new Promise<void>((resolve) => {
            server.close(() => resolve());
          }),
      ),
    );
    for (const file of files ? [files.rx, files.tx] : []) rmSync(file, { force: true });
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.servers.keys()].map((id) => this.close(id)));
  }
}

/** Reads filter-mirror's stream (length, frame, length, frame…) and reports each frame's length. */
export class FrameLengths {
  private header = Buffer.alloc(0);
  private remaining = 0;

  constructor(private readonly frame: (bytes: number) => void) {}

  push(chunk: Buffer): void {
    let at = 0;
    while (at < chunk.length) {
      if (this.remaining > 0) {
        const take = Math.min(this.remaining, chunk.length - at);
        this.remaining -= take;
        at += take;
        continue;
      }
      const take = Math.min(4 - this.header.length, chunk.length - at);
      this.header = Buffer.concat([this.header, chunk.subarray(at, at + take)]);
      at += take;
      if (this.header.length === 4) {
        this.remaining = this.header.readUInt32BE(0);
        this.header = Buffer.alloc(0);
        this.frame(this.remaining);
      }
    }
  }
}
