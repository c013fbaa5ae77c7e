/**
 * Reading an instance's metric history: the range and step checks, the choice of resolution, and the
 * series themselves out of the stored blocks.
 *
 * Resolution. A range that starts within the last 24 hours is answered from the 10-second samples;
 * one that starts earlier from the 5-minute rollups (the samples are gone by then). Rollup blocks are
 * written when an hour is over, so for the hours not rolled up yet the rollups are computed from their
 * samples on the way out: a 7-day graph reaches up to the last sample.
 *
 * Step. A multiple of 10 s (the route's schema); at least the resolution's own step (a smaller one is
 * raised to it); at most 11,000 points over the range. Points are bucketed to the step (aligned to the
 * epoch) with the aggregate asked for — for rollups, the avg of the avgs, min of the mins, max of the
 * maxes. A bucket without samples is a missing point, never a zero.
 */

import { instanceTypeNamed } from '../domain/catalog.js';
import type { Clock } from '../domain/clock.js';
import { decodeBlock } from '../domain/metric-blocks.js';
import { fromQuanta, METRICS, type MetricName, metricsOf } from '../domain/metric-catalog.js';
import {
  type Aggregate,
  appendColumn,
  blockStartOf,
  bucketSeries,
  emptySeries,
  mergeRollups,
  type QuantaSeries,
  RAW,
  type Resolution,
  ROLLUP,
  rawColumnId,
  rollupColumnId,
  rollupRows,
  sortSeries,
} from '../domain/metric-rollups.js';
import type { Store } from '../store/db.js';
import { findAccountInstance } from '../store/instances.js';
import { blocksBetween } from '../store/metrics.js';
import { InvalidRequest, NotFound } from './errors.js';

export const MAX_POINTS = 11_000;
const DEFAULT_RANGE_MS = 3_600_000;

export interface MetricsQuery {
  start?: string | undefined;
  end?: string | undefined;
  /** Seconds. */
  step?: number | undefined;
  /** Comma-separated metric names. */
  metrics?: string | undefined;
  aggregate?: Aggregate | undefined;
}

export interface MetricSeries {
  metric: MetricName;
  unit: string;
  points: [string, number][];
}

export interface MetricsAnswer {
  instance_id: string;
  start: string;
  end: string;
  step: number;
  aggregate: Aggregate;
  resolution: 'raw' | 'rollup';
  series: MetricSeries[];
}

export class MetricsService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
  ) {}

  async history(accountId: string, instanceId: string, query: MetricsQuery): Promise<MetricsAnswer> {
    const instance = await findAccountInstance(this.store.db, accountId, instanceId);
    if (!instance) throw new NotFound('instance', instanceId);
    const available = metricsOf(instanceTypeNamed(instance.instance_type));
    const metrics = chosenMetrics(query.metrics, available);
    const nowMs = this.clock.nowMs();
    const { startMs, endMs } = range(query, nowMs);
    const resolution = startMs >= nowMs - RAW.retentionMs ? RAW : ROLLUP;
    const stepMs = chosenStep(query.step, startMs, endMs, resolution);
    const aggregate = query.aggregate ?? 'avg';
    const format = isoFormatter();
    const points =
      resolution === RAW
        ? await this.rawPoints(instanceId, metrics, startMs, endMs)
        : await this.rollupPoints(instanceId, metrics, startMs, endMs, aggregate, nowMs);
    return {
      instance_id: instanceId,
      start: new Date(startMs).toISOString(),
      end: new Date(endMs).toISOString(),
      step: stepMs / 1000,
      aggregate,
      resolution: resolution.name,
      series: metrics.map((metric) => ({
        metric,
        unit: METRICS[metric].unit,
        points: pairs(
          metric,
          stepMs === resolution.stepMs
            ? (points.get(metric) ?? emptySeries())
            : bucketSeries(points.get(metric) ?? emptySeries(), stepMs, aggregate),
          format,
        ),
      })),
    };
  }

  private async rawPoints(
    instanceId: string,
    metrics: MetricName[],
    startMs: number,
    endMs: number,
  ): Promise<Map<MetricName, QuantaSeries>> {
    const blocks = await blocksBetween(
      this.store.db,
      instanceId,
      'raw',
      iso(blockStartOf(RAW, startMs)),
      iso(blockStartOf(RAW, endMs)),
    );
    const out = new Map<MetricName, QuantaSeries>(metrics.map((m) => [m, emptySeries()]));
    for (const stored of blocks) {
      const block = decodeBlock(stored.data);
      const blockMs = Date.parse(stored.block_start);
      for (const metric of metrics) {
        appendColumn(
          out.get(metric) as QuantaSeries,
          block,
          rawColumnId(metric),
          blockMs,
          RAW.stepMs,
          startMs,
          endMs,
        );
      }
    }
    return out;
  }

  /** Rollup points of one aggregate per metric, from day blocks and, for hours not rolled up yet, samples. */
  private async rollupPoints(
    instanceId: string,
    metrics: MetricName[],
    startMs: number,
    endMs: number,
    aggregate: Aggregate,
    nowMs: number,
  ): Promise<Map<MetricName, QuantaSeries>> {
    const fromMs = Math.max(startMs, nowMs - ROLLUP.retentionMs);
    const days = await blocksBetween(
      this.store.db,
      instanceId,
      'rollup',
      iso(blockStartOf(ROLLUP, fromMs)),
      iso(blockStartOf(ROLLUP, endMs)),
    );
    const pending = (
      await blocksBetween(
        this.store.db,
        instanceId,
        'raw',
        iso(blockStartOf(RAW, Math.max(fromMs, nowMs - RAW.retentionMs - RAW.blockMs))),
        iso(blockStartOf(RAW, endMs)),
      )
    ).filter((b) => !b.sealed);
    const out = new Map<MetricName, QuantaSeries>(metrics.map((m) => [m, emptySeries()]));
    const add = (block: ReturnType<typeof decodeBlock>, dayMs: number) => {
      for (const metric of metrics) {
        appendColumn(
          out.get(metric) as QuantaSeries,
          block,
          rollupColumnId(metric, aggregate),
          dayMs,
          ROLLUP.stepMs,
          fromMs,
          endMs,
        );
      }
    };
    for (const stored of days) add(decodeBlock(stored.data), Date.parse(stored.block_start));
    for (const stored of pending) {
      const hourMs = Date.parse(stored.block_start);
      const dayMs = blockStartOf(ROLLUP, hourMs);
      add(mergeRollups(null, rollupRows(decodeBlock(stored.data), hourMs, dayMs)), dayMs);
    }
    if (pending.length > 0) for (const [metric, series] of out) out.set(metric, sortSeries(series));
    return out;
  }
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

const TWO = Array.from({ length: 60 }, (_, n) => String(n).padStart(2, '0'));
const DAY_MS = 86_400_000;

/**
 * ISO 8601 of times, exactly as toISOString() writes them, made once per timestamp for all the series of
 * an answer, and for whole seconds without a Date (the date part once per day). A day of 10 s points has
 * 60,480 timestamps across its series; toISOString() on each took most of a 24 h query's time.
 */
export function isoFormatter(): (ms: number) => string {
  const days = new Map<number, string>();
  const made = new Map<number, string>();
  return (ms) => {
    const known = made.get(ms);
    if (known !== undefined) return known;
    const text = format(ms);
    made.set(ms, text);
    return text;
  };
  function format(ms: number): string {
    if (ms % 1000 !== 0) return iso(ms);
    const dayMs = Math.floor(ms / DAY_MS) * DAY_MS;
    let prefix = days.get(dayMs);
    if (prefix === undefined) {
      prefix = iso(dayMs).slice(0, 11);
      days.set(dayMs, prefix);
    }
    const seconds = (ms - dayMs) / 1000;
    const hours = Math.floor(seconds / 3600);
    const minutes = Math.floor((seconds % 3600) / 60);
    return `${prefix}${TWO[hours]}:${TWO[minutes]}:${TWO[seconds % 60]}.000Z`;
  }
}

/** The series as the API shows it: [timestamp, value] pairs, a timestamp's text made once for all series. */
function pairs(metric: MetricName, series: QuantaSeries, format: (ms: number) => string): [string, number][] {
  const out = new Array<[string, number]>(series.times.length);
  for (let i = 0; i < out.length; i++) {
    out[i] = [format(series.times[i] as number), shown(metric, series.values[i] as number)];
  }
  return out;
}

/** A value in quanta as the API shows it: percentages to 0.01, byte counts and rates whole. */
function shown(metric: MetricName, quanta: number): number {
  const info = METRICS[metric];
  if (info.quantum < 1) return Math.round(quanta * info.quantum * 100) / 100;
  return Number.isInteger(quanta) ? fromQuanta(metric, quanta) : Math.round(quanta * info.quantum);
}

function chosenMetrics(list: string | undefined, available: MetricName[]): MetricName[] {
  if (list === undefined) return available;
  const names = list.split(',').map((name) => name.trim());
  const chosen: MetricName[] = [];
  for (const name of names) {
    if (!available.includes(name as MetricName)) {
      throw new InvalidRequest(
        name in METRICS
          ? `metrics: ${name} is for GPU instance types only`
          : `metrics: ${JSON.stringify(name)} is not a metric of this instance`,
        { field: 'metrics', value: name, allowed_values: available },
      );
    }
    if (!chosen.includes(name as MetricName)) chosen.push(name as MetricName);
  }
  return chosen;
}

function range(query: MetricsQuery, nowMs: number): { startMs: number; endMs: number } {
  const endMs = query.end !== undefined ? Date.parse(query.end) : nowMs;
  const startMs = query.start !== undefined ? Date.parse(query.start) : endMs - DEFAULT_RANGE_MS;
  if (endMs < startMs) {
    throw new InvalidRequest('end must not be before start', {
      field: 'end',
      value: query.end ?? iso(endMs),
      start: iso(startMs),
    });
  }
  if (endMs - startMs > ROLLUP.retentionMs) {
    throw new InvalidRequest('The range from start to end must not be longer than 30 days', {
      field: 'start',
      value: query.start ?? iso(startMs),
      end: iso(endMs),
      max_range_seconds: ROLLUP.retentionMs / 1000,
    });
  }
  return { startMs, endMs };
}

function chosenStep(
  stepSeconds: number | undefined,
  startMs: number,
  endMs: number,
  resolution: Resolution,
): number {
  const asked = (stepSeconds ?? resolution.stepMs / 1000) * 1000;
  const points = Math.floor((endMs - startMs) / asked) + 1;
  if (points > MAX_POINTS) {
    const minimum = Math.ceil((endMs - startMs) / (MAX_POINTS - 1) / 10_000) * 10;
    throw new InvalidRequest(
      `step ${asked / 1000} s gives ${points} points over this range; at most ${MAX_POINTS} are answered (step at least ${minimum} s)`,
      { field: 'step', value: asked / 1000, minimum, max_points: MAX_POINTS },
    );
  }
  return Math.max(asked, resolution.stepMs);
}
