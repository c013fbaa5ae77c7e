/**
 * The alert evaluator (issue 21, item 2): after each metric collection it decides which incidents open
 * and which resolve, and has the IncidentWriter write them.
 *
 * Where it runs. In the collector's job (MetricsCollector's `afterCollection`), so once across replicas,
 * under that job's lease, right after the samples it judges are written.
 *
 * What it looks at — what changed, never every policy × instance pair:
 * - metric policies: the samples this collection wrote. Each running instance's sample goes into a ring
 *   per metric its account's policies watch (resources/alerts/windows.ts), and only that account's metric
 *   policies are judged for it: a covered window whose average is past the threshold opens an incident;
 *   an open one resolves after a whole window with no sample past it. Tags and status come with the
 *   sample (the collector read them this collection), so targets follow tag changes at once.
 * - state policies: the instances of accounts that have one and that are in `error`, `starting` or
 *   `stopping` (an index range of the few instances in those states).
 * - open incidents the samples did not settle: their instances, read by id. A deleted instance, one that
 *   stopped (not running), has monitoring off, or is no longer targeted resolves its incidents.
 *
 * Memory. The rings hold the longest window the account's policies need of each metric. They are kept
 * only while this process ran the previous collection too; otherwise (first run, the lease came back from
 * another process) and for a new policy, they are read back from the stored 10 s samples. Policies are
 * read again only when their generation counter moved; open incidents at the same time (a policy change
 * may have resolved some).
 */

import type { Store } from '../../platform/store/db.js';
import { decodeBlock } from '../metrics/blocks.js';
import { METRICS, type MetricName } from '../metrics/catalog.js';
import type { CollectedSample } from '../metrics/collector.js';
import { blockStartOf, RAW, rawColumnId } from '../metrics/rollups.js';
import { blocksAt } from '../metrics/store.js';
import type { Closing, IncidentWriter, Opening } from './incidents.js';
import {
  type AlertCondition,
  type AlertMetric,
  type AlertPolicy,
  isPast,
  isTargeted,
  metricValue,
  policyCondition,
  type Resolution,
  STUCK_STATUSES,
  WINDOW_SECONDS,
} from './rules.js';
import {
  enabledPolicies,
  type Incident,
  instancesInStatuses,
  openIncidents,
  policyGeneration,
  type WatchedInstance,
  watchedInstances,
} from './store.js';
import { SampleRing, type WindowStats, windowSlots } from './windows.js';

export interface EvaluatorOptions {
  /** The collection interval (NIMBUS_METRICS_INTERVAL_SECONDS). */
  intervalMs: number;
}

interface Watched {
  policy: AlertPolicy;
  condition: AlertCondition;
  /** Metric policies: the collection slots of the window. */
  slots: number;
}

/** What one evaluation did, for tests and the benchmark. */
export interface EvaluationReport {
  samples: number;
  opened: number;
  resolved: number;
  /** Instances whose history was read back from the store. */
  loaded: number;
}

const pairKey = (policyId: string, instanceId: string) => `${policyId} ${instanceId}`;

/** The stored columns each alert metric is made from. */
const COLUMNS_OF: Record<AlertMetric, MetricName[]> = {
  cpu_percent: ['cpu_percent'],
  memory_percent: ['memory_used_bytes', 'memory_total_bytes'],
  disk_read_bps: ['disk_read_bps'],
  disk_write_bps: ['disk_write_bps'],
  net_rx_bps: ['net_rx_bps'],
  net_tx_bps: ['net_tx_bps'],
  gpu_percent: ['gpu_percent'],
};

export class AlertEvaluator {
  private generation = -1;
  private readonly byId = new Map<string, Watched>();
  private readonly metricPolicies = new Map<string, Watched[]>();
  private readonly statePolicies = new Map<string, Watched[]>();
  /** Per account and metric: the most slots one of its policies needs. */
  private readonly needs = new Map<string, Map<AlertMetric, number>>();
  private readonly rings = new Map<string, Map<AlertMetric, SampleRing>>();
  private readonly open = new Map<string, Incident>();
  private lastTickMs: number | null = null;
  /** The last evaluation's report. */
  last: EvaluationReport = { samples: 0, opened: 0, resolved: 0, loaded: 0 };

  constructor(
    private readonly store: Store,
    private readonly writer: IncidentWriter,
    private readonly options: EvaluatorOptions,
  ) {}

  /** The collector's `afterCollection`: one evaluation, for the collection at `at`. */
  async evaluate(at: Date, samples: readonly CollectedSample[]): Promise<EvaluationReport> {
    const interval = this.options.intervalMs;
    const tickMs = at.getTime();
    const trusted =
      this.lastTickMs !== null && tickMs - this.lastTickMs >= 0 && tickMs - this.lastTickMs <= interval;
    this.lastTickMs = tickMs;
    const generation = await policyGeneration(this.store.db);
    if (!trusted) this.rings.clear();
    if (!trusted || generation !== this.generation) await this.reload(generation);
    const report: EvaluationReport = { samples: samples.length, opened: 0, resolved: 0, loaded: 0 };
    this.last = report;
    if (this.byId.size === 0 && this.open.size === 0) {
      this.rings.clear();
      return report;
    }

    const openings: Opening[] = [];
    const closings: Closing[] = [];
    const settled = new Set<string>();
    const close = (key: string, incident: Incident, resolution: Resolution, value: number | null) => {
      settled.add(key);
      closings.push({ incident, resolvedValue: value, resolution, at });
    };

    report.loaded = await this.loadHistory(samples, tickMs);
    const seen = new Set<string>();
    for (const { instance, sample } of samples) {
      if (instance.status !== 'running') continue;
      const policies = this.metricPolicies.get(instance.account_id);
      if (!policies) continue;
      const rings = this.rings.get(instance.id);
      if (!rings) continue;
      seen.add(instance.id);
      const slot = Math.floor(Date.parse(sample.timestamp) / interval);
      for (const [metric, ring] of rings) {
        const value = metricValue(metric, sample);
        if (value !== null) ring.put(slot, value);
      }
      for (const watched of policies) {
        const key = pairKey(watched.policy.id, instance.id);
        const incident = this.open.get(key);
        if (!isTargeted(watched.policy.targets, instance)) {
          if (incident) close(key, incident, 'no_longer_targeted', null);
          continue;
        }
        const condition = watched.condition;
        if (condition.kind !== 'metric') continue;
        const ring = rings.get(condition.metric);
        if (!ring || metricValue(condition.metric, sample) === null) continue;
        const stats: WindowStats = ring.window(slot, watched.slots, condition.compare, condition.threshold);
        if (incident) {
          settled.add(key);
          if (stats.allGood) close(key, incident, 'recovered', stats.average);
        } else if (
          stats.covered &&
          stats.average !== null &&
          isPast(condition.compare, stats.average, condition.threshold)
        ) {
          openings.push({
            policyId: watched.policy.id,
            instance: { id: instance.id, account_id: instance.account_id, name: '' },
            value: round(stats.average),
            threshold: condition.threshold,
            at,
          });
        }
      }
    }
    for (const id of this.rings.keys()) if (!seen.has(id)) this.rings.delete(id);

    if (this.statePolicies.size > 0) {
      const suspects = await instancesInStatuses(
        this.store.db,
        [...this.statePolicies.keys()],
        ['error', ...STUCK_STATUSES],
      );
      for (const instance of suspects) {
        for (const watched of this.statePolicies.get(instance.account_id) ?? []) {
          if (this.open.has(pairKey(watched.policy.id, instance.id))) continue;
          if (!isTargeted(watched.policy.targets, instance)) continue;
          const met = stateMet(watched.condition, instance, tickMs);
          if (met) {
            openings.push({
              policyId: watched.policy.id,
              instance: { id: instance.id, account_id: instance.account_id, name: instance.name },
              value: met.value,
              threshold: met.threshold,
              at,
            });
          }
        }
      }
    }

    const unsettled = [...this.open].filter(([key]) => !settled.has(key));
    if (unsettled.length > 0) {
      const ids = [...new Set(unsettled.map(([, incident]) => incident.instance_id))];
      const found = new Map((await watchedInstances(this.store.db, ids)).map((i) => [i.id, i]));
      for (const [key, incident] of unsettled) {
        const watched = this.byId.get(incident.policy_id);
        if (!watched) {
          // The policy was deleted (its incidents went with it) or disabled (the change resolved them).
          this.open.delete(key);
          continue;
        }
        const instance = found.get(incident.instance_id);
        const resolution = whyResolved(watched, instance, tickMs);
        if (resolution) close(key, incident, resolution, null);
      }
    }

    if (closings.length > 0) {
      const resolved = await this.writer.resolve(closings);
      report.resolved = resolved.length;
      // Resolved here or by someone else meanwhile (a policy change): either way no longer open.
      for (const closing of closings) {
        this.open.delete(pairKey(closing.incident.policy_id, closing.incident.instance_id));
      }
    }
    if (openings.length > 0) {
      // Samples do not carry names: read them for the few instances whose incidents open.
      const nameless = openings.filter((opening) => opening.instance.name === '');
      if (nameless.length > 0) {
        const ids = [...new Set(nameless.map((opening) => opening.instance.id))];
        const names = new Map((await watchedInstances(this.store.db, ids)).map((i) => [i.id, i.name]));
        for (const opening of nameless)
          opening.instance.name = names.get(opening.instance.id) ?? opening.instance.id;
      }
      const opened = await this.writer.open(openings);
      report.opened = opened.length;
      for (const incident of opened)
        this.open.set(pairKey(incident.policy_id, incident.instance_id), incident);
    }
    return report;
  }

  /** Reads the enabled policies and the open incidents again. */
  private async reload(generation: number): Promise<void> {
    const policies = await enabledPolicies(this.store.db);
    const incidents = await openIncidents(this.store.db);
    this.generation = generation;
    this.byId.clear();
    this.metricPolicies.clear();
    this.statePolicies.clear();
    this.needs.clear();
    for (const policy of policies) {
      const condition = policyCondition(policy);
      const slots =
        condition.kind === 'metric'
          ? windowSlots(WINDOW_SECONDS[condition.window] * 1000, this.options.intervalMs)
          : 0;
      const watched: Watched = { policy, condition, slots };
      this.byId.set(policy.id, watched);
      const group = condition.kind === 'metric' ? this.metricPolicies : this.statePolicies;
      const list = group.get(policy.account_id) ?? [];
      list.push(watched);
      group.set(policy.account_id, list);
      if (condition.kind === 'metric') {
        const needs = this.needs.get(policy.account_id) ?? new Map<AlertMetric, number>();
        needs.set(condition.metric, Math.max(needs.get(condition.metric) ?? 0, slots));
        this.needs.set(policy.account_id, needs);
      }
    }
    this.open.clear();
    for (const incident of incidents)
      this.open.set(pairKey(incident.policy_id, incident.instance_id), incident);
  }

  /**
   * Makes sure every running, targeted instance among the samples has a ring, as long as its policies
   * need, for each metric they watch; rings made here are filled from the stored samples. Returns how
   * many instances were read back.
   */
  private async loadHistory(samples: readonly CollectedSample[], tickMs: number): Promise<number> {
    const fresh = new Map<string, Map<AlertMetric, SampleRing>>();
    let longest = 0;
    for (const { instance } of samples) {
      if (instance.status !== 'running') continue;
      const needs = this.needs.get(instance.account_id);
      if (!needs) continue;
      const policies = this.metricPolicies.get(instance.account_id) ?? [];
      if (!policies.some((watched) => isTargeted(watched.policy.targets, instance))) continue;
      let rings = this.rings.get(instance.id);
      if (!rings) {
        rings = new Map();
        this.rings.set(instance.id, rings);
      }
      for (const [metric, slots] of needs) {
        const ring = rings.get(metric);
        if (ring && ring.capacity >= slots) continue;
        rings.set(metric, new SampleRing(slots));
        const made = fresh.get(instance.id) ?? new Map<AlertMetric, SampleRing>();
        made.set(metric, rings.get(metric) as SampleRing);
        fresh.set(instance.id, made);
        longest = Math.max(longest, slots);
      }
    }
    if (fresh.size === 0) return 0;
    const interval = this.options.intervalMs;
    const fromMs = tickMs - longest * interval;
    const hours: number[] = [];
    for (let hour = blockStartOf(RAW, fromMs); hour <= tickMs; hour += RAW.blockMs) hours.push(hour);
    const ids = [...fresh.keys()];
    for (const hour of hours) {
      for (const stored of await blocksAt(this.store.db, ids, 'raw', new Date(hour).toISOString())) {
        const rings = fresh.get(stored.instance_id);
        if (rings) fillFromBlock(rings, decodeBlock(stored.data), hour, fromMs, tickMs, interval);
      }
    }
    return fresh.size;
  }
}

/**
 * Puts a stored hour block's samples into rings. A stored slot is 10 s; at a shorter interval its sample
 * (the last one collected in those 10 s) stands for each collection slot within them.
 */
function fillFromBlock(
  rings: Map<AlertMetric, SampleRing>,
  block: ReturnType<typeof decodeBlock>,
  hourMs: number,
  fromMs: number,
  toMs: number,
  intervalMs: number,
): void {
  const column = new Map(block.columns.map((c) => [c.id, c.values]));
  for (const [metric, ring] of rings) {
    const sources = COLUMNS_OF[metric].map((name) => ({ name, values: column.get(rawColumnId(name)) }));
    if (sources.some((source) => source.values === undefined)) continue;
    for (let i = 0; i < block.present.length; i++) {
      const startMs = hourMs + (block.present[i] as number) * RAW.stepMs;
      if (startMs + RAW.stepMs <= fromMs || startMs > toMs) continue;
      const read = (k: number) =>
        (sources[k]?.values?.[i] as number) * METRICS[sources[k]?.name as MetricName].quantum;
      const value = metric === 'memory_percent' ? (read(1) > 0 ? (read(0) / read(1)) * 100 : null) : read(0);
      if (value === null) continue;
      const firstSlot = Math.ceil(startMs / intervalMs);
      for (
        let slot = firstSlot;
        slot * intervalMs < startMs + RAW.stepMs && slot * intervalMs <= toMs;
        slot++
      ) {
        ring.put(slot, value);
      }
    }
  }
}

/** A state policy's condition on an instance now: the value and threshold of the incident, or null. */
function stateMet(
  condition: AlertCondition,
  instance: WatchedInstance,
  nowMs: number,
): { value: number | null; threshold: number | null } | null {
  if (condition.kind !== 'state') return null;
  if (condition.state === 'error')
    return instance.status === 'error' ? { value: null, threshold: null } : null;
  if (!(STUCK_STATUSES as readonly string[]).includes(instance.status) || condition.window === null)
    return null;
  const since = Date.parse(instance.operation_at ?? instance.updated_at);
  const seconds = (nowMs - since) / 1000;
  const limit = WINDOW_SECONDS[condition.window];
  return seconds > limit ? { value: Math.round(seconds), threshold: limit } : null;
}

/** Why an open incident the samples did not settle resolves now, or null while it stands. */
function whyResolved(
  watched: Watched,
  instance: WatchedInstance | undefined,
  nowMs: number,
): Resolution | null {
  if (!instance || instance.status === 'deleting') return 'instance_deleted';
  if (!isTargeted(watched.policy.targets, instance)) return 'no_longer_targeted';
  if (watched.condition.kind === 'metric') {
    if (instance.status !== 'running') return 'instance_stopped';
    return instance.monitoring ? null : 'monitoring_off';
  }
  if (stateMet(watched.condition, instance, nowMs)) return null;
  return instance.status === 'stopped' ? 'instance_stopped' : 'recovered';
}

function round(value: number): number {
  return Math.round(value * 100) / 100;
}
