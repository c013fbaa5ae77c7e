/**
 * Incident transitions: opening an incident and resolving one, each with everything that must happen
 * with it, in one transaction (the transactional outbox, docs/design.md, "Layers and the outbox"):
 *
 * - the incident row (opened guarded by the policy still being there and enabled — read with a share
 *   lock on PostgreSQL, so a delete waits and takes the new incident with it — and resolved guarded on
 *   its status being `firing`);
 * - the `alert.firing` / `alert.resolved` event, whose outbox fan-out gives every subscription that takes
 *   the type its delivery;
 * - one notification per channel target: a webhook channel's is the delivery of that event to the named
 *   subscription (made here when its own event filter did not already take it); an e-mail or chat one is
 *   a pending row, and the notifier's job is made due now (resources/alerts/notifier.ts sends it, retried
 *   like a webhook delivery).
 *
 * So a notification exists exactly when its transition committed: a process killed between the two
 * cannot lose one, and the notifier's job (leased like every job) sends it in whichever process runs next.
 * The status relay's job (resources/metrics/status-relay.ts) is made due in the same transaction too: live
 * streams hear of the transition once it commits, not at the relay's next poll — which, when the relay ran
 * beside the evaluation in the same batch of due jobs and read the outbox before this commit, is a poll
 * interval later (and never, under a test's manual clock that stops moving).
 * Transitions are written a chunk at a time, one transaction per chunk (one commit, one fsync on SQLite).
 */

import type { Clock } from '../../platform/domain/clock.js';
import { newId } from '../../platform/domain/ids.js';
import { recordEvent } from '../../platform/events/outbox.js';
import type { JobRunner } from '../../platform/jobs/runner.js';
import type { Store } from '../../platform/store/db.js';
import type { Executor } from '../../platform/store/schema.js';
import { STATUS_RELAY_JOB } from '../metrics/status-relay.js';
import { matchesEvent } from '../webhooks/rules.js';
import { insertDeliveries, liveSubscriptions, pendingDelivery } from '../webhooks/store.js';
import type { AlertEventData } from './messages.js';
import type { AlertPolicy, Resolution } from './rules.js';
import {
  holdPolicies,
  type Incident,
  insertIncident,
  insertNotifications,
  type Notification,
  resolveIncident,
} from './store.js';

/** The one job that sends every due e-mail and chat notification (resources/alerts/notifier.ts). */
export const NOTIFY_JOB = { kind: 'alert-notify', subject: 'all' } as const;

/** Transitions written per transaction. */
const CHUNK = 200;

export interface Opening {
  policyId: string;
  instance: { id: string; account_id: string; name: string };
  value: number | null;
  threshold: number | null;
  /** When the condition was met: the time of the sample that crossed (or of the state check). */
  at: Date;
}

export interface Closing {
  incident: Incident;
  resolvedValue: number | null;
  resolution: Resolution;
  at: Date;
}

export interface TransitionWakers {
  /** Wakes the job runner (the notification jobs). */
  jobs: () => void;
  /** Wakes the webhook delivery worker (the webhook notifications). */
  deliveries: () => void;
}

export class IncidentWriter {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly jobs: JobRunner,
    private readonly wakers: TransitionWakers,
    private readonly consoleUrl: string,
  ) {}

  /** Opens these incidents (skipping policies gone or disabled since); returns the incidents opened. */
  async open(openings: readonly Opening[]): Promise<Incident[]> {
    const opened: Incident[] = [];
    for (let i = 0; i < openings.length; i += CHUNK) {
      const chunk = openings.slice(i, i + CHUNK);
      const made = await this.store.db.transaction().execute(async (trx) => {
        const policies = await holdPolicies(trx, [...new Set(chunk.map((o) => o.policyId))]);
        const out: Incident[] = [];
        for (const opening of chunk) {
          const policy = policies.get(opening.policyId);
          if (!policy?.enabled) continue;
          const at = opening.at.toISOString();
          const now = this.clock.now().toISOString();
          const incident: Incident = {
            id: newId('incident', opening.at),
            account_id: policy.account_id,
            policy_id: policy.id,
            instance_id: opening.instance.id,
            instance_name: opening.instance.name,
            status: 'firing',
            value: opening.value,
            threshold: opening.threshold,
            resolved_value: null,
            resolution: null,
            started_at: at,
            resolved_at: null,
            created_at: now,
            updated_at: now,
          };
          await insertIncident(trx, incident);
          await this.notify(trx, policy, incident, 'firing');
          out.push(incident);
        }
        if (out.length > 0) await this.relayNow(trx);
        return out;
      });
      opened.push(...made);
    }
    if (opened.length > 0) this.wake();
    return opened;
  }

  /** Resolves these incidents (those still firing); returns the incidents resolved. */
  async resolve(closings: readonly Closing[], within?: Executor): Promise<Incident[]> {
    if (within) return this.resolveIn(within, closings);
    const resolved: Incident[] = [];
    for (let i = 0; i < closings.length; i += CHUNK) {
      const chunk = closings.slice(i, i + CHUNK);
      resolved.push(...(await this.store.db.transaction().execute((trx) => this.resolveIn(trx, chunk))));
    }
    if (resolved.length > 0) this.wake();
    return resolved;
  }

  /** The status relay's job, due now (an upsert of its one row; a poll it had planned comes sooner). */
  private async relayNow(trx: Executor): Promise<void> {
    await this.jobs.enqueue(trx, STATUS_RELAY_JOB.kind, STATUS_RELAY_JOB.subject);
  }

  /** Wakes the workers after a caller's transaction that resolved incidents (`resolve(…, trx)`) committed. */
  wake(): void {
    this.wakers.jobs();
    this.wakers.deliveries();
  }

  private async resolveIn(trx: Executor, closings: readonly Closing[]): Promise<Incident[]> {
    const policies = await holdPolicies(trx, [...new Set(closings.map((c) => c.incident.policy_id))]);
    const out: Incident[] = [];
    for (const closing of closings) {
      const resolved = await resolveIncident(trx, closing.incident.id, {
        resolved_value: closing.resolvedValue,
        resolution: closing.resolution,
        resolved_at: closing.at.toISOString(),
      });
      if (!resolved) continue;
      const policy = policies.get(resolved.policy_id);
      if (policy) await this.notify(trx, policy, resolved, 'resolved');
      out.push(resolved);
    }
    if (out.length > 0) await this.relayNow(trx);
    return out;
  }

  /** The transition's event, and its notification on every channel of the policy. */
  private async notify(
    trx: Executor,
    policy: AlertPolicy,
    incident: Incident,
    transition: 'firing' | 'resolved',
  ): Promise<void> {
    const type = transition === 'firing' ? 'alert.firing' : 'alert.resolved';
    const data = alertEventData(policy, incident, this.consoleUrl);
    const eventId = await recordEvent(trx, this.clock, {
      accountId: policy.account_id,
      type,
      resourceId: policy.id,
      data,
    });
    const now = this.clock.now();
    const at = now.toISOString();
    const base = {
      incident_id: incident.id,
      account_id: policy.account_id,
      transition,
      event_id: eventId,
      attempts: 0,
      last_error: null,
      sent_at: null,
      created_at: at,
      updated_at: at,
    } as const;
    const rows: Notification[] = [];
    for (const address of policy.channels.email) {
      rows.push({
        ...base,
        id: newId('delivery', now),
        channel: 'email',
        target: address,
        format: null,
        delivery_id: null,
        status: 'pending',
        next_attempt_at: at,
      });
    }
    for (const chat of policy.channels.chat) {
      rows.push({
        ...base,
        id: newId('delivery', now),
        channel: 'chat',
        target: chat.url,
        format: chat.format,
        delivery_id: null,
        status: 'pending',
        next_attempt_at: at,
      });
    }
    const sendable = rows.length;
    if (policy.channels.webhook_ids.length > 0) {
      rows.push(...(await this.webhookNotifications(trx, policy, eventId, type, base, now)));
    }
    await insertNotifications(trx, rows);
    // The notifier's job, due now (an upsert: one row however many transitions ask).
    if (sendable > 0) await this.jobs.enqueue(trx, NOTIFY_JOB.kind, NOTIFY_JOB.subject);
  }

  /**
   * The named subscriptions' deliveries of the event: the outbox made one for each whose own filter takes
   * the type; the others get theirs here. A subscription that is disabled, switched off or gone gets a
   * failed notification saying so, never silence.
   */
  private async webhookNotifications(
    trx: Executor,
    policy: AlertPolicy,
    eventId: string,
    type: 'alert.firing' | 'alert.resolved',
    base: Omit<
      Notification,
      'id' | 'channel' | 'target' | 'format' | 'delivery_id' | 'status' | 'next_attempt_at'
    >,
    now: Date,
  ): Promise<Notification[]> {
    const live = new Map((await liveSubscriptions(trx, policy.account_id)).map((s) => [s.id, s.events]));
    const matched = await trx
      .selectFrom('webhook_deliveries')
      .select(['id', 'webhook_id'])
      .where('event_id', '=', eventId)
      .execute();
    const deliveryOf = new Map(matched.map((row) => [row.webhook_id, row.id]));
    const extra = [];
    const rows: Notification[] = [];
    for (const webhookId of policy.channels.webhook_ids) {
      const events = live.get(webhookId);
      let deliveryId = deliveryOf.get(webhookId) ?? null;
      if (events !== undefined && deliveryId === null && !matchesEvent(events, type)) {
        deliveryId = newId('delivery', now);
        extra.push(
          pendingDelivery({
            id: deliveryId,
            webhookId,
            accountId: policy.account_id,
            eventId,
            eventType: type,
            at: base.created_at,
          }),
        );
      }
      rows.push({
        ...base,
        id: deliveryId ?? newId('delivery', now),
        channel: 'webhook',
        target: webhookId,
        format: null,
        delivery_id: deliveryId,
        status: deliveryId === null ? 'failed' : 'pending',
        last_error: deliveryId === null ? 'The webhook subscription is disabled, switched off or gone' : null,
        next_attempt_at: null,
      });
    }
    await insertDeliveries(trx, extra);
    return rows;
  }
}

/** What an alert event says (the catalogue's AlertEvent). */
export function alertEventData(policy: AlertPolicy, incident: Incident, consoleUrl: string): AlertEventData {
  return {
    alert_id: policy.id,
    incident_id: incident.id,
    name: policy.name,
    instance_id: incident.instance_id,
    instance_name: incident.instance_name,
    metric: policy.metric,
    compare: policy.compare,
    state: policy.state,
    window: policy.window,
    value: incident.status === 'resolved' ? incident.resolved_value : incident.value,
    threshold: incident.threshold,
    started_at: incident.started_at,
    resolved_at: incident.resolved_at,
    resolution: incident.resolution,
    console_url: consoleLink(consoleUrl, incident.instance_id),
  };
}

export function consoleLink(consoleUrl: string, instanceId: string): string {
  return `${consoleUrl}/instances/${encodeURIComponent(instanceId)}`;
}
