/**
 * The transactional outbox: every state change writes its event row in the same transaction, so an
 * event exists exactly when its change committed. Webhook delivery, WebSocket pushes and billing meters
 * read the events table; none of them depends on an in-memory callback. Types and their data come from
 * the catalogue (domain/event-catalog.ts).
 *
 * Webhook fan-out happens here too: one pending delivery per live subscription of the account whose
 * `events` match, in the same transaction. So a delivery exists exactly when its event does — no
 * dispatcher position to keep, and none to lose when transactions commit out of order — and the
 * delivery worker (services/webhook-delivery.ts) only has to send what is due.
 */
import type { Clock } from '../domain/clock.js';
import type { EventData, EventType } from '../domain/event-catalog.js';
import { newId } from '../domain/ids.js';
import { matchesEvent } from '../domain/webhooks.js';
import { insertEvent } from '../store/events.js';
import type { Executor } from '../store/schema.js';
import { insertDeliveries, liveSubscriptions } from '../store/webhooks.js';

export interface EventInput<T extends EventType> {
  accountId: string;
  type: T;
  resourceId: string;
  data: EventData<T>;
  /** Deliver to these subscriptions only (a test delivery), instead of every matching one. */
  deliverTo?: readonly string[];
}

export async function recordEvent<T extends EventType>(
  trx: Executor,
  clock: Clock,
  event: EventInput<T>,
): Promise<string> {
  const now = clock.now();
  const id = newId('event', now);
  await insertEvent(trx, {
    id,
    account_id: event.accountId,
    type: event.type,
    resource_id: event.resourceId,
    data: event.data,
    created_at: now.toISOString(),
  });
  const subscribers =
    event.deliverTo ??
    (await liveSubscriptions(trx, event.accountId))
      .filter((subscription) => matchesEvent(subscription.events, event.type))
      .map((subscription) => subscription.id);
  const at = now.toISOString();
  await insertDeliveries(
    trx,
    subscribers.map((webhookId) => ({
      id: newId('delivery', now),
      webhook_id: webhookId,
      account_id: event.accountId,
      event_id: id,
      event_type: event.type,
      status: 'pending',
      attempts: 0,
      next_attempt_at: at,
      lease_owner: null,
      lease_until: null,
      last_status_code: null,
      last_error: null,
      response_excerpt: null,
      duration_ms: null,
      redelivery_of: null,
      created_at: at,
      updated_at: at,
    })),
  );
  return id;
}
