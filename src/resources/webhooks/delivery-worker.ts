/**
 * The webhook delivery worker: sends the pending deliveries the outbox created (platform/events/outbox.ts) and
 * records each attempt.
 *
 * How it works. Due deliveries are claimed under a lease (resources/webhooks/store.ts; SKIP LOCKED on PostgreSQL,
 * so replicas never send one attempt at the same time), sent, and their outcome written together with
 * what it does to the subscription. A process that dies mid-attempt leaves the lease to run out and the
 * delivery is sent again: at-least-once, with the same delivery id (`X-Nimbus-Delivery`, `webhook-id`)
 * so receivers can drop the repeat.
 *
 * Outcomes: a 2xx succeeds. `410 Gone` fails the delivery and disables the subscription at once. Anything
 * else is retried after NIMBUS_WEBHOOK_RETRY_BASE_SECONDS, doubling, for 12 attempts in all, then fails;
 * a subscription whose deliveries have all failed for 3 days is disabled. Disabling writes
 * `webhook.disabled` and fails what was still pending for it.
 *
 * Cost. Every claim and every outcome is a commit, and on SQLite (synchronous=FULL) a commit is an fsync
 * that holds up the whole process, so commits rather than requests bound the rate. Hence:
 * - group commit: outcomes of attempts that finish while a commit is under way wait for it and are then
 *   written together in one transaction, and the next claim rides in that same transaction, so a busy
 *   worker makes about one commit per round of answers, however many that round holds. An attempt
 *   counts as in flight, and its lease stays, until its outcome has committed;
 * - the subscriptions and events of a claimed batch are read (and the secrets opened) once per batch,
 *   not once per attempt; the subscription is read again, fresh, in the transaction that records
 *   outcomes, since what an outcome does to it depends on its state then.
 *
 * Fairness: at most `maxInFlight` attempts at once in a process, and at most `perSubscription` of them
 * for one subscription, so one slow or dead receiver never holds up the others.
 */
import { randomUUID } from 'node:crypto';
import type { Clock } from '../../platform/domain/clock.js';
import { asSystem } from '../../platform/events/actor.js';
import { recordEvent } from '../../platform/events/outbox.js';
import { findEventById, type StoredEvent } from '../../platform/events/store.js';
import { SealedSecretUnreadable } from '../../platform/secret-box.js';
import type { Store } from '../../platform/store/db.js';
import type { Executor } from '../../platform/store/schema.js';
import {
  DISABLE_AFTER_FAILING_MS,
  deliveryBody,
  headerSignature,
  MAX_DELIVERY_ATTEMPTS,
  retryDelayMs,
  standardSignature,
} from './rules.js';
import type { AttemptResult, WebhookSender } from './sender.js';
import * as webhooks from './store.js';

/** Why a delivery failed unsent when its subscription's secret cannot be opened (the log says it). */
export const SECRET_UNREADABLE_REASON =
  "The subscription's signing secret cannot be opened with this server's master key (it was sealed " +
  'under another key): the operator must start every replica with the same NIMBUS_SECRET_KEY, or rotate ' +
  'the secret (POST /v1/webhooks/{id}/rotate-secret)';

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

/** What the attempts of one claimed batch share: read once for the batch. */
interface Batch {
  /**
   * Per subscription id: the subscription and its live secrets (current first), null for secrets when
   * the current one cannot be opened; null when gone.
   */
  subscriptions: Map<string, { webhook: webhooks.Webhook; secrets: string[] | null } | null>;
  events: Map<string, StoredEvent | null>;
}

/** A finished attempt waiting for the next group commit. */
interface Outcome {
  delivery: webhooks.Delivery;
  /** What the receiver did; null when nothing was sent, and `skipped` says why. */
  result: AttemptResult | null;
  skipped: string | null;
  committed: () => void;
  lost: (error: unknown) => void;
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
  private outcomes: Outcome[] = [];
  private flushing = false;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly sender: WebhookSender,
    private readonly openSecret: (sealed: string, webhookId: string) => string,
    private readonly options: DeliveryWorkerOptions,
  ) {
    // Enough for many subscriptions at their own limit each; an attempt in flight costs a socket and a
    // few kilobytes.
    this.maxInFlight = options.maxInFlight ?? 256;
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
    // The platform's work, also when a request's commit woke it (platform/events/actor.ts).
    void asSystem(() => this.fill()).catch((error) => this.options.onError?.(error));
  }

  /** Stepped mode: sends every due delivery, round after round, until none is due; returns how many. */
  async runDue(): Promise<number> {
    let sent = 0;
    for (;;) {
      const { claimed } = await this.claim(this.store.db, this.maxInFlight);
      if (claimed.length === 0) return sent;
      const batch = await this.load(claimed);
      await Promise.all(claimed.map((delivery) => this.attempt(delivery, batch)));
      sent += claimed.length;
    }
  }

  /** Leases the new delivery of one event to one subscription, in the caller's transaction (a test delivery). */
  async claimEventDelivery(trx: Executor, webhookId: string, eventId: string): Promise<webhooks.Delivery> {
    const claimed = await webhooks.claimEventDelivery(trx, webhookId, eventId, this.owner, this.leaseUntil());
    if (!claimed) throw new Error(`no pending delivery of ${eventId} to ${webhookId}`);
    return claimed;
  }

  /** Sends a delivery this worker holds the lease of, now, and returns it as recorded. */
  async sendClaimed(claimed: webhooks.Delivery): Promise<webhooks.Delivery> {
    await this.attempt(claimed, await this.load([claimed]));
    const delivery = await webhooks.findDelivery(this.store.db, claimed.webhook_id, claimed.id);
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
        // A commit of outcomes is coming: its transaction claims as well, saving a commit.
        if (this.flushing) break;
        const room = this.maxInFlight - this.inFlightTotal;
        if (room <= 0 || this.stopped) break;
        const { claimed, more } = await this.claim(this.store.db, room);
        await this.startAll(claimed);
        if (more && claimed.length > 0) this.claimAgain = true;
      } while (this.claimAgain && !this.stopped);
    } finally {
      this.claiming = false;
    }
  }

  private async startAll(claimed: webhooks.Delivery[]): Promise<void> {
    if (claimed.length === 0) return;
    // Counted before the batch is read, so a claim meanwhile sees the room these take.
    for (const delivery of claimed) this.count(delivery.webhook_id, 1);
    let batch: Batch;
    try {
      batch = await this.load(claimed);
    } catch (error) {
      // Their leases run out and they are claimed again.
      for (const delivery of claimed) this.count(delivery.webhook_id, -1);
      throw error;
    }
    for (const delivery of claimed) this.track(delivery, batch);
  }

  private count(webhookId: string, by: number): void {
    this.inFlightTotal += by;
    const left = (this.inFlight.get(webhookId) ?? 0) + by;
    if (left <= 0) this.inFlight.delete(webhookId);
    else this.inFlight.set(webhookId, left);
  }

  private track(delivery: webhooks.Delivery, batch: Batch): void {
    const run = this.attempt(delivery, batch)
      .catch((error) => this.options.onError?.(error))
      .finally(() => {
        this.count(delivery.webhook_id, -1);
        this.running.delete(run);
        this.wake();
      });
    this.running.add(run);
  }

  /**
   * Claims up to `limit` due deliveries within the per-subscription limit; `finishing` are outcomes
   * being written in the same transaction, whose room counts as free.
   */
  private async claim(
    db: Executor,
    limit: number,
    finishing: readonly Outcome[] = [],
  ): Promise<{ claimed: webhooks.Delivery[]; more: boolean }> {
    let inFlight: ReadonlyMap<string, number> = this.inFlight;
    if (finishing.length > 0) {
      const counts = new Map(this.inFlight);
      for (const { delivery } of finishing)
        counts.set(delivery.webhook_id, (counts.get(delivery.webhook_id) ?? 1) - 1);
      inFlight = counts;
    }
    return webhooks.claimDueDeliveries(
      db,
      this.owner,
      this.clock.now(),
      this.leaseUntil(),
      limit,
      inFlight,
      this.perSubscription,
    );
  }

  private leaseUntil(): Date {
    return new Date(this.clock.now().getTime() + this.leaseMs);
  }

  /** The subscriptions (with their secrets opened) and events a batch of deliveries needs, once each. */
  private async load(claimed: readonly webhooks.Delivery[]): Promise<Batch> {
    const db = this.store.db;
    const now = this.clock.now().getTime();
    const subscriptions: Batch['subscriptions'] = new Map();
    const ids = [...new Set(claimed.map((delivery) => delivery.webhook_id))];
    for (const id of ids) subscriptions.set(id, null);
    for (const webhook of await webhooks.findWebhooksByIds(db, ids)) {
      const live = webhook.enabled && webhook.status === 'active';
      const current = live ? this.openable(webhook.secret, webhook.id) : null;
      const secrets = current === null ? null : [current];
      if (
        secrets &&
        webhook.previous_secret &&
        webhook.previous_secret_until &&
        Date.parse(webhook.previous_secret_until) > now
      ) {
        // A previous secret that cannot be opened only loses its signature: the current one still signs.
        const previous = this.openable(webhook.previous_secret, webhook.id);
        if (previous !== null) secrets.push(previous);
      }
      subscriptions.set(webhook.id, { webhook, secrets: live ? secrets : [] });
    }
    const events: Batch['events'] = new Map();
    for (const delivery of claimed) {
      if (!events.has(delivery.event_id)) {
        events.set(delivery.event_id, (await findEventById(db, delivery.event_id)) ?? null);
      }
    }
    return { subscriptions, events };
  }

  /** The opened secret, or null when this process's master key cannot open it. */
  private openable(sealed: string, webhookId: string): string | null {
    try {
      return this.openSecret(sealed, webhookId);
    } catch (error) {
      if (!(error instanceof SealedSecretUnreadable)) throw error;
      this.options.onError?.(error);
      return null;
    }
  }

  /** One attempt of a claimed delivery: send it and have its outcome recorded (resolves once committed). */
  private async attempt(delivery: webhooks.Delivery, batch: Batch): Promise<void> {
    const subscription = batch.subscriptions.get(delivery.webhook_id);
    const event = batch.events.get(delivery.event_id);
    if (!subscription || !event) {
      return this.record(delivery, null, 'The subscription or the event is gone');
    }
    const { webhook, secrets } = subscription;
    if (!webhook.enabled || webhook.status !== 'active') {
      return this.record(delivery, null, 'The subscription is disabled');
    }
    // Sent unsigned it would be worthless to the receiver; retrying cannot open the secret either.
    if (secrets === null) return this.record(delivery, null, SECRET_UNREADABLE_REASON);
    const now = this.clock.now();
    const delivered = {
      id: event.id,
      type: event.type,
      timestamp: event.created_at,
      data: event.data,
      actor: event.actor,
    };
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
    return this.record(delivery, result, null);
  }

  /** Queues an outcome for the next group commit; resolves when it is written. */
  private record(delivery: webhooks.Delivery, result: AttemptResult | null, skipped: string | null) {
    return new Promise<void>((committed, lost) => {
      this.outcomes.push({ delivery, result, skipped, committed, lost });
      if (!this.flushing) {
        this.flushing = true;
        // A disabled subscription is the system's doing, also after a test delivery a request sent.
        void asSystem(() => this.flush());
      }
    });
  }

  /** Writes queued outcomes, a transaction at a time, until none is left. */
  private async flush(): Promise<void> {
    try {
      while (this.outcomes.length > 0) {
        // Answers already read off their sockets join this commit rather than wait for the next one.
        await new Promise((resolve) => setImmediate(resolve));
        const outcomes = this.outcomes;
        this.outcomes = [];
        let claimed: webhooks.Delivery[] = [];
        try {
          claimed = await this.writeOutcomes(outcomes);
        } catch (error) {
          for (const outcome of outcomes) outcome.lost(error);
          continue;
        }
        for (const outcome of outcomes) outcome.committed();
        await this.startAll(claimed).catch((error) => this.options.onError?.(error));
      }
    } finally {
      this.flushing = false;
    }
    // Room freed by these outcomes is filled by the attempts' own wake-ups; this catches a claim that
    // stood aside while the commit was coming.
    this.wake();
  }

  /**
   * One transaction: every outcome and what it does to its subscription, then (in automatic mode) the
   * next claim for the room those outcomes free. Returns what was claimed.
   */
  private async writeOutcomes(outcomes: readonly Outcome[]): Promise<webhooks.Delivery[]> {
    const now = this.clock.now();
    return this.store.db.transaction().execute(async (trx) => {
      const ids = [...new Set(outcomes.map((outcome) => outcome.delivery.webhook_id))];
      const current = new Map((await webhooks.findWebhooksByIds(trx, ids)).map((w) => [w.id, w]));
      const writes: webhooks.RecordedAttempt[] = [];
      for (const outcome of outcomes) {
        await this.apply(trx, writes, outcome, current.get(outcome.delivery.webhook_id), now);
      }
      await webhooks.recordAttempts(trx, this.owner, writes.splice(0));
      if (!this.options.automatic || this.stopped) return [];
      // The outcomes above still count as in flight (their attempts finish after this commits).
      const room = this.maxInFlight - this.inFlightTotal + outcomes.length;
      return room > 0 ? (await this.claim(trx, room, outcomes)).claimed : [];
    });
  }

  /**
   * What one outcome writes: the delivery's row is added to `writes` (written together at the end),
   * changes to the subscription are made at once. `webhook` is the subscription as this transaction sees
   * it, and is kept up to date here, so a later outcome of the same transaction judges by what an
   * earlier one did.
   */
  private async apply(
    trx: Executor,
    writes: webhooks.RecordedAttempt[],
    outcome: Outcome,
    webhook: webhooks.Webhook | undefined,
    now: Date,
  ) {
    const { delivery, result } = outcome;
    const at = now.toISOString();
    if (result === null) {
      writes.push({
        id: delivery.id,
        status: 'failed',
        attempts: delivery.attempts,
        next_attempt_at: null,
        last_status_code: delivery.last_status_code,
        last_error: outcome.skipped,
        response_excerpt: delivery.response_excerpt,
        duration_ms: delivery.duration_ms,
        updated_at: at,
      });
      return;
    }
    const attempts = delivery.attempts + 1;
    const seen = {
      attempts,
      last_status_code: result.statusCode,
      last_error: result.error,
      response_excerpt: result.excerpt,
      duration_ms: result.durationMs,
    };
    const settle = (status: webhooks.DeliveryStatus) =>
      writes.push({ ...seen, id: delivery.id, status, next_attempt_at: null, updated_at: at });
    if (result.error === null) {
      settle('succeeded');
      if (webhook && webhook.failing_since !== null) {
        await webhooks.updateWebhook(trx, webhook.id, { failing_since: null, updated_at: at });
        webhook.failing_since = null;
      }
      return;
    }
    if (!webhook) {
      // Deleted while the attempt was out (its deliveries went with it): nothing left to retry.
      settle('failed');
      return;
    }
    if (result.statusCode === 410) {
      settle('failed');
      await this.disable(trx, writes, webhook, 'The receiver answered 410 Gone', at);
      return;
    }
    const failingSince = webhook.failing_since ?? at;
    if (now.getTime() - Date.parse(failingSince) >= DISABLE_AFTER_FAILING_MS) {
      settle('failed');
      await this.disable(trx, writes, webhook, 'Every delivery failed for 3 days', at);
      return;
    }
    if (webhook.failing_since === null) {
      await webhooks.updateWebhook(trx, webhook.id, { failing_since: at, updated_at: at });
      webhook.failing_since = at;
    }
    if (attempts >= MAX_DELIVERY_ATTEMPTS) {
      settle('failed');
      return;
    }
    const next = new Date(now.getTime() + retryDelayMs(attempts, this.options.retryBaseSeconds));
    writes.push({
      ...seen,
      id: delivery.id,
      status: 'pending',
      next_attempt_at: next.toISOString(),
      updated_at: at,
    });
  }

  /** Disables the subscription, once: two outcomes that would each disable it write one event. */
  private async disable(
    trx: Executor,
    writes: webhooks.RecordedAttempt[],
    webhook: webhooks.Webhook,
    reason: string,
    at: string,
  ) {
    if (webhook.status === 'disabled') return;
    // Retries recorded so far in this transaction are pending again, and are failed with the rest.
    await webhooks.recordAttempts(trx, this.owner, writes.splice(0));
    // Guarded on `active`: another transaction (another replica) that disabled it first wrote the event.
    const disabledHere = await webhooks.disableWebhook(trx, webhook.id, reason, at);
    webhook.status = 'disabled';
    if (!disabledHere) return;
    await webhooks.failPendingDeliveries(trx, webhook.id, `The subscription was disabled: ${reason}`, at);
    await recordEvent(trx, this.clock, {
      accountId: webhook.account_id,
      type: 'webhook.disabled',
      resourceId: webhook.id,
      data: { webhook_id: webhook.id, reason },
    });
  }
}
