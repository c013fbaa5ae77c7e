/**
 * Sends alert notifications by e-mail and to chat, each a durable delivery retried like a webhook
 * delivery (DESIGN.md §4 "Webhooks": the retry base doubling, 12 attempts in all).
 *
 * How it works. Every e-mail or chat notification is a row (store/alerts.ts) written with its incident
 * transition, and a job of the job runner (`alert-notify:<id>`) written in the same transaction. The
 * runner leases the job, so one process sends an attempt at a time, and a process killed mid-attempt
 * leaves the lease to run out and the attempt to be made again by the next one: at-least-once, always
 * with the notification's id (`Message-ID: <dlv_…@nimbus>` and `X-Nimbus-Delivery` on e-mail,
 * `X-Nimbus-Delivery` and `webhook-id` on chat posts) so the receiver can drop a repeat. An attempt's
 * outcome is written guarded on the notification still being pending, then the job comes back at the next
 * retry time, or ends.
 *
 * - E-mail goes through the SMTP relay of NIMBUS_SMTP_URL with nodemailer (pooled connections), from
 *   NIMBUS_SMTP_FROM, as a text and an HTML part (domain/alert-messages.ts). Accepted by the relay is
 *   delivered; a refusal or no answer is a failed attempt.
 * - Chat is an HTTPS POST of Slack's, Discord's or a generic JSON body through the webhook sender, so the
 *   webhook SSRF rules (no loopback, private, link-local or metadata address, checked at connect time)
 *   and its 10 s limit hold; a 2xx is delivered.
 */
import { readFileSync } from 'node:fs';
import nodemailer, { type Transporter } from 'nodemailer';
import {
  type AlertEventData,
  type AlertMessageInput,
  chatBody,
  emailMessage,
} from '../domain/alert-messages.js';
import type { ChatFormat } from '../domain/alerts.js';
import type { Clock } from '../domain/clock.js';
import { MAX_DELIVERY_ATTEMPTS, retryDelayMs } from '../domain/webhooks.js';
import type { WebhookSender } from '../events/webhook-sender.js';
import type { JobRunner } from '../jobs/runner.js';
import { findNotification, type Notification, recordNotificationAttempt } from '../store/alerts.js';
import type { Store } from '../store/db.js';
import { findEventById } from '../store/events.js';
import { NOTIFY_JOB } from './alert-incidents.js';

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

/** No answer from the relay within this long fails the attempt (under the job lease of 30 s). */
const SMTP_TIMEOUT_MS = 10_000;

export class AlertNotifier {
  private mailer: Transporter | null = null;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    jobs: JobRunner,
    private readonly sender: WebhookSender,
    private readonly options: NotifierOptions,
  ) {
    jobs.register(NOTIFY_JOB, {
      run: (id) => this.run(id),
      // The handler records its own failures and never throws; a job that still fails ten times (the
      // store unreachable) leaves the notification pending for `admin` to see rather than lose it.
      giveUp: async () => {},
    });
  }

  /** Whether e-mail can be sent: NIMBUS_SMTP_URL is set. */
  get mailConfigured(): boolean {
    return this.options.mail.url !== null;
  }

  /** One attempt of a notification, if it is due; returns when to come back (null: settled). */
  async run(id: string): Promise<Date | null> {
    const notification = await findNotification(this.store.db, id);
    if (notification?.status !== 'pending') return null;
    const due = notification.next_attempt_at ? Date.parse(notification.next_attempt_at) : 0;
    if (due > this.clock.nowMs()) return new Date(due);
    const event = await findEventById(this.store.db, notification.event_id);
    const outcome = event
      ? await this.send(notification, {
          type: event.type as AlertMessageInput['type'],
          eventId: event.id,
          timestamp: event.created_at,
          data: event.data as unknown as AlertEventData,
          deliveryId: notification.id,
        })
      : { ok: false, error: 'The event of this notification is gone', durationMs: 0 };
    return this.record(notification, outcome, event === undefined);
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
      maxConnections: 4,
      connectionTimeout: SMTP_TIMEOUT_MS,
      greetingTimeout: SMTP_TIMEOUT_MS,
      socketTimeout: SMTP_TIMEOUT_MS,
      ...(caFile ? { tls: { ca: [readFileSync(caFile, 'utf8')] } } : {}),
    } as Parameters<typeof nodemailer.createTransport>[0]);
    return this.mailer;
  }

  /** Writes the attempt's outcome; returns when to try again (null: delivered, or out of attempts). */
  private async record(
    notification: Notification,
    outcome: SendOutcome,
    hopeless: boolean,
  ): Promise<Date | null> {
    const now = this.clock.now();
    const attempts = notification.attempts + 1;
    const settled = outcome.ok || hopeless || attempts >= MAX_DELIVERY_ATTEMPTS;
    const next = settled
      ? null
      : new Date(now.getTime() + retryDelayMs(attempts, this.options.retryBaseSeconds));
    await recordNotificationAttempt(this.store.db, notification.id, {
      status: outcome.ok ? 'succeeded' : settled ? 'failed' : 'pending',
      attempts,
      next_attempt_at: next?.toISOString() ?? null,
      last_error: outcome.error,
      sent_at: outcome.ok ? now.toISOString() : null,
      updated_at: now.toISOString(),
    });
    return next;
  }
}
