/**
 * The instance metrics Nimbus collects: names, units, and the precision each is stored at.
 *
 * Values are stored as integer multiples of their metric's `quantum` (see resources/metrics/blocks.ts):
 * percentages to a tenth of a point (what `top` shows), memory to a MiB, rates to a kB/s. Whatever a
 * driver reports is rounded to that on the way in, so a stored value is what every later read returns.
 * The precision is what makes samples small: the difference between two samples of a rate fits in two
 * bytes at 1 kB/s, where at 1 B/s it takes four.
 */
import type { InstanceType } from '../catalog/catalog.js';

export const METRIC_NAMES = [
  'cpu_percent',
  'memory_used_bytes',
  'memory_total_bytes',
  'disk_read_bps',
  'disk_write_bps',
  'net_rx_bps',
  'net_tx_bps',
  'gpu_percent',
] as const;

export type MetricName = (typeof METRIC_NAMES)[number];

export interface MetricInfo {
  name: MetricName;
  unit: 'percent' | 'bytes' | 'bytes_per_second';
  /** Stored values are integer multiples of this. */
  quantum: number;
  /** Only instance types with a GPU have it. */
  gpuOnly: boolean;
  help: string;
}

const info = (
  name: MetricName,
  unit: MetricInfo['unit'],
  quantum: number,
  help: string,
  gpuOnly = false,
): MetricInfo => ({ name, unit, quantum, gpuOnly, help });

export const METRICS: Readonly<Record<MetricName, MetricInfo>> = {
  cpu_percent: info('cpu_percent', 'percent', 0.1, 'CPU utilisation across all vCPUs'),
  memory_used_bytes: info('memory_used_bytes', 'bytes', 1_048_576, 'Memory in use by the guest'),
  memory_total_bytes: info('memory_total_bytes', 'bytes', 1_048_576, 'Memory of the instance type'),
  disk_read_bps: info('disk_read_bps', 'bytes_per_second', 1000, 'Disk reads'),
  disk_write_bps: info('disk_write_bps', 'bytes_per_second', 1000, 'Disk writes'),
  net_rx_bps: info('net_rx_bps', 'bytes_per_second', 1000, 'Network bytes received'),
  net_tx_bps: info('net_tx_bps', 'bytes_per_second', 1000, 'Network bytes sent'),
  gpu_percent: info('gpu_percent', 'percent', 0.1, 'GPU utilisation across all GPUs', true),
};

/** The metrics an instance of this type has, in catalogue order. */
export function metricsOf(type: Pick<InstanceType, 'gpu'>): MetricName[] {
  return METRIC_NAMES.filter((name) => type.gpu !== null || !METRICS[name].gpuOnly);
}

/** One sample of every metric an instance has, at one time (epoch milliseconds). */
export interface MetricPoint {
  at: number;
  values: Partial<Record<MetricName, number>>;
}

/** `value` rounded to the metric's precision, as an integer count of quanta. */
export function toQuanta(name: MetricName, value: number): number {
  return Math.round(value / METRICS[name].quantum);
}

/** The value an integer count of quanta stands for (percentages without binary-fraction noise). */
export function fromQuanta(name: MetricName, quanta: number): number {
  const quantum = METRICS[name].quantum;
  return quantum < 1 ? Number((quanta * quantum).toFixed(1)) : quanta * quantum;
}
