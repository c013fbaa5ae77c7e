/**
 * Alert policies as values (issue 21, docs/design.md, "Alerts"): what a policy may say, the rules a saved
 * policy obeys, which instances it watches, and the value of a metric a sample gives it. Pure: the
 * service (resources/alerts/service.ts) checks ownership and settings, the evaluator (resources/alerts/evaluator.ts)
 * applies the conditions.
 *
 * A policy is either a metric threshold — the average of `metric` over `window` is `above` or `below`
 * `threshold` — or a state — the instance is in `error`, or `stuck` in starting or stopping for longer
 * than `window`. It watches the instances of `targets` (listed ids, or the ones carrying every tag of
 * `tags`, or with neither every instance of the account) and tells `channels` when an incident opens and
 * when it closes.
 */
import type { MetricSample } from '../../drivers/driver.js';
import { EMAIL_PATTERN, isMailboxAddress } from '../../platform/domain/validation.js';
import type { AlertPolicy } from './record.js';

export const ALERT_METRICS = [
  'cpu_percent',
  'memory_percent',
  'disk_read_bps',
  'disk_write_bps',
  'net_rx_bps',
  'net_tx_bps',
  'gpu_percent',
] as const;
export type AlertMetric = (typeof ALERT_METRICS)[number];

export const ALERT_COMPARES = ['above', 'below'] as const;
export type AlertCompare = (typeof ALERT_COMPARES)[number];

export const ALERT_WINDOWS = ['1m', '5m', '10m', '30m', '1h'] as const;
export type AlertWindow = (typeof ALERT_WINDOWS)[number];

export const WINDOW_SECONDS: Readonly<Record<AlertWindow, number>> = {
  '1m': 60,
  '5m': 300,
  '10m': 600,
  '30m': 1800,
  '1h': 3600,
};
/** The longest window: how much history the evaluator ever needs of an instance. */
export const MAX_WINDOW_SECONDS = 3600;

export const ALERT_STATES = ['error', 'stuck'] as const;
export type AlertState = (typeof ALERT_STATES)[number];

/** The statuses an instance is `stuck` in when it stays there longer than the window. */
export const STUCK_STATUSES = ['starting', 'stopping'] as const;

export const CHAT_FORMATS = ['slack', 'discord', 'generic'] as const;
export type ChatFormat = (typeof CHAT_FORMATS)[number];

export const CHANNEL_KINDS = ['email', 'webhook', 'chat'] as const;
export type ChannelKind = (typeof CHANNEL_KINDS)[number];

export const INCIDENT_STATUSES = ['firing', 'resolved'] as const;
export type IncidentStatus = (typeof INCIDENT_STATUSES)[number];

/** Why an incident resolved. */
export const RESOLUTIONS = [
  'recovered',
  'instance_stopped',
  'instance_deleted',
  'no_longer_targeted',
  'monitoring_off',
  'policy_changed',
  'policy_disabled',
  'policy_deleted',
] as const;
export type Resolution = (typeof RESOLUTIONS)[number];

export const NOTIFICATION_STATUSES = ['pending', 'succeeded', 'failed'] as const;
export type NotificationStatus = (typeof NOTIFICATION_STATUSES)[number];

export const MAX_EMAILS = 20;
export const MAX_WEBHOOK_CHANNELS = 10;
export const MAX_CHAT_CHANNELS = 10;
export const MAX_TARGET_INSTANCES = 100;
export const MAX_TARGET_TAGS = 10;
export const MAX_DESCRIPTION_LENGTH = 500;
export { EMAIL_PATTERN };

export interface MetricRange {
  unit: 'percent' | 'bytes_per_second';
  minimum: number;
  /** null: no upper bound. */
  maximum: number | null;
}

const PERCENT: MetricRange = { unit: 'percent', minimum: 0, maximum: 100 };
const RATE: MetricRange = { unit: 'bytes_per_second', minimum: 0, maximum: null };

/** The range a threshold must be in, per metric: percentages 0–100, rates ≥ 0. */
export const METRIC_RANGES: Readonly<Record<AlertMetric, MetricRange>> = {
  cpu_percent: PERCENT,
  memory_percent: PERCENT,
  disk_read_bps: RATE,
  disk_write_bps: RATE,
  net_rx_bps: RATE,
  net_tx_bps: RATE,
  gpu_percent: PERCENT,
};

export interface AlertTargets {
  instance_ids: string[];
  tags: Record<string, string>;
}

export interface ChatChannel {
  url: string;
  format: ChatFormat;
}

export interface AlertChannels {
  email: string[];
  webhook_ids: string[];
  chat: ChatChannel[];
}

/** The condition of a policy: exactly one of a metric threshold and a state. */
export type AlertCondition =
  | {
      kind: 'metric';
      metric: AlertMetric;
      compare: AlertCompare;
      threshold: number;
      window: AlertWindow;
    }
  | { kind: 'state'; state: AlertState; window: AlertWindow | null };

/** A policy as services and the evaluator see it (store.ts decodes the row): declared once, in record.ts. */
export type { AlertPolicy };

/** A reason a policy's fields do not make a policy: the field, what it held and what it may hold. */
export interface PolicyProblem {
  message: string;
  field: string;
  value: unknown;
  allowed_values?: unknown[];
  [detail: string]: unknown;
}

/** The fields of a policy that say when it fires (the rest: who, whom to tell, and the name). */
export interface ConditionFields {
  metric: AlertMetric | null;
  compare: AlertCompare | null;
  threshold: number | null;
  window: AlertWindow | null;
  state: AlertState | null;
}

/**
 * The condition the fields describe, or why they describe none: a metric with compare, threshold (in the
 * metric's range) and window, or a state (`stuck` with a window, `error` without one).
 */
export function conditionOf(fields: ConditionFields): AlertCondition | PolicyProblem {
  const { metric, compare, threshold, window, state } = fields;
  if (metric !== null && state !== null) {
    return {
      message: 'A policy watches either a metric or a state, not both',
      field: 'state',
      value: state,
      metric,
    };
  }
  if (metric === null && state === null) {
    return {
      message: 'A policy needs a metric (with compare, threshold and window) or a state',
      field: 'metric',
      value: null,
      allowed_values: [...ALERT_METRICS],
    };
  }
  if (state !== null) {
    if (compare !== null) return notForState('compare', compare);
    if (threshold !== null) return notForState('threshold', threshold);
    if (state === 'stuck' && window === null) {
      return {
        message: 'A stuck policy needs a window: how long in starting or stopping counts as stuck',
        field: 'window',
        value: null,
        allowed_values: [...ALERT_WINDOWS],
      };
    }
    if (state === 'error' && window !== null) {
      return {
        message: 'An error policy fires as soon as the instance is in error; it takes no window',
        field: 'window',
        value: window,
      };
    }
    return { kind: 'state', state, window };
  }
  const watched = metric as AlertMetric;
  if (compare === null) {
    return {
      message: 'A metric policy needs compare',
      field: 'compare',
      value: null,
      allowed_values: [...ALERT_COMPARES],
    };
  }
  if (threshold === null) {
    return { message: 'A metric policy needs a threshold', field: 'threshold', value: null };
  }
  const range = METRIC_RANGES[watched];
  if (threshold < range.minimum || (range.maximum !== null && threshold > range.maximum)) {
    return {
      message:
        range.maximum === null
          ? `threshold for ${watched} must be at least ${range.minimum} (${range.unit})`
          : `threshold for ${watched} must be between ${range.minimum} and ${range.maximum} (${range.unit})`,
      field: 'threshold',
      value: threshold,
      minimum: range.minimum,
      maximum: range.maximum,
      unit: range.unit,
    };
  }
  if (window === null) {
    return {
      message: 'A metric policy needs a window to average over',
      field: 'window',
      value: null,
      allowed_values: [...ALERT_WINDOWS],
    };
  }
  return { kind: 'metric', metric: watched, compare, threshold, window };
}

function notForState(field: 'compare' | 'threshold', value: unknown): PolicyProblem {
  return { message: `${field} belongs to metric policies, not state policies`, field, value };
}

export function isProblem(value: AlertCondition | PolicyProblem): value is PolicyProblem {
  return 'field' in value;
}

/** The policy's condition (a saved policy always has one). */
export function policyCondition(policy: AlertPolicy): AlertCondition {
  const condition = conditionOf(policy);
  if (isProblem(condition)) throw new Error(`policy ${policy.id} has no condition: ${condition.message}`);
  return condition;
}

/**
 * Why the channels cannot notify anyone, or null: at least one target in all, no repeats, well-formed
 * addresses and chat URLs of the accepted form (services check where the URLs lead).
 */
export function channelsProblem(channels: AlertChannels): PolicyProblem | null {
  const total = channels.email.length + channels.webhook_ids.length + channels.chat.length;
  if (total === 0) {
    return {
      message: 'A policy needs at least one channel: an e-mail address, a webhook subscription or a chat URL',
      field: 'channels',
      value: channels,
      allowed_values: [...CHANNEL_KINDS],
    };
  }
  for (const [i, address] of channels.email.entries()) {
    if (!isMailboxAddress(address)) {
      return {
        message:
          'Not an e-mail address at a DNS domain: a plain local part (no quotes or encoded words) @ a host name (no IP address)',
        field: `channels.email.${i}`,
        value: address,
      };
    }
  }
  const lists: [string, string[]][] = [
    ['channels.email', channels.email.map((a) => a.toLowerCase())],
    ['channels.webhook_ids', channels.webhook_ids],
    ['channels.chat', channels.chat.map((c) => c.url)],
  ];
  for (const [field, values] of lists) {
    const seen = new Set<string>();
    for (const [i, value] of values.entries()) {
      if (seen.has(value)) {
        return { message: `${field} names ${value} twice`, field: `${field}.${i}`, value };
      }
      seen.add(value);
    }
  }
  return null;
}

/** What the evaluator needs of an instance to tell whether a policy watches it. */
export interface TargetedInstance {
  id: string;
  tags: Readonly<Record<string, string>>;
}

/**
 * Whether the targets take in this instance: listed by id, or carrying every tag of `tags`; with neither
 * listed, every instance of the account.
 */
export function isTargeted(targets: AlertTargets, instance: TargetedInstance): boolean {
  const tagEntries = Object.entries(targets.tags);
  if (targets.instance_ids.length === 0 && tagEntries.length === 0) return true;
  if (targets.instance_ids.includes(instance.id)) return true;
  return tagEntries.length > 0 && tagEntries.every(([key, value]) => instance.tags[key] === value);
}

/**
 * The value of an alert metric in a sample, or null when the instance does not have it (GPU use on a
 * type without a GPU). memory_percent is used over total.
 */
export function metricValue(metric: AlertMetric, sample: MetricSample): number | null {
  switch (metric) {
    case 'memory_percent':
      return sample.memory_total_bytes > 0
        ? (sample.memory_used_bytes / sample.memory_total_bytes) * 100
        : null;
    case 'gpu_percent':
      return typeof sample.gpu_percent === 'number' ? sample.gpu_percent : null;
    default:
      return sample[metric];
  }
}

/** Whether a value is past the threshold (the bad side): strictly above, or strictly below. */
export function isPast(compare: AlertCompare, value: number, threshold: number): boolean {
  return compare === 'above' ? value > threshold : value < threshold;
}

/** How a metric and its values read in messages: `85.3 %`, `12.5 MB/s`. */
export function formatValue(metric: AlertMetric | null, value: number | null): string {
  if (value === null) return '—';
  if (metric === null) return String(value);
  if (METRIC_RANGES[metric].unit === 'percent') return `${round(value, 1)} %`;
  const units = ['B/s', 'kB/s', 'MB/s', 'GB/s', 'TB/s'];
  let scaled = value;
  let unit = 0;
  while (Math.abs(scaled) >= 1000 && unit < units.length - 1) {
    scaled /= 1000;
    unit += 1;
  }
  return `${round(scaled, unit === 0 ? 0 : 1)} ${units[unit]}`;
}

function round(value: number, digits: number): string {
  return value.toFixed(digits).replace(/\.0+$/, '');
}

/** The condition in words: `cpu_percent above 80 % over 5m`, `in error`, `stuck in starting or stopping for 10m`. */
export function describeCondition(condition: AlertCondition): string {
  if (condition.kind === 'metric') {
    return `${condition.metric} ${condition.compare} ${formatValue(condition.metric, condition.threshold)} (average over ${condition.window})`;
  }
  return condition.state === 'error'
    ? 'instance in error'
    : `instance stuck in starting or stopping for more than ${condition.window}`;
}
