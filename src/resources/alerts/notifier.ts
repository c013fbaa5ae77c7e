/**
 * Sends alert notifications by e-mail and to chat, each a durable delivery retried like a webhook
 * delivery (docs/design.md, "Events and webhooks": the retry base doubling, 12 attempts in all).
 *
 * How it works. Every e-mail or chat notification is a row (resources/alerts/store.ts) written with its incident
 * transition, in the transaction that also makes the notifier's one job (`alert-notify:all`) due now. The
 * runner leases that job, so one process sends at a time; a run takes the due notifications (up to
 * BATCH, starting attempts for RUN_BUDGET_MS at most), sends them side by side, writes every outcome
 * in one transaction, and comes back when the next pending one is due. One commit for a batch, not one per message, is what keeps a burst of incidents
 * fast on SQLite, where a commit is an fsync. A process killed mid-run leaves the job's lease to run out
 * and the next run sends again what it had not recorded: at-least-once, always with the notification's id
 * (`Message-ID: <dlv_…@nimbus>` and `X-Nimbus-Delivery` on e-mail, `X-Nimbus-Delivery` and `webhook-id`
 * on chat posts) so the receiver can drop a repeat. Outcomes are written guarded on the notification
 * still being pending. A run that is not a full batch also removes the policies deleted while their
 * last messages were pending (AlertService.delete) once those are settled.
 *
 * - E-mail goes through the SMTP relay of NIMBUS_SMTP_URL with nodemailer (SMTP_CONNECTIONS pooled
 *   connections kept open across runs, so a message is one SMTP conversation, not a TCP and TLS
 *   setup), from NIMBUS_SMTP_FROM, as a text and an HTML part (resources/alerts/messages.ts). Accepted by
 *   the relay is delivered; a refusal or no answer is a failed attempt.
 * - Chat is an HTTPS POST of Slack's, Discord's or a generic JSON body through the webhook sender, so the
 *   webhook SSRF rules (no loopback, private, link-local or metadata address, checked at connect time)
 *   and its 10 s limit hold; a 2xx is delivered.
 */
import { readFileSync } from 'node:fs';
import nodemailer, { type Transporter } from 'nodemailer';
import type { Clock } from '../../platform/domain/clock.js';
import { findEventById, type StoredEvent } from '../../platform/events/store.js';
import type { JobHandler } from '../../platform/jobs/runner.js';
import type { Store } from '../../platform/store/db.js';
import { MAX_DELIVERY_ATTEMPTS, retryDelayMs } from '../webhooks/rules.js';
import type { WebhookSender } from '../webhooks/sender.js';
import { type AlertEventData, type AlertMessageInput, chatBody, emailMessage } from './messages.js';
import type { ChatFormat } from './rules.js';
import {
  dueNotifications,
  type Notification,
  nextNotificationDue,
  purgeDeletedPolicies,
  recordNotificationAttempt,
} from './store.js';

/** Why a notification whose event is gone fails at once (nothing to say). */
const GONE = 'The event of this notification is gone';

export interface MailSettings {
  /** NIMBUS_SMTP_URL; null: e-mail cannot be sent (and policies with e-mail channels are refused). */
  url: string | null;
  from: string;
  /** NIMBUS_SMTP_CA_FILE: an extra CA for the relay's certificate. */
  caFile: string | null;
}

export interface NotifierOptions {
  retryBaseSeconds: number;
  mail: MailSettings;
}

/** One attempt's outcome. */
export interface SendOutcome {
  ok: boolean;
  error: string | null;
  durationMs: number;
}

/** No answer from the relay within this long fails the attempt. */
const SMTP_TIMEOUT_MS = 10_000;
/** Messages sent at once. */
const CONCURRENCY = 32;
/**
 * Pooled connections to the relay. Each carries one SMTP conversation at a time (nodemailer does not
 * pipeline), so a burst's lag is about its messages divided by this, times one conversation: 16 keeps a
 * burst of a hundred incidents within a second or so against a local relay, well under the per-client
 * connection limits relays set (Postfix allows 50).
 */
const SMTP_CONNECTIONS = 16;
/** Messages a pooled connection carries before it is replaced (nodemailer's default is 100). */
const MESSAGES_PER_CONNECTION = 1_000;
/**
 * Notifications a run takes at most. A burst goes out in one run — one claim, one commit of outcomes —
 * instead of a run per 64 with the job's reschedule and claim between them (four runs for a burst of
 * 200 before).
 */
const BATCH = 256;
/**
 * A run starts no attempt after this long (what it has not started stays pending for the next run), so a
 * run whose attempts time out (10 s each for chat and for each SMTP stage) still ends inside the job's
 * 30 s lease.
 */
const RUN_BUDGET_MS = 5_000;

export class AlertNotifier implements JobHandler {
  private mailer: Transporter | null = null;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly sender: WebhookSender,
    private readonly options: NotifierOptions,
  ) {}

  /**
   * Attempts record their own failures; a run that still fails ten times in a row (the store unreachable)
   * leaves its notifications pending, and the next transition makes the job again.
   */
  async giveUp(): Promise<void> {}

  /** Whether e-mail can be sent: NIMBUS_SMTP_URL is set. */
  get mailConfigured(): boolean {
    return this.options.mail.url !== null;
  }

  /** One run: sends the due notifications; returns when the next one is due (null: none is pending). */
  async run(): Promise<Date | null> {
    const db = this.store.db;
    const due = await dueNotifications(db, this.clock.now().toISOString(), BATCH);
    if (due.length > 0) {
      // Each event read once, when its first notification is sent (not all before the first send).
      const events = new Map<string, Promise<StoredEvent | undefined>>();
      const eventOf = (id: string) => {
        let event = events.get(id);
        if (event === undefined) {
          event = findEventById(db, id);
          events.set(id, event);
        }
        return event;
      };
      const deadline = performance.now() + RUN_BUDGET_MS;
      const attempted: Notification[] = [];
      const outcomes: SendOutcome[] = [];
      let next = 0;
      await Promise.all(
        Array.from({ length: Math.min(CONCURRENCY, due.length) }, async () => {
          while (next < due.length && performance.now() < deadline) {
            const notification = due[next++] as Notification;
            const event = await eventOf(notification.event_id);
            const outcome = event
              ? await this.send(notification, {
                  type: event.type as AlertMessageInput['type'],
                  eventId: event.id,
                  timestamp: event.created_at,
                  data: event.data as unknown as AlertEventData,
                  deliveryId: notification.id,
                })
              : { ok: false, error: GONE, durationMs: 0 };
            attempted.push(notification);
            outcomes.push(outcome);
          }
        }),
      );
      await this.record(attempted, outcomes);
      // A full batch, or one cut short by the budget: more is due at once.
      if (due.length === BATCH || attempted.length < due.length) return this.clock.now();
    }
    // Deleted policies kept for their last messages go once those are settled (AlertService.delete).
    await purgeDeletedPolicies(db);
    const pending = await nextNotificationDue(db);
    return pending === null ? null : new Date(Math.max(Date.parse(pending), this.clock.nowMs()));
  }

  /** Sends one message now (a test, or an attempt of a notification). */
  send(
    target: Pick<Notification, 'channel' | 'target' | 'format'>,
    input: AlertMessageInput,
  ): Promise<SendOutcome> {
    if (target.channel === 'email') return this.sendEmail(target.target, input);
    return this.sendChat(target.target, (target.format ?? 'generic') as ChatFormat, input);
  }

  async sendEmail(to: string, input: AlertMessageInput): Promise<SendOutcome> {
    const started = performance.now();
    const done = (error: string | null): SendOutcome => ({
      ok: error === null,
      error,
      durationMs: Math.round(performance.now() - started),
    });
    const mailer = this.transporter();
    if (!mailer) return done('E-mail cannot be sent: NIMBUS_SMTP_URL is not set on this server');
    const message = emailMessage(input);
    try {
      const info = await mailer.sendMail({
        from: this.options.mail.from,
        to,
        subject: message.subject,
        text: message.text,
        html: message.html,
        messageId: `<${input.deliveryId}@nimbus>`,
        headers: {
          'X-Nimbus-Delivery': input.deliveryId,
          'X-Nimbus-Event': input.type,
          'X-Nimbus-Event-Id': input.eventId,
          ...(input.data.incident_id ? { 'X-Nimbus-Incident': input.data.incident_id } : {}),
        },
      });
      const refused = [...(info.rejected ?? [])].map(String);
      return done(refused.length > 0 ? `The relay refused ${refused.join(', ')}` : null);
    } catch (error) {
      return done(`SMTP: ${(error as Error).message}`);
    }
  }

  async sendChat(url: string, format: ChatFormat, input: AlertMessageInput): Promise<SendOutcome> {
    const timestamp = Math.floor(this.clock.nowMs() / 1000);
    const result = await this.sender.send('alert-chat', url, JSON.stringify(chatBody(format, input)), {
      'x-nimbus-event': input.type,
      'x-nimbus-delivery': input.deliveryId,
      'x-nimbus-timestamp': String(timestamp),
      'webhook-id': input.deliveryId,
      'webhook-timestamp': String(timestamp),
    });
    return { ok: result.error === null, error: result.error, durationMs: result.durationMs };
  }

  close(): void {
    this.mailer?.close();
    this.mailer = null;
  }

  private transporter(): Transporter | null {
    if (this.mailer) return this.mailer;
    const { url, caFile } = this.options.mail;
    if (url === null) return null;
    this.mailer = nodemailer.createTransport({
      url,
      pool: true,
      maxConnections: SMTP_CONNECTIONS,
      maxMessages: MESSAGES_PER_CONNECTION,
      connectionTimeout: SMTP_TIMEOUT_MS,
      greetingTimeout: SMTP_TIMEOUT_MS,
      socketTimeout: SMTP_TIMEOUT_MS,
      ...(caFile ? { tls: { ca: [readFileSync(caFile, 'utf8')] } } : {}),
    } as Parameters<typeof nodemailer.createTransport>[0]);
    return this.mailer;
  }

  /** Writes the attempts' outcomes, in one transaction: delivered, failed for good, or due again later. */
  private async record(
    notifications: readonly Notification[],
    outcomes: readonly SendOutcome[],
  ): Promise<void> {
    const now = this.clock.now();
    await this.store.db.transaction().execute(async (trx) => {
      for (const [i, notification] of notifications.entries()) {
        const outcome = outcomes[i] as SendOutcome;
        const attempts = notification.attempts + 1;
        const settled = outcome.ok || outcome.error === GONE || attempts >= MAX_DELIVERY_ATTEMPTS;
        const next = settled
          ? null
          : new Date(now.getTime() + retryDelayMs(attempts, this.options.retryBaseSeconds));
        await recordNotificationAttempt(trx, notification.id, {
          status: outcome.ok ? 'succeeded' : settled ? 'failed' : 'pending',
          attempts,
          next_attempt_at: next?.toISOString() ?? null,
          last_error: outcome.error,
          sent_at: outcome.ok ? now.toISOString() : null,
          updated_at: now.toISOString(),
        });
      }
    });
  }
}
