/**
 * Alert policies and their incidents (issue 21; docs/design.md, "Alerts"): the rules for saving a policy
 * (resources/alerts/rules.ts, plus what only the store and the settings know: the account's own instances and
 * webhook subscriptions, where chat URLs lead, whether e-mail can be sent), the policies quota, the
 * incident lists, and test notifications. Evaluation is the evaluator's (alert-evaluator.ts), sending
 * the notifier's (alert-notifier.ts).
 *
 * Changing a policy so that its open incidents no longer mean what they said — switching it off, or to
 * another metric or a state — resolves them in the same transaction (`policy_disabled`,
 * `policy_changed`), with their notifications; a threshold, compare or window change leaves them to the
 * evaluator under the new condition. Deleting a policy deletes its incidents and their notifications.
 */
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { Clock } from '../../platform/domain/clock.js';
import { newId } from '../../platform/domain/ids.js';
import type { Page, PageRequest } from '../../platform/domain/pagination.js';
import { isPrintableName, isPrintableText } from '../../platform/domain/validation.js';
import { InvalidRequest, NotFound } from '../../platform/errors.js';
import { recordEvent } from '../../platform/events/outbox.js';
import { recordCreated } from '../../platform/idempotency/context.js';
import type { QuotaService } from '../../platform/quotas/quotas.js';
import type { Store } from '../../platform/store/db.js';
import type { Executor } from '../../platform/store/schema.js';
import { lockAccount } from '../account/store.js';
import type { WebhookDeliveryWorker } from '../webhooks/delivery-worker.js';
import { hostOf, isForbiddenAddress, urlProblem } from '../webhooks/rules.js';
import type { IncidentWriter } from './incidents.js';
import type { AlertMessageInput } from './messages.js';
import type { AlertNotifier } from './notifier.js';
import {
  type AlertChannels,
  type AlertCompare,
  type AlertMetric,
  type AlertPolicy,
  type AlertState,
  type AlertTargets,
  type AlertWindow,
  type ChannelKind,
  type ChatChannel,
  channelsProblem,
  conditionOf,
  isProblem,
  MAX_DESCRIPTION_LENGTH,
  type PolicyProblem,
  type Resolution,
} from './rules.js';
import * as alerts from './store.js';

export interface NewPolicy {
  name: string;
  description?: string | undefined;
  metric?: AlertMetric | undefined;
  compare?: AlertCompare | undefined;
  threshold?: number | undefined;
  window?: AlertWindow | undefined;
  state?: AlertState | undefined;
  targets?: Partial<AlertTargets> | undefined;
  channels: Partial<AlertChannels>;
  enabled?: boolean | undefined;
}

export interface PolicyUpdate {
  name?: string | undefined;
  description?: string | null | undefined;
  metric?: AlertMetric | null | undefined;
  compare?: AlertCompare | null | undefined;
  threshold?: number | null | undefined;
  window?: AlertWindow | null | undefined;
  state?: AlertState | null | undefined;
  targets?: Partial<AlertTargets> | undefined;
  channels?: Partial<AlertChannels> | undefined;
  enabled?: boolean | undefined;
}

/** A policy as the API shows it: its account is the caller's. */
export type PolicyView = Omit<AlertPolicy, 'account_id'>;

export interface NotificationView {
  id: string;
  transition: 'firing' | 'resolved';
  channel: ChannelKind;
  target: string;
  status: 'pending' | 'succeeded' | 'failed';
  attempts: number;
  last_error: string | null;
  created_at: string;
}

export interface IncidentView {
  id: string;
  policy_id: string;
  instance_id: string;
  instance_name: string;
  status: 'firing' | 'resolved';
  value: number | null;
  threshold: number | null;
  resolved_value: number | null;
  resolution: Resolution | null;
  started_at: string;
  resolved_at: string | null;
  notifications: NotificationView[];
}

export interface ChannelTestResult {
  channel: ChannelKind;
  target: string;
  status: 'succeeded' | 'failed';
  error: string | null;
  duration_ms: number;
  /** The webhook delivery (webhook channels) or the test message's id (e-mail, chat). */
  delivery_id: string;
}

export interface AlertServiceOptions {
  /** NIMBUS_WEBHOOK_ALLOW_PRIVATE: chat receivers on loopback and private addresses are allowed. */
  allowPrivate: boolean;
  consoleUrl: string;
}

export function policyView({ account_id: _account, ...view }: AlertPolicy): PolicyView {
  return view;
}

export class AlertService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly quotas: QuotaService,
    private readonly incidents: IncidentWriter,
    private readonly notifier: AlertNotifier,
    private readonly deliveries: WebhookDeliveryWorker,
    private readonly options: AlertServiceOptions,
  ) {}

  async create(accountId: string, input: NewPolicy): Promise<PolicyView> {
    const now = this.clock.now();
    const at = now.toISOString();
    const draft: AlertPolicy = {
      id: newId('alert', now),
      account_id: accountId,
      name: input.name,
      description: input.description ?? null,
      metric: input.metric ?? null,
      compare: input.compare ?? null,
      threshold: input.threshold ?? null,
      window: input.window ?? null,
      state: input.state ?? null,
      targets: { instance_ids: input.targets?.instance_ids ?? [], tags: input.targets?.tags ?? {} },
      channels: normalisedChannels(input.channels),
      enabled: input.enabled ?? true,
      created_at: at,
      updated_at: at,
    };
    await this.check(accountId, draft, null);
    await this.store.db.transaction().execute(async (trx) => {
      await lockAccount(trx, accountId);
      await this.quotas.ensureRoom(trx, accountId, 'alerts', 1);
      await alerts.insertPolicy(trx, draft);
      await recordCreated(trx, 'alert', draft.id);
    });
    return policyView(draft);
  }

  async list(
    accountId: string,
    filters: { enabled?: boolean | undefined },
    request: PageRequest<alerts.PolicySort>,
  ): Promise<Page<PolicyView>> {
    const page = await alerts.listPolicies(this.store.db, accountId, filters, request);
    return { items: page.items.map(policyView), pagination: page.pagination };
  }

  async get(accountId: string, id: string): Promise<PolicyView> {
    return policyView(await this.find(accountId, id));
  }

  async update(accountId: string, id: string, changes: PolicyUpdate): Promise<PolicyView> {
    const current = await this.find(accountId, id);
    const merged: AlertPolicy = {
      ...current,
      ...(changes.name !== undefined ? { name: changes.name } : {}),
      ...(changes.description !== undefined ? { description: changes.description } : {}),
      ...(changes.metric !== undefined ? { metric: changes.metric } : {}),
      ...(changes.compare !== undefined ? { compare: changes.compare } : {}),
      ...(changes.threshold !== undefined ? { threshold: changes.threshold } : {}),
      ...(changes.window !== undefined ? { window: changes.window } : {}),
      ...(changes.state !== undefined ? { state: changes.state } : {}),
      ...(changes.targets !== undefined
        ? { targets: { instance_ids: changes.targets.instance_ids ?? [], tags: changes.targets.tags ?? {} } }
        : {}),
      ...(changes.channels !== undefined ? { channels: normalisedChannels(changes.channels) } : {}),
      ...(changes.enabled !== undefined ? { enabled: changes.enabled } : {}),
    };
    await this.check(accountId, merged, current);
    const at = this.clock.now();
    const { updated, closed } = await this.store.db.transaction().execute(async (trx) => {
      const held = await alerts.lockPolicy(trx, accountId, id);
      if (!held) throw new NotFound('alert', id);
      const updated = await alerts.updatePolicy(trx, id, {
        name: merged.name,
        description: merged.description,
        metric: merged.metric,
        compare: merged.compare,
        threshold: merged.threshold,
        window: merged.window,
        state: merged.state,
        targets: merged.targets,
        channels: merged.channels,
        enabled: merged.enabled,
        updated_at: at.toISOString(),
      });
      if (!updated) throw new NotFound('alert', id);
      const resolution: Resolution | null = !merged.enabled
        ? 'policy_disabled'
        : merged.metric !== held.metric || merged.state !== held.state
          ? 'policy_changed'
          : null;
      const closed = resolution ? await this.resolveOpen(trx, id, resolution, at) : 0;
      return { updated, closed };
    });
    if (closed > 0) this.incidents.wake();
    return policyView(updated);
  }

  /**
   * Deletes the policy. Its firing incidents resolve first (`policy_deleted`), with their resolved
   * messages on every channel, as disabling does: whoever was paged learns the page is over instead of
   * hearing nothing more. Those messages' rows go with the policy's (foreign keys), so while e-mail or
   * chat ones are to be sent the policy is only marked deleted — gone for the API and the evaluator —
   * and the notifier purges it once they are settled (resources/alerts/notifier.ts).
   */
  async delete(accountId: string, id: string): Promise<PolicyView> {
    const at = this.clock.now();
    const { deleted, closed } = await this.store.db.transaction().execute(async (trx) => {
      const held = await alerts.lockPolicy(trx, accountId, id);
      if (!held) return { deleted: undefined, closed: 0 };
      const closed = await this.resolveOpen(trx, id, 'policy_deleted', at);
      const messages = held.channels.email.length + held.channels.chat.length;
      if (closed > 0 && messages > 0) {
        await alerts.markPolicyDeleted(trx, id, at.toISOString());
        return { deleted: held, closed };
      }
      return { deleted: await alerts.deletePolicy(trx, accountId, id), closed };
    });
    if (!deleted) throw new NotFound('alert', id);
    if (closed > 0) this.incidents.wake();
    return policyView(deleted);
  }

  async incidentsOf(
    accountId: string,
    id: string,
    filters: { status?: 'firing' | 'resolved' | undefined; instanceId?: string | undefined },
    request: PageRequest<'started_at'>,
  ): Promise<Page<IncidentView>> {
    await this.find(accountId, id);
    return this.incidentPage(accountId, { ...filters, policyId: id }, request);
  }

  async listIncidents(
    accountId: string,
    filters: { status?: 'firing' | 'resolved' | undefined; instanceId?: string | undefined },
    request: PageRequest<'started_at'>,
  ): Promise<Page<IncidentView>> {
    return this.incidentPage(accountId, filters, request);
  }

  /**
   * A test notification to every channel of the policy, now, each answered with its outcome: e-mail and
   * chat get one attempt (not retried: the answer is the outcome); webhook subscriptions get an
   * `alert.firing` event marked `test: true`, delivered like any (retried if this attempt fails).
   */
  async test(accountId: string, id: string): Promise<{ alert_id: string; results: ChannelTestResult[] }> {
    const policy = await this.find(accountId, id);
    const now = this.clock.now();
    const data = {
      alert_id: policy.id,
      incident_id: null,
      name: policy.name,
      instance_id: null,
      instance_name: null,
      metric: policy.metric,
      compare: policy.compare,
      state: policy.state,
      window: policy.window,
      value: null,
      threshold: policy.threshold,
      started_at: now.toISOString(),
      resolved_at: null,
      resolution: null,
      console_url: null,
      test: true,
    };
    const results: ChannelTestResult[] = [];
    let eventId = newId('event', now);
    if (policy.channels.webhook_ids.length > 0) {
      const claimed = await this.store.db.transaction().execute(async (trx) => {
        eventId = await recordEvent(trx, this.clock, {
          accountId,
          type: 'alert.firing',
          resourceId: policy.id,
          data,
          deliverTo: policy.channels.webhook_ids,
        });
        return Promise.all(
          policy.channels.webhook_ids.map((webhookId) =>
            this.deliveries.claimEventDelivery(trx, webhookId, eventId),
          ),
        );
      });
      const sent = await Promise.all(claimed.map((delivery) => this.deliveries.sendClaimed(delivery)));
      for (const delivery of sent) {
        results.push({
          channel: 'webhook',
          target: delivery.webhook_id,
          status: delivery.status === 'succeeded' ? 'succeeded' : 'failed',
          error: delivery.last_error,
          duration_ms: delivery.duration_ms ?? 0,
          delivery_id: delivery.id,
        });
      }
    }
    const direct = [
      ...policy.channels.email.map((address) => ({
        channel: 'email' as const,
        target: address,
        format: null,
      })),
      ...policy.channels.chat.map((chat) => ({
        channel: 'chat' as const,
        target: chat.url,
        format: chat.format,
      })),
    ];
    const outcomes = await Promise.all(
      direct.map(async (target) => {
        const deliveryId = newId('delivery', now);
        const input: AlertMessageInput = {
          type: 'alert.firing',
          eventId,
          timestamp: now.toISOString(),
          data,
          deliveryId,
        };
        const outcome = await this.notifier.send(target, input);
        return {
          channel: target.channel,
          target: target.target,
          status: outcome.ok ? ('succeeded' as const) : ('failed' as const),
          error: outcome.error,
          duration_ms: outcome.durationMs,
          delivery_id: deliveryId,
        };
      }),
    );
    results.push(...outcomes);
    return { alert_id: policy.id, results };
  }

  private async incidentPage(
    accountId: string,
    filters: alerts.IncidentFilters,
    request: PageRequest<'started_at'>,
  ): Promise<Page<IncidentView>> {
    const page = await alerts.listIncidents(this.store.db, accountId, filters, request);
    const notifications = await alerts.notificationsOf(
      this.store.db,
      page.items.map((incident) => incident.id),
    );
    return {
      items: page.items.map((incident) => incidentView(incident, notifications.get(incident.id) ?? [])),
      pagination: page.pagination,
    };
  }

  /** Resolves the policy's open incidents in the caller's transaction; returns how many. */
  private async resolveOpen(
    trx: Executor,
    policyId: string,
    resolution: Resolution,
    at: Date,
  ): Promise<number> {
    const open = await trx
      .selectFrom('alert_incidents')
      .selectAll()
      .where('policy_id', '=', policyId)
      .where('status', '=', 'firing')
      .execute();
    if (open.length === 0) return 0;
    const closed = await this.incidents.resolve(
      open.map((row) => ({
        incident: row as alerts.Incident,
        resolvedValue: null,
        resolution,
        at,
      })),
      trx,
    );
    return closed.length;
  }

  private async find(accountId: string, id: string): Promise<AlertPolicy> {
    const policy = await alerts.findPolicy(this.store.db, accountId, id);
    if (!policy) throw new NotFound('alert', id);
    return policy;
  }

  /**
   * Every rule a saved policy obeys, in the order of its fields: the name and description, the condition,
   * the targets (the account's own instances), the channels (the account's own subscriptions, chat URLs
   * that lead somewhere public, e-mail only when this server can send it). `current`: the policy before a
   * change, whose own ids stay acceptable (an instance deleted since is not refused again).
   */
  private async check(accountId: string, policy: AlertPolicy, current: AlertPolicy | null): Promise<void> {
    if (!isPrintableName(policy.name)) {
      fail({
        message: 'name must be 1 to 100 printable characters, without white space at either end',
        field: 'name',
        value: policy.name,
      });
    }
    if (policy.description !== null && !isPrintableText(policy.description, MAX_DESCRIPTION_LENGTH)) {
      fail({
        message: `description is up to ${MAX_DESCRIPTION_LENGTH} printable characters, without white space at either end`,
        field: 'description',
        value: policy.description,
      });
    }
    const condition = conditionOf(policy);
    if (isProblem(condition)) fail(condition);
    const problem = channelsProblem(policy.channels);
    if (problem) fail(problem);
    const db = this.store.db;
    const known = new Set(current?.targets.instance_ids ?? []);
    const asked = policy.targets.instance_ids.filter((instanceId) => !known.has(instanceId));
    const owned = await alerts.accountOwnedIds(db, 'instances', accountId, asked);
    const missing = asked.find((instanceId) => !owned.has(instanceId));
    if (missing !== undefined) throw new NotFound('instance', missing, { field: 'targets.instance_ids' });
    const hooks = await alerts.accountOwnedIds(db, 'webhooks', accountId, policy.channels.webhook_ids);
    const strange = policy.channels.webhook_ids.find((webhookId) => !hooks.has(webhookId));
    if (strange !== undefined) throw new NotFound('webhook', strange, { field: 'channels.webhook_ids' });
    if (policy.channels.email.length > 0 && !this.notifier.mailConfigured) {
      fail({
        message:
          'E-mail channels need an SMTP relay, and NIMBUS_SMTP_URL is not set on this server: ask its operator, or use a webhook or chat channel',
        field: 'channels.email',
        value: policy.channels.email,
        setting: 'NIMBUS_SMTP_URL',
      });
    }
    const knownChats = new Set(current?.channels.chat.map((chat) => chat.url) ?? []);
    for (const [i, chat] of policy.channels.chat.entries()) {
      if (!knownChats.has(chat.url)) await this.checkChatUrl(chat, `channels.chat.${i}.url`);
    }
  }

  /** A chat URL's form, then where its host leads (the webhook SSRF rule), unless private ones are allowed. */
  private async checkChatUrl(chat: ChatChannel, field: string): Promise<void> {
    const problem = urlProblem(chat.url);
    if (problem) fail({ message: `The chat URL ${problem}`, field, value: chat.url });
    if (this.options.allowPrivate) return;
    const host = hostOf(new URL(chat.url));
    const addresses =
      isIP(host) !== 0
        ? [host]
        : await lookup(host, { all: true }).then(
            (found) => found.map((a) => a.address),
            () => null,
          );
    if (addresses === null)
      fail({ message: `The chat URL's host ${host} cannot be resolved`, field, value: chat.url });
    const forbidden = addresses.find(isForbiddenAddress);
    if (forbidden !== undefined) {
      fail({
        message: `The chat URL leads to ${forbidden}, a loopback, private, link-local or metadata address`,
        field,
        value: chat.url,
        address: forbidden,
      });
    }
  }
}

function fail(problem: PolicyProblem): never {
  const { message, ...details } = problem;
  throw new InvalidRequest(message, details);
}

function normalisedChannels(channels: Partial<AlertChannels>): AlertChannels {
  return {
    email: channels.email ?? [],
    webhook_ids: channels.webhook_ids ?? [],
    chat: (channels.chat ?? []).map((chat) => ({ url: chat.url, format: chat.format })),
  };
}

function incidentView(incident: alerts.Incident, notifications: alerts.NotificationState[]): IncidentView {
  return {
    id: incident.id,
    policy_id: incident.policy_id,
    instance_id: incident.instance_id,
    instance_name: incident.instance_name,
    status: incident.status,
    value: incident.value,
    threshold: incident.threshold,
    resolved_value: incident.resolved_value,
    resolution: incident.resolution,
    started_at: incident.started_at,
    resolved_at: incident.resolved_at,
    notifications: notifications.map((n) => ({
      id: n.id,
      transition: n.transition,
      channel: n.channel,
      target: n.target,
      status: n.status,
      attempts: n.attempts,
      last_error: n.last_error,
      created_at: n.created_at,
    })),
  };
}
