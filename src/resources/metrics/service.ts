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

import type { Clock } from '../../platform/domain/clock.js';
import { InvalidRequest, NotFound } from '../../platform/errors.js';
import type { Store } from '../../platform/store/db.js';
import { instanceTypeNamed } from '../catalog/catalog.js';
import { findAccountInstance } from '../instances/store.js';
import { decodeBlock } from './blocks.js';
import { fromQuanta, METRICS, type MetricName, metricsOf } from './catalog.js';
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
} from './rollups.js';
import { blocksBetween } from './store.js';

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

/**
 * One series: its points as two parallel arrays, epoch milliseconds and values as the API shows them.
 * The answer is written out as `[timestamp, value]` pairs by resources/metrics/history-body.ts; a day of
 * 10 s points is 60,480 of them over the seven series, and a pair, a string and an array per point cost
 * more than everything else the query does.
 */
export interface MetricSeries {
  metric: MetricName;
  unit: string;
  times: number[];
  values: number[];
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
      series: metrics.map((metric) => {
        const quanta = points.get(metric) ?? emptySeries();
        const series = stepMs === resolution.stepMs ? quanta : bucketSeries(quanta, stepMs, aggregate);
        return {
          metric,
          unit: METRICS[metric].unit,
          times: series.times,
          values: shownValues(metric, series),
        };
      }),
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
    const pending = await blocksBetween(
      this.store.db,
      instanceId,
      'raw',
      iso(blockStartOf(RAW, Math.max(fromMs, nowMs - RAW.retentionMs - RAW.blockMs))),
      iso(blockStartOf(RAW, endMs)),
      { unsealedOnly: true },
    );
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

/** The series' values as the API shows them. */
function shownValues(metric: MetricName, series: QuantaSeries): number[] {
  const out = new Array<number>(series.values.length);
  for (let i = 0; i < out.length; i++) out[i] = shown(metric, series.values[i] as number);
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
