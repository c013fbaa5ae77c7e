/**
 * The status relay: passes every instance event of the outbox (the events table) to the broadcaster's
 * `instance-status` channel, and every alert incident event (`alert.firing`, `alert.resolved`; not the
 * test events of POST /v1/alerts/{id}/test) to its `instance-alerts` channel, which every replica's live
 * metric streams listen to. So a stream sees a transition or an incident whichever replica made it (with
 * NIMBUS_REDIS_URL; in one process the broadcaster is local).
 *
 * How it works. One durable job (`metrics-status:relay`), so one process relays at a time, polling every
 * `pollMs`; an alert incident's transaction also makes it due at once (resources/alerts/incidents.ts), so
 * an incident does not wait for the next poll. It reads events by `seq` after the last one it passed on.
 * On PostgreSQL `seq` is taken at insert and transactions commit in any order, so an event can appear
 * behind one already read: each poll reads again from LOOKBACK events back and passes on only the ids it
 * has not passed yet. When the job moves to another process, that one starts from LOOKBACK events back
 * too, so a notice may be passed twice; streams drop a repeated event id. Best effort, as the broadcaster is: a stream that must not
 * miss a transition reads `GET /v1/events`.
 */

import type { Clock } from '../../platform/domain/clock.js';
import type { Broadcaster } from '../../platform/events/broadcast.js';
import type { EventData } from '../../platform/events/catalog.js';
import type { JobHandler, JobRunner } from '../../platform/jobs/runner.js';
import type { Store } from '../../platform/store/db.js';
import { type InstanceStatusEvent, lastEventSeq, streamEventsAfter } from './event-store.js';

export const STATUS_RELAY_JOB = { kind: 'metrics-status', subject: 'relay' } as const;
export const STATUS_CHANNEL = 'instance-status';
export const ALERT_CHANNEL = 'instance-alerts';

/** Events read again behind the last one passed on (see above). */
const LOOKBACK = 200;
/** On its first poll a process passes on only events this recent: older ones are no news to a stream. */
const FRESH_MS = 10_000;
const READ_LIMIT = 1_000;

/** What a stream receives for an instance event. */
export interface StatusNotice {
  [key: string]: unknown;
  event_id: string;
  account_id: string;
  instance_id: string;
  type: string;
  status: string;
  timestamp: string;
}

/** What a stream receives for an alert incident event: the incident's transition on one instance. */
export interface AlertNotice {
  [key: string]: unknown;
  event_id: string;
  account_id: string;
  instance_id: string;
  type: 'alert.firing' | 'alert.resolved';
  policy_id: string;
  incident_id: string;
  name: string;
  metric: string | null;
  state: string | null;
  compare: string | null;
  window: string | null;
  value: number | null;
  threshold: number | null;
  started_at: string | null;
  resolved_at: string | null;
  timestamp: string;
}

export class StatusRelay implements JobHandler {
  private cursor: number | null = null;
  private readonly passed = new Set<string>();

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly broadcaster: Broadcaster,
    private readonly jobs: JobRunner,
    private readonly pollMs: number,
  ) {}

  /** One poll; returns when the next is due. */
  async run(): Promise<Date> {
    const first = this.cursor === null;
    if (this.cursor === null) this.cursor = Math.max(0, (await lastEventSeq(this.store.db)) - LOOKBACK);
    const events = await streamEventsAfter(this.store.db, Math.max(0, this.cursor - LOOKBACK), READ_LIMIT);
    const freshSince = new Date(this.clock.nowMs() - FRESH_MS).toISOString();
    for (const event of events) {
      if (this.passed.has(event.id)) continue;
      this.passed.add(event.id);
      if (event.seq > this.cursor) this.cursor = event.seq;
      if (first && event.created_at < freshSince) continue;
      if (event.type.startsWith('alert.')) {
        const notice = alertNotice(event);
        if (notice) await this.broadcaster.publish(ALERT_CHANNEL, notice);
        continue;
      }
      const status = event.type === 'instance.deleted' ? 'deleted' : String(event.data.status ?? '');
      const notice: StatusNotice = {
        event_id: event.id,
        account_id: event.account_id,
        instance_id: event.resource_id,
        type: event.type,
        status,
        timestamp: event.created_at,
      };
      await this.broadcaster.publish(STATUS_CHANNEL, notice);
    }
    // Keep the ids that can still be read again, and a little more.
    if (this.passed.size > 4 * (LOOKBACK + READ_LIMIT)) {
      const keep = [...this.passed].slice(-2 * (LOOKBACK + READ_LIMIT));
      this.passed.clear();
      for (const id of keep) this.passed.add(id);
    }
    return new Date(this.clock.nowMs() + this.pollMs);
  }

  /** Makes sure the relay's job exists (every process asks; the job is one row). */
  async start(): Promise<void> {
    await this.jobs.enqueue(this.store.db, STATUS_RELAY_JOB.kind, STATUS_RELAY_JOB.subject);
    this.jobs.wake();
  }

  /** The relay's job never ends: one that failed ten times in a row is made again. */
  giveUp(): Promise<void> {
    return this.start();
  }
}

/** An incident event's notice; null for a test notification's event (no incident, no instance). */
function alertNotice(event: InstanceStatusEvent): AlertNotice | null {
  const data = event.data as unknown as EventData<'alert.firing'>;
  if (data.test || data.incident_id === null || data.instance_id === null) return null;
  if (event.type !== 'alert.firing' && event.type !== 'alert.resolved') return null;
  return {
    event_id: event.id,
    account_id: event.account_id,
    instance_id: data.instance_id,
    type: event.type,
    policy_id: data.alert_id,
    incident_id: data.incident_id,
    name: data.name,
    metric: data.metric,
    state: data.state,
    compare: data.compare,
    window: data.window,
    value: data.value,
    threshold: data.threshold,
    started_at: data.started_at,
    resolved_at: data.resolved_at,
    timestamp: event.created_at,
  };
}
