/**
 * The simulator's utilisation: realistic, and a pure function of the instance id and the time, so the
 * same question gets the same answer on any replica, at any time it is asked, without stored state.
 *
 * Shape of a machine's day: a baseline load of its own (5–60% CPU), a daily rhythm peaking in the
 * afternoon (its phase shifted per machine by up to ±3 h), slow wander (interpolated between random
 * knots five minutes apart), a little jitter per second, and now and then a spike (in about
 * one quarter-hour of sixteen, 1–3 minutes of up to 45 extra points). Memory follows load slowly; disk
 * and network rates follow it with wander of their own. GPU types run their GPUs harder than their
 * CPUs. A machine that is not running reports zero (the collector then stops asking once it is stopped).
 * Values carry the precision the store keeps (resources/metrics/catalog.ts): 0.1 %, 1 MiB, 1 kB/s.
 */
import { createHash } from 'node:crypto';
import type { MachineSpec, MetricSample } from '../driver.js';

/** Samples change every second (live streams may ask that often); the collector asks every 10 s. */
const SAMPLE_MS = 1_000;
const DAY_MS = 86_400_000;
const KNOT_MS = 300_000;
const SPIKE_WINDOW_MS = 900_000;
const MIB = 1_048_576;

/** A well-mixed 32-bit hash of (seed, label, n), as a number in [0, 1). */
function unit(seed: number, label: number, n: number): number {
  let h = Math.imul(seed ^ Math.imul(label, 0x9e3779b1), 0x85ebca6b) ^ n;
  h = Math.imul(h ^ (h >>> 16), 0x7feb352d);
  h = Math.imul(h ^ (h >>> 15), 0x846ca68b);
  h ^= Math.imul((n / 4294967296) | 0, 0xc2b2ae35);
  h = Math.imul(h ^ (h >>> 16), 0x27d4eb2d);
  return ((h ^ (h >>> 15)) >>> 0) / 4294967296;
}

/** Smooth random wander in [0, 1): cosine interpolation between knots `knotMs` apart. */
function wander(seed: number, label: number, atMs: number, knotMs: number): number {
  const position = atMs / knotMs;
  const knot = Math.floor(position);
  const t = (1 - Math.cos((position - knot) * Math.PI)) / 2;
  return unit(seed, label, knot) * (1 - t) + unit(seed, label, knot + 1) * t;
}

const seeds = new Map<string, number>();
function seedOf(id: string): number {
  let seed = seeds.get(id);
  if (seed === undefined) {
    seed = createHash('sha256').update(id).digest().readUInt32BE(0);
    if (seeds.size > 100_000) seeds.clear();
    seeds.set(id, seed);
  }
  return seed;
}

// Labels keep the random streams of the different quantities apart.
enum Stream {
  Baseline = 1,
  Phase,
  Cpu,
  Jitter,
  SpikeOn,
  SpikeAt,
  SpikeLength,
  SpikeHeight,
  Memory,
  DiskRead,
  DiskWrite,
  NetRx,
  NetTx,
  Gpu,
  Io,
}

/** Extra CPU points from a spike at this time, if one is under way. */
function spike(seed: number, atMs: number): number {
  const window = Math.floor(atMs / SPIKE_WINDOW_MS);
  if (unit(seed, Stream.SpikeOn, window) >= 1 / 16) return 0;
  const length = 60_000 + unit(seed, Stream.SpikeLength, window) * 120_000;
  const begin = window * SPIKE_WINDOW_MS + unit(seed, Stream.SpikeAt, window) * (SPIKE_WINDOW_MS - length);
  if (atMs < begin || atMs >= begin + length) return 0;
  return 20 + unit(seed, Stream.SpikeHeight, window) * 25;
}

const clamp = (value: number, low: number, high: number) => Math.min(high, Math.max(low, value));
const tenth = (value: number) => Math.round(value * 10) / 10;
const kilo = (value: number) => Math.round(value / 1000) * 1000;

/**
 * The tag that pins a running machine's metrics, for users testing their alerts (as `nimbus.sim/fault`
 * tests recovery code): `cpu_percent=95,memory_percent=80,net_rx_bps=1000000` — any of cpu_percent,
 * gpu_percent, memory_percent (of the type's memory) and the four byte rates. Entries it cannot read are
 * ignored; metrics it does not name keep their simulated values.
 */
export const METRICS_TAG = 'nimbus.sim/metrics';

const PINNABLE = new Set([
  'cpu_percent',
  'gpu_percent',
  'memory_percent',
  'disk_read_bps',
  'disk_write_bps',
  'net_rx_bps',
  'net_tx_bps',
]);

function pinned(sample: MetricSample, tag: string | undefined): MetricSample {
  if (tag === undefined) return sample;
  const out = { ...sample };
  for (const entry of tag.split(',')) {
    const [name, text] = entry.split('=').map((part) => part.trim());
    const value = Number(text);
    if (!name || !PINNABLE.has(name) || text === '' || !Number.isFinite(value) || value < 0) continue;
    if (name === 'memory_percent') {
      out.memory_used_bytes = Math.round((out.memory_total_bytes * Math.min(value, 100)) / 100 / MIB) * MIB;
    } else if (name === 'cpu_percent' || name === 'gpu_percent') {
      if (name === 'gpu_percent' && out.gpu_percent === undefined) continue;
      out[name] = tenth(Math.min(value, 100));
    } else {
      out[name as 'disk_read_bps'] = kilo(value);
    }
  }
  return out;
}

export function simulatedSample(spec: MachineSpec, when: Date, running: boolean): MetricSample {
  const sample = simulatedValues(spec, when, running);
  return running ? pinned(sample, spec.tags[METRICS_TAG]) : sample;
}

function simulatedValues(spec: MachineSpec, when: Date, running: boolean): MetricSample {
  const atMs = Math.floor(when.getTime() / SAMPLE_MS) * SAMPLE_MS;
  const timestamp = new Date(atMs).toISOString();
  const memoryTotal = spec.instanceType.memory_gb * 1024 * MIB;
  const gpu = spec.instanceType.gpu !== null;
  if (!running) {
    return {
      timestamp,
      cpu_percent: 0,
      memory_used_bytes: 0,
      memory_total_bytes: memoryTotal,
      disk_read_bps: 0,
      disk_write_bps: 0,
      net_rx_bps: 0,
      net_tx_bps: 0,
      ...(gpu ? { gpu_percent: 0 } : {}),
    };
  }
  const seed = seedOf(spec.id);
  const baseline = 5 + unit(seed, Stream.Baseline, 0) * 55;
  // Peak at 15:00 UTC, shifted by up to ±3 h per machine.
  const peakMs = 15 * 3_600_000 + (unit(seed, Stream.Phase, 0) - 0.5) * 6 * 3_600_000;
  const daily = (1 - Math.cos(((atMs - peakMs) / DAY_MS) * 2 * Math.PI + Math.PI)) / 2;
  const load = clamp(
    baseline * (0.4 + 0.6 * daily) +
      (wander(seed, Stream.Cpu, atMs, KNOT_MS) - 0.5) * 14 +
      (unit(seed, Stream.Jitter, atMs / SAMPLE_MS) - 0.5) * 2 +
      spike(seed, atMs),
    0.5,
    100,
  );
  const share = load / 100;
  const memoryShare = clamp(
    0.2 + 0.5 * share + 0.1 * wander(seed, Stream.Memory, atMs, 2 * KNOT_MS),
    0.05,
    0.95,
  );
  // Rates follow load, each with its own wander (2-minute knots) and a little per-sample jitter.
  const rate = (stream: Stream, peak: number) =>
    kilo(
      peak *
        share *
        (0.3 + wander(seed, stream, atMs, 120_000)) *
        (0.97 + 0.06 * unit(seed, Stream.Io, atMs / SAMPLE_MS + stream)),
    );
  return {
    timestamp,
    cpu_percent: tenth(load),
    memory_used_bytes: Math.round((memoryTotal * memoryShare) / MIB) * MIB,
    memory_total_bytes: memoryTotal,
    disk_read_bps: rate(Stream.DiskRead, 40_000_000),
    disk_write_bps: rate(Stream.DiskWrite, 20_000_000),
    net_rx_bps: rate(Stream.NetRx, 60_000_000),
    net_tx_bps: rate(Stream.NetTx, 30_000_000),
    ...(gpu
      ? {
          gpu_percent: tenth(
            clamp(30 + share * 70 + (wander(seed, Stream.Gpu, atMs, KNOT_MS) - 0.5) * 20, 0, 100),
          ),
        }
      : {}),
  };
}
