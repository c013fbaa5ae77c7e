/**
 * Webhook subscriptions (docs/design.md, "Events and webhooks"): the rules for saving one (an https URL that does not
 * lead into private address space, events from the catalogue, a secret of at least 16 characters kept
 * sealed), rotation with an overlap in which both secrets sign, test deliveries, redeliveries and the
 * delivery log. Sending is the delivery worker's (webhook-delivery.ts).
 */
import { randomBytes } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { Clock } from '../../platform/domain/clock.js';
import { newId } from '../../platform/domain/ids.js';
import type { Page, PageRequest } from '../../platform/domain/pagination.js';
import { isPrintableText } from '../../platform/domain/validation.js';
import { Conflict, InvalidRequest, NotFound } from '../../platform/errors.js';
import type { EventCatalogue } from '../../platform/events/catalog.js';
import { recordEvent } from '../../platform/events/outbox.js';
import { recordCreated } from '../../platform/idempotency/context.js';
import type { QuotaService } from '../../platform/quotas/quotas.js';
import type { SecretBox } from '../../platform/secret-box.js';
import type { Store } from '../../platform/store/db.js';
import { lockAccount } from '../account/store.js';
import { SECRET_UNREADABLE_REASON, type WebhookDeliveryWorker } from './delivery-worker.js';
import {
  DEFAULT_ROTATION_OVERLAP_SECONDS,
  eventPatterns,
  hostOf,
  isEventPattern,
  isForbiddenAddress,
  MIN_SECRET_LENGTH,
  urlProblem,
} from './rules.js';
import * as webhooks from './store.js';
import type { WebhookView } from './view.js';

export type { WebhookView };

/** A new or rotated subscription: the secret is shown this once, when Nimbus generated it. */
export interface WebhookWithSecret extends WebhookView {
  secret?: string;
}

export interface DeliveryView {
  id: string;
  webhook_id: string;
  event_id: string;
  event_type: string;
  status: webhooks.DeliveryStatus;
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  response_excerpt: string | null;
  duration_ms: number | null;
  next_attempt_at: string | null;
  redelivery_of: string | null;
  created_at: string;
  updated_at: string;
}

export interface NewWebhook {
  url: string;
  events: string[];
  secret?: string | undefined;
  description?: string | undefined;
  enabled?: boolean | undefined;
}

export interface WebhookUpdate {
  url?: string | undefined;
  events?: string[] | undefined;
  description?: string | null | undefined;
  enabled?: boolean | undefined;
}

export interface WebhookServiceOptions {
  /** NIMBUS_WEBHOOK_ALLOW_PRIVATE: receivers on loopback and private addresses are allowed. */
  allowPrivate: boolean;
  /** The event types subscriptions may name (src/resources.ts `EVENT_CATALOGUE`). */
  catalogue: EventCatalogue;
}

export function deliveryView(delivery: webhooks.Delivery): DeliveryView {
  return {
    id: delivery.id,
    webhook_id: delivery.webhook_id,
    event_id: delivery.event_id,
    event_type: delivery.event_type,
    status: delivery.status,
    attempts: delivery.attempts,
    last_status_code: delivery.last_status_code,
    last_error: delivery.last_error,
    response_excerpt: delivery.response_excerpt,
    duration_ms: delivery.duration_ms,
    next_attempt_at: delivery.next_attempt_at,
    redelivery_of: delivery.redelivery_of,
    created_at: delivery.created_at,
    updated_at: delivery.updated_at,
  };
}

export class WebhookService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly quotas: QuotaService,
    private readonly box: SecretBox,
    private readonly worker: WebhookDeliveryWorker,
    private readonly options: WebhookServiceOptions,
  ) {}

  async create(accountId: string, input: NewWebhook): Promise<WebhookWithSecret> {
    const url = await this.checkUrl(input.url);
    const events = checkEvents(this.options.catalogue, input.events);
    checkDescription(input.description);
    const secret = input.secret ?? generateSecret();
    checkSecret(secret);
    const now = this.clock.now();
    const at = now.toISOString();
    const id = newId('webhook', now);
    const webhook: webhooks.Webhook = {
      id,
      account_id: accountId,
      url,
      events,
      secret: this.box.seal(secret, id),
      previous_secret: null,
      previous_secret_until: null,
      description: input.description ?? null,
      enabled: input.enabled ?? true,
      status: 'active',
      disabled_reason: null,
      failing_since: null,
      created_at: at,
      updated_at: at,
    };
    await this.store.db.transaction().execute(async (trx) => {
      await lockAccount(trx, accountId);
      await this.quotas.ensureRoom(trx, accountId, 'webhooks', 1);
      await webhooks.insertWebhook(trx, webhook);
      await recordCreated(trx, 'webhook', webhook.id);
    });
    return { ...this.view(webhook), ...(input.secret === undefined ? { secret } : {}) };
  }

  async list(accountId: string, request: PageRequest): Promise<Page<WebhookView>> {
    const page = await webhooks.listWebhooks(this.store.db, accountId, request);
    return { items: page.items.map((w) => this.view(w)), pagination: page.pagination };
  }

  async get(accountId: string, id: string): Promise<WebhookView> {
    return this.view(await this.find(accountId, id));
  }

  async update(accountId: string, id: string, changes: WebhookUpdate): Promise<WebhookView> {
    const current = await this.find(accountId, id);
    const url = changes.url === undefined ? undefined : await this.checkUrl(changes.url);
    const events =
      changes.events === undefined ? undefined : checkEvents(this.options.catalogue, changes.events);
    if (changes.description !== null) checkDescription(changes.description);
    // Turning a subscription the platform disabled back on gives it a fresh start.
    const revived =
      changes.enabled === true && current.status === 'disabled'
        ? { status: 'active' as const, disabled_reason: null, failing_since: null }
        : {};
    const updated = await webhooks.updateWebhook(this.store.db, current.id, {
      ...(url !== undefined ? { url } : {}),
      ...(events !== undefined ? { events } : {}),
      ...(changes.description !== undefined ? { description: changes.description } : {}),
      ...(changes.enabled !== undefined ? { enabled: changes.enabled } : {}),
      ...revived,
      updated_at: this.clock.now().toISOString(),
    });
    if (!updated) throw new NotFound('webhook', id);
    return this.view(updated);
  }

  async delete(accountId: string, id: string): Promise<WebhookView> {
    const deleted = await webhooks.deleteWebhook(this.store.db, accountId, id);
    if (!deleted) throw new NotFound('webhook', id);
    return this.view(deleted);
  }

  /**
   * A new secret (given, or generated and shown once); the one before keeps signing, beside it, for
   * `overlapSeconds` (0: not at all), so receivers can switch without a gap.
   */
  async rotateSecret(
    accountId: string,
    id: string,
    input: { secret?: string | undefined; overlap_seconds?: number | undefined },
  ): Promise<WebhookWithSecret> {
    const current = await this.find(accountId, id);
    const secret = input.secret ?? generateSecret();
    checkSecret(secret);
    const overlap = input.overlap_seconds ?? DEFAULT_ROTATION_OVERLAP_SECONDS;
    const now = this.clock.now();
    const updated = await webhooks.updateWebhook(this.store.db, current.id, {
      secret: this.box.seal(secret, current.id),
      previous_secret: overlap > 0 ? current.secret : null,
      previous_secret_until: overlap > 0 ? new Date(now.getTime() + overlap * 1000).toISOString() : null,
      updated_at: now.toISOString(),
    });
    if (!updated) throw new NotFound('webhook', id);
    return { ...this.view(updated), ...(input.secret === undefined ? { secret } : {}) };
  }

  /** Sends a `webhook.test` event to this subscription now and answers with the delivery's outcome. */
  async test(accountId: string, id: string): Promise<DeliveryView> {
    const webhook = await this.find(accountId, id);
    // The delivery is leased to this process in the transaction that makes it, so no worker (here or on
    // another replica) can take it first: this request sends it.
    const claimed = await this.store.db.transaction().execute(async (trx) => {
      const eventId = await recordEvent(trx, this.clock, {
        accountId,
        type: 'webhook.test',
        resourceId: webhook.id,
        data: { webhook_id: webhook.id },
        deliverTo: [webhook.id],
      });
      return this.worker.claimEventDelivery(trx, webhook.id, eventId);
    });
    const delivery = await this.worker.sendClaimed(claimed);
    if (delivery.status === 'failed' && delivery.last_error === SECRET_UNREADABLE_REASON) {
      // Nothing was sent: the caller learns why, and what clears it, instead of a delivery to puzzle over.
      throw new Conflict(SECRET_UNREADABLE_REASON.replace('{id}', webhook.id), {
        reason: 'secret_unreadable',
        delivery_id: delivery.id,
      });
    }
    return deliveryView(delivery);
  }

  async deliveries(
    accountId: string,
    id: string,
    filters: webhooks.DeliveryFilters,
    request: PageRequest,
  ): Promise<Page<DeliveryView>> {
    const webhook = await this.find(accountId, id);
    const page = await webhooks.listDeliveries(this.store.db, webhook.id, filters, request);
    return { items: page.items.map(deliveryView), pagination: page.pagination };
  }

  async delivery(accountId: string, id: string, deliveryId: string): Promise<DeliveryView> {
    const webhook = await this.find(accountId, id);
    const delivery = await webhooks.findDelivery(this.store.db, webhook.id, deliveryId);
    if (!delivery) throw new NotFound('delivery', deliveryId);
    return deliveryView(delivery);
  }

  /** A new delivery of the same event to the same subscription, due now; the original stays as it was. */
  async redeliver(accountId: string, id: string, deliveryId: string): Promise<DeliveryView> {
    const webhook = await this.find(accountId, id);
    const original = await webhooks.findDelivery(this.store.db, webhook.id, deliveryId);
    if (!original) throw new NotFound('delivery', deliveryId);
    const now = this.clock.now();
    const copy = webhooks.pendingDelivery({
      id: newId('delivery', now),
      webhookId: original.webhook_id,
      accountId: original.account_id,
      eventId: original.event_id,
      eventType: original.event_type,
      at: now.toISOString(),
      redeliveryOf: original.id,
    });
    await this.store.db.transaction().execute(async (trx) => {
      await webhooks.insertDeliveries(trx, [copy]);
      await recordCreated(trx, 'delivery', copy.id);
    });
    this.worker.wake();
    return deliveryView(copy);
  }

  private async find(accountId: string, id: string): Promise<webhooks.Webhook> {
    const webhook = await webhooks.findWebhook(this.store.db, accountId, id);
    if (!webhook) throw new NotFound('webhook', id);
    return webhook;
  }

  private view(webhook: webhooks.Webhook): WebhookView {
    const overlapping =
      webhook.previous_secret_until !== null &&
      Date.parse(webhook.previous_secret_until) > this.clock.now().getTime();
    return {
      id: webhook.id,
      url: webhook.url,
      events: webhook.events,
      description: webhook.description,
      enabled: webhook.enabled,
      status: webhook.status,
      disabled_reason: webhook.disabled_reason,
      previous_secret_expires_at: overlapping ? webhook.previous_secret_until : null,
      created_at: webhook.created_at,
      updated_at: webhook.updated_at,
    };
  }

  /** The URL's form, then where its host leads: no private, loopback or link-local address (unless allowed). */
  private async checkUrl(text: string): Promise<string> {
    const problem = urlProblem(text);
    if (problem) throw new InvalidRequest(`The webhook URL ${problem}`, { field: 'url', value: text });
    const url = new URL(text);
    if (this.options.allowPrivate) return url.href;
    const host = hostOf(url);
    const addresses =
      isIP(host) !== 0
        ? [host]
        : await lookup(host, { all: true }).then(
            (found) => found.map((a) => a.address),
            () => null,
          );
    if (addresses === null) {
      throw new InvalidRequest(`The webhook URL's host ${host} cannot be resolved`, {
        field: 'url',
        value: text,
      });
    }
    const forbidden = addresses.find(isForbiddenAddress);
    if (forbidden !== undefined) {
      throw new InvalidRequest(
        `The webhook URL leads to ${forbidden}, a loopback, private, link-local or metadata address`,
        { field: 'url', value: text, address: forbidden },
      );
    }
    return url.href;
  }
}

function generateSecret(): string {
  return `whsec_${randomBytes(24).toString('base64url')}`;
}

function checkSecret(secret: string): void {
  if (secret.length < MIN_SECRET_LENGTH || secret.length > 256 || !/^[\x21-\x7e]+$/.test(secret)) {
    throw new InvalidRequest(
      `A webhook secret is ${MIN_SECRET_LENGTH} to 256 printable ASCII characters without spaces`,
      { field: 'secret' },
    );
  }
}

function checkEvents(catalogue: EventCatalogue, events: string[]): string[] {
  for (const pattern of events) {
    if (!isEventPattern(catalogue, pattern)) {
      throw new InvalidRequest(`Unknown event type ${pattern}`, {
        field: 'events',
        value: pattern,
        allowed_values: eventPatterns(catalogue),
      });
    }
  }
  return [...new Set(events)];
}

const MAX_DESCRIPTION_LENGTH = 500;

function checkDescription(description: string | undefined): void {
  if (description !== undefined && !isPrintableText(description, MAX_DESCRIPTION_LENGTH)) {
    throw new InvalidRequest(
      `A description is up to ${MAX_DESCRIPTION_LENGTH} printable characters, without control or invisible formatting characters and without white space at either end`,
      { field: 'description' },
    );
  }
}
