/**
 * The webhook delivery worker: sends the pending deliveries the outbox created (events/outbox.ts) and
 * records each attempt.
 *
 * How it works. Due deliveries are claimed under a lease (store/webhooks.ts; SKIP LOCKED on PostgreSQL,
 * so replicas never send one attempt at the same time), sent, and their outcome written in one
 * transaction together with what it does to the subscription. A process that dies mid-attempt leaves
 * the lease to run out and the delivery is sent again: at-least-once, with the same delivery id
 * (`X-Nimbus-Delivery`, `webhook-id`) so receivers can drop the repeat.
 *
 * Outcomes: a 2xx succeeds. `410 Gone` fails the delivery and disables the subscription at once. Anything
 * else is retried after NIMBUS_WEBHOOK_RETRY_BASE_SECONDS, doubling, for 12 attempts in all, then fails;
 * a subscription whose deliveries have all failed for 3 days is disabled. Disabling writes
 * `webhook.disabled` and fails what was still pending for it.
 *
 * Fairness: at most `maxInFlight` attempts at once in a process, and at most `perSubscription` of them
 * for one subscription, so one slow or dead receiver never holds up the others.
 */
import { randomUUID } from 'node:crypto';
import type { Clock } from '../domain/clock.js';
import {
  DISABLE_AFTER_FAILING_MS,
  deliveryBody,
  headerSignature,
  MAX_DELIVERY_ATTEMPTS,
  retryDelayMs,
  standardSignature,
} from '../domain/webhooks.js';
import { recordEvent } from '../events/outbox.js';
import type { AttemptResult, WebhookSender } from '../events/webhook-sender.js';
import type { Store } from '../store/db.js';
import { findEventById } from '../store/events.js';
import type { Executor } from '../store/schema.js';
import * as webhooks from '../store/webhooks.js';

export interface DeliveryWorkerOptions {
  /** false: stepped mode (tests with a manual clock); nothing runs until `runDue()`. */
  automatic: boolean;
  retryBaseSeconds: number;
  maxInFlight?: number;
  perSubscription?: number;
  pollMs?: number;
  leaseMs?: number;
  onError?: (error: unknown) => void;
}

export class WebhookDeliveryWorker {
  private readonly owner = `delivery_${randomUUID()}`;
  private readonly inFlight = new Map<string, number>();
  private inFlightTotal = 0;
  private readonly maxInFlight: number;
  private readonly perSubscription: number;
  private readonly leaseMs: number;
  private pollTimer: NodeJS.Timeout | null = null;
  private claiming = false;
  private claimAgain = false;
  private stopped = false;
  private readonly running = new Set<Promise<void>>();

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly sender: WebhookSender,
    private readonly openSecret: (sealed: string, webhookId: string) => string,
    private readonly options: DeliveryWorkerOptions,
  ) {
    this.maxInFlight = options.maxInFlight ?? 64;
    this.perSubscription = options.perSubscription ?? 8;
    // Three times an attempt's timeout: a lease held by a process that died is free again after this.
    this.leaseMs = options.leaseMs ?? 30_000;
  }

  start(): void {
    if (!this.options.automatic || this.pollTimer) return;
    this.pollTimer = setInterval(() => this.wake(), this.options.pollMs ?? 100);
    this.pollTimer.unref();
    this.wake();
  }

  /** Looks for due deliveries now (after a commit that made some), without waiting for the poll. */
  wake(): void {
    if (!this.options.automatic || this.stopped) return;
    void this.fill().catch((error) => this.options.onError?.(error));
  }

  /** Stepped mode: sends every due delivery, round after round, until none is due; returns how many. */
  async runDue(): Promise<number> {
    let sent = 0;
    for (;;) {
      const claimed = await this.claim(this.maxInFlight);
      if (claimed.length === 0) return sent;
      await Promise.all(claimed.map((delivery) => this.attempt(delivery)));
      sent += claimed.length;
    }
  }

  /** Sends one event's delivery to one subscription at once (a test delivery) and returns it settled. */
  async deliverEventNow(webhookId: string, eventId: string): Promise<webhooks.Delivery> {
    const claimed = await webhooks.claimEventDelivery(
      this.store.db,
      webhookId,
      eventId,
      this.owner,
      this.leaseUntil(),
    );
    if (!claimed) throw new Error(`no pending delivery of ${eventId} to ${webhookId}`);
    await this.attempt(claimed);
    const delivery = await webhooks.findDelivery(this.store.db, webhookId, claimed.id);
    if (!delivery) throw new Error(`delivery ${claimed.id} vanished`);
    return delivery;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.pollTimer) clearInterval(this.pollTimer);
    this.pollTimer = null;
    await Promise.allSettled([...this.running]);
    this.sender.close();
  }

  /** Claims as many due deliveries as there is room for and starts them; runs once at a time. */
  private async fill(): Promise<void> {
    if (this.claiming) {
      this.claimAgain = true;
      return;
    }
    this.claiming = true;
    try {
      do {
        this.claimAgain = false;
        const room = this.maxInFlight - this.inFlightTotal;
        if (room <= 0 || this.stopped) break;
        const claimed = await this.claim(room);
        for (const delivery of claimed) this.track(delivery);
        if (claimed.length === room) this.claimAgain = true;
      } while (this.claimAgain && !this.stopped);
    } finally {
      this.claiming = false;
    }
  }

  private track(delivery: webhooks.Delivery): void {
    this.inFlightTotal += 1;
    this.inFlight.set(delivery.webhook_id, (this.inFlight.get(delivery.webhook_id) ?? 0) + 1);
    const run = this.attempt(delivery)
      .catch((error) => this.options.onError?.(error))
      .finally(() => {
        this.inFlightTotal -= 1;
        const left = (this.inFlight.get(delivery.webhook_id) ?? 1) - 1;
        if (left === 0) this.inFlight.delete(delivery.webhook_id);
        else this.inFlight.set(delivery.webhook_id, left);
        this.running.delete(run);
        this.wake();
      });
    this.running.add(run);
  }

  private claim(limit: number): Promise<webhooks.Delivery[]> {
    const busy = [...this.inFlight].filter(([, n]) => n >= this.perSubscription).map(([id]) => id);
    return webhooks.claimDueDeliveries(
      this.store.db,
      this.owner,
      this.clock.now(),
      this.leaseUntil(),
      limit,
      busy,
    );
  }

  private leaseUntil(): Date {
    return new Date(this.clock.now().getTime() + this.leaseMs);
  }

  /** One attempt of a claimed delivery: send it and record what happened. */
  private async attempt(delivery: webhooks.Delivery): Promise<void> {
    const db = this.store.db;
    const webhook = await webhooks.findWebhookById(db, delivery.webhook_id);
    const event = await findEventById(db, delivery.event_id);
    const now = this.clock.now();
    if (!webhook || !event) {
      await this.settle(db, delivery, {
        status: 'failed',
        last_error: 'The subscription or the event is gone',
      });
      return;
    }
    if (!webhook.enabled || webhook.status !== 'active') {
      await this.settle(db, delivery, { status: 'failed', last_error: 'The subscription is disabled' });
      return;
    }
    const secrets = [this.openSecret(webhook.secret, webhook.id)];
    if (
      webhook.previous_secret &&
      webhook.previous_secret_until &&
      Date.parse(webhook.previous_secret_until) > now.getTime()
    ) {
      secrets.push(this.openSecret(webhook.previous_secret, webhook.id));
    }
    const delivered = { id: event.id, type: event.type, timestamp: event.created_at, data: event.data };
    const body = deliveryBody(delivered, secrets[0] as string);
    const timestamp = Math.floor(now.getTime() / 1000);
    const result = await this.sender.send(webhook.id, webhook.url, body, {
      'x-nimbus-event': event.type,
      'x-nimbus-delivery': delivery.id,
      'x-nimbus-timestamp': String(timestamp),
      'x-nimbus-signature': headerSignature(secrets, body),
      'webhook-id': delivery.id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': standardSignature(secrets, delivery.id, timestamp, body),
    });
    await this.record(delivery, webhook, result);
  }

  private async record(delivery: webhooks.Delivery, webhook: webhooks.Webhook, result: AttemptResult) {
    const now = this.clock.now();
    const at = now.toISOString();
    const attempts = delivery.attempts + 1;
    const seen = {
      attempts,
      last_status_code: result.statusCode,
      last_error: result.error,
      response_excerpt: result.excerpt,
      duration_ms: result.durationMs,
    };
    await this.store.db.transaction().execute(async (trx) => {
      if (result.error === null) {
        await this.settle(trx, delivery, { ...seen, status: 'succeeded' });
        if (webhook.failing_since !== null) {
          await webhooks.updateWebhook(trx, webhook.id, { failing_since: null, updated_at: at });
        }
        return;
      }
      if (result.statusCode === 410) {
        await this.settle(trx, delivery, { ...seen, status: 'failed' });
        await this.disable(trx, webhook, 'The receiver answered 410 Gone', at);
        return;
      }
      const failingSince = webhook.failing_since ?? at;
      if (now.getTime() - Date.parse(failingSince) >= DISABLE_AFTER_FAILING_MS) {
        await this.settle(trx, delivery, { ...seen, status: 'failed' });
        await this.disable(trx, webhook, 'Every delivery failed for 3 days', at);
        return;
      }
      if (webhook.failing_since === null) {
        await webhooks.updateWebhook(trx, webhook.id, { failing_since: at, updated_at: at });
      }
      if (attempts >= MAX_DELIVERY_ATTEMPTS) {
        await this.settle(trx, delivery, { ...seen, status: 'failed' });
        return;
      }
      const next = new Date(now.getTime() + retryDelayMs(attempts, this.options.retryBaseSeconds));
      await webhooks.recordAttempt(trx, delivery.id, this.owner, {
        ...seen,
        status: 'pending',
        next_attempt_at: next.toISOString(),
        updated_at: at,
      });
    });
  }

  private async settle(db: Executor, delivery: webhooks.Delivery, changes: webhooks.AttemptChanges) {
    await webhooks.recordAttempt(db, delivery.id, this.owner, {
      ...changes,
      next_attempt_at: null,
      updated_at: this.clock.now().toISOString(),
    });
  }

  private async disable(trx: Executor, webhook: webhooks.Webhook, reason: string, at: string) {
    // Attempts finishing together may all find the subscription failing: the first disables it, and
    // only that one writes the event.
    if (!(await webhooks.disableWebhook(trx, webhook.id, reason, at))) return;
    await webhooks.failPendingDeliveries(trx, webhook.id, `The subscription was disabled: ${reason}`, at);
    await recordEvent(trx, this.clock, {
      accountId: webhook.account_id,
      type: 'webhook.disabled',
      resourceId: webhook.id,
      data: { webhook_id: webhook.id, reason },
    });
  }
}
