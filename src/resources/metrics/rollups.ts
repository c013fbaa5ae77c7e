/**
 * The two resolutions metrics are kept at, and the arithmetic between them: 10-second samples in
 * hour blocks for 24 hours, and 5-minute rollups (avg, min, max of each metric) in day blocks for 30
 * days. Pure functions over resources/metrics/blocks.ts; the store keeps the blocks, services decide when.
 */
import { type Block, emptyBlock, putRow } from './blocks.js';
import { METRIC_NAMES, type MetricName } from './catalog.js';

export interface Resolution {
  name: 'raw' | 'rollup';
  /** Time between two slots. */
  stepMs: number;
  /** Time one block covers (blocks start at multiples of it since the epoch). */
  blockMs: number;
  /** How long data is kept. */
  retentionMs: number;
}

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

export const RAW: Resolution = { name: 'raw', stepMs: 10_000, blockMs: HOUR_MS, retentionMs: DAY_MS };
export const ROLLUP: Resolution = {
  name: 'rollup',
  stepMs: 300_000,
  blockMs: DAY_MS,
  retentionMs: 30 * DAY_MS,
};

export const AGGREGATES = ['avg', 'min', 'max'] as const;
export type Aggregate = (typeof AGGREGATES)[number];

export function slotsOf(resolution: Resolution): number {
  return resolution.blockMs / resolution.stepMs;
}

export function blockStartOf(resolution: Resolution, atMs: number): number {
  return Math.floor(atMs / resolution.blockMs) * resolution.blockMs;
}

/** Raw blocks: one column per metric, its index in METRIC_NAMES. */
export function rawColumnId(metric: MetricName): number {
  return METRIC_NAMES.indexOf(metric);
}

/** Rollup blocks: three columns per metric (avg, min, max). */
export function rollupColumnId(metric: MetricName, aggregate: Aggregate): number {
  return METRIC_NAMES.indexOf(metric) * 3 + AGGREGATES.indexOf(aggregate);
}

export function metricOfRawColumn(id: number): MetricName | undefined {
  return METRIC_NAMES[id];
}

/**
 * The 5-minute rollup rows of one raw hour block: for each 5-minute slot with at least one sample, the
 * avg (rounded to the metric's quantum), min and max of every metric the block holds. Keys are the
 * rollup slot within the day block starting at `dayStartMs`.
 */
export function rollupRows(
  raw: Block,
  hourStartMs: number,
  dayStartMs: number,
): Map<number, Map<number, number>> {
  const perRollup = ROLLUP.stepMs / RAW.stepMs;
  const firstSlot = (hourStartMs - dayStartMs) / ROLLUP.stepMs;
  const rows = new Map<number, Map<number, number>>();
  let begin = 0;
  while (begin < raw.present.length) {
    const group = Math.floor((raw.present[begin] as number) / perRollup);
    let end = begin;
    while (end < raw.present.length && Math.floor((raw.present[end] as number) / perRollup) === group) end++;
    const row = new Map<number, number>();
    for (const column of raw.columns) {
      const metric = metricOfRawColumn(column.id);
      if (!metric) continue;
      let sum = 0;
      let min = Number.POSITIVE_INFINITY;
      let max = Number.NEGATIVE_INFINITY;
      for (let i = begin; i < end; i++) {
        const value = column.values[i] as number;
        sum += value;
        if (value < min) min = value;
        if (value > max) max = value;
      }
      row.set(rollupColumnId(metric, 'avg'), Math.round(sum / (end - begin)));
      row.set(rollupColumnId(metric, 'min'), min);
      row.set(rollupColumnId(metric, 'max'), max);
    }
    rows.set(firstSlot + group, row);
    begin = end;
  }
  return rows;
}

/** Adds rollup rows to a day block (a new one when `day` is null), widening its columns if needed. */
export function mergeRollups(day: Block | null, rows: Map<number, Map<number, number>>): Block {
  const first = rows.values().next().value;
  const ids = first ? [...first.keys()] : [];
  let block = day ?? emptyBlock(slotsOf(ROLLUP), ids);
  const known = new Set(block.columns.map((c) => c.id));
  if (ids.some((id) => !known.has(id)) && block.present.length > 0) {
    // A metric appeared (a resize onto a GPU type): earlier slots have no value for it; keep the
    // columns they share, since a block's columns cover every present slot.
    block = { ...block, columns: block.columns.filter((c) => ids.includes(c.id)) };
  } else if (block.present.length === 0) {
    block = emptyBlock(block.slots, ids);
  }
  for (const [slot, row] of rows) {
    const shared = new Map([...row].filter(([id]) => block.columns.some((c) => c.id === id)));
    putRow(block, slot, shared);
  }
  return block;
}

/**
 * A series read out of blocks, in time order: epoch ms and values in quanta as two parallel arrays (a
 * day of 10 s points is 8,640 of them per series; two flat arrays cost the collector nothing to fill,
 * where a pair per point is an allocation each).
 */
export interface QuantaSeries {
  times: number[];
  values: number[];
}

export function emptySeries(): QuantaSeries {
  return { times: [], values: [] };
}

/** Appends the points of one column of a block starting at `startMs` that fall inside [fromMs, toMs]. */
export function appendColumn(
  into: QuantaSeries,
  block: Block,
  columnId: number,
  startMs: number,
  stepMs: number,
  fromMs: number,
  toMs: number,
): void {
  const column = block.columns.find((c) => c.id === columnId);
  if (!column) return;
  for (let i = 0; i < block.present.length; i++) {
    const at = startMs + (block.present[i] as number) * stepMs;
    if (at >= fromMs && at <= toMs) {
      into.times.push(at);
      into.values.push(column.values[i] as number);
    }
  }
}

/** The series sorted by time (blocks read in two passes, day rollups then pending hours). */
export function sortSeries(series: QuantaSeries): QuantaSeries {
  const order = series.times
    .map((_, i) => i)
    .sort((a, b) => (series.times[a] as number) - (series.times[b] as number));
  return {
    times: order.map((i) => series.times[i] as number),
    values: order.map((i) => series.values[i] as number),
  };
}

/**
 * Points bucketed to `stepMs` (aligned to the epoch): one point per bucket that has any, at the bucket's
 * start, its value the bucket's avg, min or max. Buckets without points stay missing.
 */
export function bucketSeries(series: QuantaSeries, stepMs: number, aggregate: Aggregate): QuantaSeries {
  const out = emptySeries();
  const { times, values } = series;
  let i = 0;
  while (i < times.length) {
    const bucket = Math.floor((times[i] as number) / stepMs) * stepMs;
    let sum = 0;
    let count = 0;
    let min = Number.POSITIVE_INFINITY;
    let max = Number.NEGATIVE_INFINITY;
    while (i < times.length && (times[i] as number) < bucket + stepMs) {
      const value = values[i] as number;
      sum += value;
      count++;
      if (value < min) min = value;
      if (value > max) max = value;
      i++;
    }
    out.times.push(bucket);
    out.values.push(aggregate === 'avg' ? sum / count : aggregate === 'min' ? min : max);
  }
  return out;
}
