/**
 * The metrics collector: every NIMBUS_METRICS_INTERVAL_SECONDS it asks the driver for a sample of every
 * instance with monitoring on whose machine may be up, and writes the samples into the open hour block
 * of each instance (resources/metrics/blocks.ts, resources/metrics/store.ts).
 *
 * How it works. It is one durable job of the job runner (`metrics-collect:all`), so across replicas one
 * process collects at a time (the runner's lease) and a restart carries on where it was. A run samples
 * instances a page at a time; a sample that fails is skipped (reported to `onError`), the others are
 * written. Each page's blocks are written in one transaction (one commit on SQLite, where a commit is
 * an fsync). The run then seals what is over — the raw blocks of past hours are deflated and their
 * 5-minute rollups merged into the day's rollup block — and prunes what retention no longer keeps.
 *
 * Cost. A run makes a few store round trips per page of instances, whatever the page holds: the page
 * itself, one sampling call to the driver (ComputeDriver.sampleMetricsMany), and one write transaction.
 *
 * Open blocks. The hour being collected is kept in memory in its encoded form (BlockAppender), so a run
 * appends one delta per series to it and writes the bytes (plain, no deflate), instead of reading the
 * block back or encoding the hour so far again. The memory is trusted only when this process also ran
 * the previous collection: when the lease moved meanwhile, another process may have written the blocks
 * since, so they are read again.
 *
 * It also remembers each instance's latest sample, for the Prometheus gauges (`latestSamples`).
 */

import type { ComputeDriver, MachineSpec, MetricSample } from '../../drivers/driver.js';
import type { Clock } from '../../platform/domain/clock.js';
import type { JobHandler, JobRunner } from '../../platform/jobs/runner.js';
import type { Store } from '../../platform/store/db.js';
import { instanceTypeNamed } from '../catalog/catalog.js';
import { type Block, BlockAppender, decodeBlock, encodeBlock, putRow } from './blocks.js';
import { type MetricName, metricsOf, toQuanta } from './catalog.js';
import {
  blockStartOf,
  mergeRollups,
  metricOfRawColumn,
  RAW,
  ROLLUP,
  rawColumnId,
  rollupRows,
  slotsOf,
} from './rollups.js';
import { sampleMany } from './sampling.js';
import {
  blocksAt,
  type MonitoredInstance,
  monitoredInstances,
  monitoredInstancesById,
  pruneBlocks,
  type StoredBlock,
  unsealedBefore,
  upsertBlocks,
} from './store.js';

export const COLLECT_JOB = { kind: 'metrics-collect', subject: 'all' } as const;

/** Instances sampled (and blocks written in one transaction) at a time. */
const PAGE = 500;
/** Past hours sealed per run: enough to catch up after a day away within a few runs. */
const SEAL_PER_RUN = 2_000;

export interface LatestSample {
  accountId: string;
  instanceId: string;
  region: string;
  sample: MetricSample;
}

interface OpenBlock {
  accountId: string;
  startMs: number;
  block: BlockAppender;
}

/** A sample the collector wrote, with the instance as it read it (status and tags of this collection). */
export interface CollectedSample {
  instance: MonitoredInstance;
  sample: MetricSample;
}

export interface CollectorOptions {
  intervalMs: number;
  /**
   * Called once a collection's samples are written, with those samples (the alert evaluator). It runs in
   * the collector's job, so under its lease; a failure is reported to `onError`, never thrown.
   */
  afterCollection?: (at: Date, samples: readonly CollectedSample[]) => Promise<void>;
  /** Told of a sample or a write that failed; the run goes on without it. */
  onError?: (error: unknown, instanceId: string | null) => void;
}

export class MetricsCollector implements JobHandler {
  private readonly open = new Map<string, OpenBlock>();
  private readonly latest = new Map<string, LatestSample>();
  /** The collection time of this process's previous run, to know whether `open` can be trusted. */
  private lastTickMs: number | null = null;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly jobs: JobRunner,
    private readonly driver: ComputeDriver,
    private readonly options: CollectorOptions,
  ) {}

  /** Makes sure the collector's job exists (every process asks; the job is one row). */
  async start(): Promise<void> {
    await this.jobs.enqueue(this.store.db, COLLECT_JOB.kind, COLLECT_JOB.subject);
    this.jobs.wake();
  }

  /** Never lets the collector's job end: one that failed ten times in a row starts again at the next tick. */
  async giveUp(): Promise<void> {
    await this.start();
  }

  /** The latest sample of each instance this process collected, newer than two intervals. */
  latestSamples(): LatestSample[] {
    const oldest = this.clock.nowMs() - 2 * this.options.intervalMs;
    const fresh: LatestSample[] = [];
    for (const [id, entry] of this.latest) {
      if (Date.parse(entry.sample.timestamp) < oldest) this.latest.delete(id);
      else fresh.push(entry);
    }
    return fresh;
  }

  /** One collection; returns when the next one is due. */
  async run(): Promise<Date> {
    const interval = this.options.intervalMs;
    const tickMs = Math.floor(this.clock.nowMs() / interval) * interval;
    if (this.lastTickMs === null || tickMs - this.lastTickMs > interval) this.open.clear();
    this.lastTickMs = tickMs;
    const at = new Date(tickMs);
    let after = '';
    const sampled = new Set<string>();
    const collected: CollectedSample[] = [];
    for (;;) {
      const page = await monitoredInstances(this.store.db, after, PAGE);
      if (page.length === 0) break;
      await this.collectPage(page, at, collected);
      for (const instance of page) sampled.add(instance.id);
      after = (page.at(-1) as MonitoredInstance).id;
      if (page.length < PAGE) break;
    }
    await this.collectLastSamples(sampled, at, collected);
    if (this.options.afterCollection) {
      await this.options.afterCollection(at, collected).catch((error) => this.options.onError?.(error, null));
    }
    await this.sealPastHours(tickMs);
    await this.prune(tickMs);
    return new Date(tickMs + interval);
  }

  /**
   * A machine that stopped since the previous collection gets one more sample — zero, as the driver
   * reports a machine that is not running — so the series ends with the stop, then has no more points.
   */
  private async collectLastSamples(
    sampled: Set<string>,
    at: Date,
    collected: CollectedSample[],
  ): Promise<void> {
    const stopped = [...this.latest.values()]
      .filter((entry) => !sampled.has(entry.instanceId) && !isZero(entry.sample))
      .map((entry) => entry.instanceId);
    for (let i = 0; i < stopped.length; i += PAGE) {
      const ids = stopped.slice(i, i + PAGE);
      const found = await monitoredInstancesById(this.store.db, ids);
      for (const id of ids) if (!found.some((instance) => instance.id === id)) this.latest.delete(id);
      if (found.length > 0) await this.collectPage(found, at, collected);
    }
  }

  private async collectPage(
    page: MonitoredInstance[],
    at: Date,
    collected: CollectedSample[],
  ): Promise<void> {
    let samples: Map<string, MetricSample | Error>;
    try {
      samples = await sampleMany(this.driver, page.map(specOf), at);
    } catch (error) {
      this.options.onError?.(error, null);
      return;
    }
    const hourMs = blockStartOf(RAW, at.getTime());
    await this.loadOpenBlocks(
      page.filter((instance) => samples.has(instance.id)),
      hourMs,
    );
    const rows: StoredBlock[] = [];
    for (const instance of page) {
      const sample = samples.get(instance.id);
      if (sample === undefined) continue;
      if (sample instanceof Error) {
        this.options.onError?.(sample, instance.id);
        continue;
      }
      const sampledMs = Date.parse(sample.timestamp);
      if (blockStartOf(RAW, sampledMs) !== hourMs) continue;
      const open = this.openBlockFor(instance, hourMs);
      const values = rowOf(open.block.columnIds(), sample);
      if (values === null) continue;
      put(open, Math.floor((sampledMs - hourMs) / RAW.stepMs), values);
      rows.push({
        instance_id: instance.id,
        resolution: 'raw',
        block_start: iso(hourMs),
        account_id: open.accountId,
        sealed: false,
        points: open.block.points,
        data: open.block.bytes(),
      });
      this.latest.set(instance.id, {
        accountId: instance.account_id,
        instanceId: instance.id,
        region: instance.region,
        sample,
      });
      collected.push({ instance, sample });
    }
    if (rows.length === 0) return;
    const now = this.clock.now().toISOString();
    await this.store.db.transaction().execute((trx) => upsertBlocks(trx, rows, now));
  }

  /** Reads the open blocks memory does not hold (first run, or the lease came back from elsewhere). */
  private async loadOpenBlocks(instances: MonitoredInstance[], hourMs: number): Promise<void> {
    const missing = instances
      .filter((instance) => this.open.get(instance.id)?.startMs !== hourMs)
      .map((instance) => instance.id);
    if (missing.length === 0) return;
    for (const stored of await blocksAt(this.store.db, missing, 'raw', iso(hourMs))) {
      this.open.set(stored.instance_id, {
        accountId: stored.account_id,
        startMs: hourMs,
        block: BlockAppender.of(decodeBlock(stored.data)),
      });
    }
  }

  /**
   * The instance's open block for this hour, with a column per metric it has. When its metrics changed
   * within the hour (a resize onto or off a GPU type), the block keeps only the ones it shares.
   */
  private openBlockFor(instance: MonitoredInstance, hourMs: number): OpenBlock {
    const ids = rawColumnsOf(instance.instance_type);
    let open = this.open.get(instance.id);
    if (!open || open.startMs !== hourMs) {
      open = {
        accountId: instance.account_id,
        startMs: hourMs,
        block: BlockAppender.empty(slotsOf(RAW), ids),
      };
      this.open.set(instance.id, open);
      return open;
    }
    const held = open.block.columnIds();
    if (held.length !== ids.length || held.some((id) => !ids.includes(id))) {
      if (open.block.points === 0) open.block = BlockAppender.empty(slotsOf(RAW), ids);
      else open.block.keepColumns(ids);
    }
    return open;
  }

  /**
   * Raw blocks of hours before the current one: deflated, and their rollups merged into their day. The
   * day blocks are read in one query per day, and everything is written in one transaction.
   */
  private async sealPastHours(tickMs: number): Promise<void> {
    const currentHour = blockStartOf(RAW, tickMs);
    const past = await unsealedBefore(this.store.db, iso(currentHour), SEAL_PER_RUN);
    if (past.length === 0) return;
    const now = this.clock.now().toISOString();
    await this.store.db.transaction().execute(async (trx) => {
      const idsByDay = new Map<string, string[]>();
      for (const stored of past) {
        const day = iso(blockStartOf(ROLLUP, Date.parse(stored.block_start)));
        idsByDay.set(day, [...(idsByDay.get(day) ?? []), stored.instance_id]);
      }
      const days = new Map<string, { accountId: string; dayStart: string; block: Block | null }>();
      for (const [dayStart, ids] of idsByDay) {
        for (const stored of await blocksAt(trx, [...new Set(ids)], 'rollup', dayStart)) {
          days.set(`${stored.instance_id} ${dayStart}`, {
            accountId: stored.account_id,
            dayStart,
            block: decodeBlock(stored.data),
          });
        }
      }
      const rows: StoredBlock[] = [];
      for (const stored of past) {
        const hourMs = Date.parse(stored.block_start);
        const dayMs = blockStartOf(ROLLUP, hourMs);
        const key = `${stored.instance_id} ${iso(dayMs)}`;
        const day = days.get(key) ?? { accountId: stored.account_id, dayStart: iso(dayMs), block: null };
        const raw = decodeBlock(stored.data);
        day.block = mergeRollups(day.block, rollupRows(raw, hourMs, dayMs));
        days.set(key, day);
        rows.push({ ...stored, sealed: true, data: encodeBlock(raw, { seal: true }) });
        if (this.open.get(stored.instance_id)?.startMs === hourMs) this.open.delete(stored.instance_id);
      }
      for (const [key, day] of days) {
        if (day.block === null) continue;
        rows.push({
          instance_id: key.slice(0, key.indexOf(' ')),
          resolution: 'rollup',
          block_start: day.dayStart,
          account_id: day.accountId,
          sealed: false,
          points: day.block.present.length,
          data: encodeBlock(day.block, { seal: true }),
        });
      }
      await upsertBlocks(trx, rows, now);
    });
  }

  /** Raw blocks whose whole hour is older than 24 h, rollup blocks whose whole day is older than 30 days. */
  private async prune(tickMs: number): Promise<void> {
    await pruneBlocks(this.store.db, 'raw', iso(blockStartOf(RAW, tickMs - RAW.retentionMs)));
    await pruneBlocks(this.store.db, 'rollup', iso(blockStartOf(ROLLUP, tickMs - ROLLUP.retentionMs)));
  }
}

/** A sample of a machine that is not running (the driver reports zeros). */
function isZero(sample: MetricSample): boolean {
  return sample.cpu_percent === 0 && sample.memory_used_bytes === 0;
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

/** The raw columns of an instance type's metrics (cached per type: the collector asks for each sample). */
const columnsByType = new Map<string, number[]>();

function rawColumnsOf(typeName: string): number[] {
  let ids = columnsByType.get(typeName);
  if (ids === undefined) {
    ids = metricsOf(instanceTypeNamed(typeName)).map(rawColumnId);
    columnsByType.set(typeName, ids);
  }
  return ids;
}

/** The sample's values in quanta for these columns, or null when it lacks one of them. */
function rowOf(columnIds: readonly number[], sample: MetricSample): number[] | null {
  const values = new Array<number>(columnIds.length);
  for (let c = 0; c < columnIds.length; c++) {
    const metric = metricOfRawColumn(columnIds[c] as number) as MetricName;
    const value = sample[metric];
    if (typeof value !== 'number') return null;
    values[c] = toQuanta(metric, value);
  }
  return values;
}

/**
 * Puts a row into the open block: appended after its latest (every collection but a repeated one);
 * otherwise into the decoded block, which the appender then starts again from.
 */
function put(open: OpenBlock, slot: number, values: number[]): void {
  if (slot > open.block.latestSlot) {
    open.block.append(slot, values);
    return;
  }
  const ids = open.block.columnIds();
  const block = open.block.toBlock();
  putRow(block, slot, new Map(ids.map((id, c) => [id, values[c] as number])));
  open.block = BlockAppender.of(block);
}

function specOf(instance: MonitoredInstance): MachineSpec {
  return {
    id: instance.id,
    instanceType: instanceTypeNamed(instance.instance_type),
    image: instance.image,
    region: instance.region,
    userData: null,
    tags: instance.tags,
  };
}
