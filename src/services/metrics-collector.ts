/**
 * The metrics collector: every NIMBUS_METRICS_INTERVAL_SECONDS it asks the driver for a sample of every
 * instance with monitoring on whose machine may be up, and writes the samples into the open hour block
 * of each instance (domain/metric-blocks.ts, store/metrics.ts).
 *
 * How it works. It is one durable job of the job runner (`metrics-collect:all`), so across replicas one
 * process collects at a time (the runner's lease) and a restart carries on where it was. A run samples
 * instances a page at a time; a sample that fails is skipped (reported to `onError`), the others are
 * written. Each page's blocks are written in one transaction (one commit on SQLite, where a commit is
 * an fsync). The run then seals what is over — the raw blocks of past hours are deflated and their
 * 5-minute rollups merged into the day's rollup block — and prunes what retention no longer keeps.
 *
 * Open blocks. The hour being collected is kept decoded in memory, so a run appends to it and
 * re-encodes it (plain, no deflate) instead of reading it back. The memory is trusted only when this
 * process also ran the previous collection: when the lease moved meanwhile, another process may have
 * written the blocks since, so they are read again.
 *
 * It also remembers each instance's latest sample, for the Prometheus gauges (`latestSamples`).
 */

import { instanceTypeNamed } from '../domain/catalog.js';
import type { Clock } from '../domain/clock.js';
import { type Block, decodeBlock, emptyBlock, encodeBlock, putRow } from '../domain/metric-blocks.js';
import { type MetricName, metricsOf, toQuanta } from '../domain/metric-catalog.js';
import {
  blockStartOf,
  mergeRollups,
  RAW,
  ROLLUP,
  rawColumnId,
  rollupRows,
  slotsOf,
} from '../domain/metric-rollups.js';
import type { ComputeDriver, MachineSpec, MetricSample } from '../drivers/driver.js';
import type { JobRunner } from '../jobs/runner.js';
import type { Store } from '../store/db.js';
import {
  blocksAt,
  blocksBetween,
  type MonitoredInstance,
  monitoredInstances,
  monitoredInstancesById,
  pruneBlocks,
  type StoredBlock,
  unsealedBefore,
  upsertBlocks,
} from '../store/metrics.js';

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
  block: Block;
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

export class MetricsCollector {
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
  ) {
    jobs.register(COLLECT_JOB.kind, {
      run: () => this.run(),
      giveUp: async () => {
        // Never let the collector's job end: start it again at the next tick.
        await this.start();
      },
    });
  }

  /** Makes sure the collector's job exists (every process asks; the job is one row). */
  async start(): Promise<void> {
    await this.jobs.enqueue(this.store.db, COLLECT_JOB.kind, COLLECT_JOB.subject);
    this.jobs.wake();
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
    const samples = await Promise.all(
      page.map(async (instance) => {
        try {
          return { instance, sample: await this.driver.sampleMetrics(specOf(instance), at) };
        } catch (error) {
          this.options.onError?.(error, instance.id);
          return null;
        }
      }),
    );
    const taken = samples.filter(
      (s): s is { instance: MonitoredInstance; sample: MetricSample } => s !== null,
    );
    const hourMs = blockStartOf(RAW, at.getTime());
    await this.loadOpenBlocks(
      taken.map((s) => s.instance),
      hourMs,
    );
    const now = this.clock.now().toISOString();
    const rows: StoredBlock[] = [];
    for (const { instance, sample } of taken) {
      const sampledMs = Date.parse(sample.timestamp);
      if (blockStartOf(RAW, sampledMs) !== hourMs) continue;
      const metrics = metricsOf(instanceTypeNamed(instance.instance_type));
      const open = this.openBlockFor(instance, hourMs, metrics);
      const row = new Map<number, number>();
      for (const column of open.block.columns) {
        const metric = metrics.find((m) => rawColumnId(m) === column.id);
        const value = metric ? sample[metric] : undefined;
        if (typeof value === 'number' && metric) row.set(column.id, toQuanta(metric, value));
      }
      if (row.size !== open.block.columns.length) continue;
      putRow(open.block, Math.floor((sampledMs - hourMs) / RAW.stepMs), row);
      rows.push(storedRaw(instance.id, open, false));
      this.latest.set(instance.id, {
        accountId: instance.account_id,
        instanceId: instance.id,
        region: instance.region,
        sample,
      });
      collected.push({ instance, sample });
    }
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
        block: decodeBlock(stored.data),
      });
    }
  }

  /**
   * The instance's open block for this hour, with a column per metric it has. When its metrics changed
   * within the hour (a resize onto or off a GPU type), the block keeps only the ones it shares.
   */
  private openBlockFor(instance: MonitoredInstance, hourMs: number, metrics: MetricName[]): OpenBlock {
    const ids = metrics.map(rawColumnId);
    let open = this.open.get(instance.id);
    if (!open || open.startMs !== hourMs) {
      open = { accountId: instance.account_id, startMs: hourMs, block: emptyBlock(slotsOf(RAW), ids) };
      this.open.set(instance.id, open);
    } else if (
      open.block.columns.some((c) => !ids.includes(c.id)) ||
      open.block.columns.length < ids.length
    ) {
      const block =
        open.block.present.length === 0
          ? emptyBlock(slotsOf(RAW), ids)
          : { ...open.block, columns: open.block.columns.filter((c) => ids.includes(c.id)) };
      open = { ...open, block };
      this.open.set(instance.id, open);
    }
    return open;
  }

  /** Raw blocks of hours before the current one: deflated, and their rollups merged into their day. */
  private async sealPastHours(tickMs: number): Promise<void> {
    const currentHour = blockStartOf(RAW, tickMs);
    const past = await unsealedBefore(this.store.db, iso(currentHour), SEAL_PER_RUN);
    if (past.length === 0) return;
    const now = this.clock.now().toISOString();
    await this.store.db.transaction().execute(async (trx) => {
      const rows: StoredBlock[] = [];
      for (const stored of past) {
        const hourMs = Date.parse(stored.block_start);
        const dayMs = blockStartOf(ROLLUP, hourMs);
        const raw = decodeBlock(stored.data);
        const [existing] = await blocksBetween(trx, stored.instance_id, 'rollup', iso(dayMs), iso(dayMs));
        const pending = rows.find(
          (r) =>
            r.instance_id === stored.instance_id && r.resolution === 'rollup' && r.block_start === iso(dayMs),
        );
        const dayBytes = pending?.data ?? existing?.data;
        const day = mergeRollups(dayBytes ? decodeBlock(dayBytes) : null, rollupRows(raw, hourMs, dayMs));
        const dayRow: StoredBlock = {
          instance_id: stored.instance_id,
          resolution: 'rollup',
          block_start: iso(dayMs),
          account_id: stored.account_id,
          sealed: false,
          points: day.present.length,
          data: encodeBlock(day, { seal: true }),
        };
        if (pending) rows.splice(rows.indexOf(pending), 1, dayRow);
        else rows.push(dayRow);
        rows.push({ ...stored, sealed: true, data: encodeBlock(raw, { seal: true }) });
        this.open.delete(stored.instance_id);
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

function storedRaw(instanceId: string, open: OpenBlock, sealed: boolean): StoredBlock {
  return {
    instance_id: instanceId,
    resolution: 'raw',
    block_start: iso(open.startMs),
    account_id: open.accountId,
    sealed,
    points: open.block.present.length,
    data: encodeBlock(open.block, { seal: sealed }),
  };
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
