/**
 * The transactional outbox: every state change writes its event row in the same transaction, so an
 * event exists exactly when its change committed. Webhook delivery, WebSocket pushes and billing meters
 * read the events table; none of them depends on an in-memory callback. Types and their data come from
 * the catalogue (platform/events/catalog.ts).
 *
 * Webhook fan-out happens here too: one pending delivery per live subscription of the account whose
 * `events` match, in the same transaction. So a delivery exists exactly when its event does — no
 * dispatcher position to keep, and none to lose when transactions commit out of order — and the
 * delivery worker (resources/webhooks/delivery-worker.ts) only has to send what is due.
 *
 * Each event names its actor, the one the work runs for (platform/events/actor.ts): callers never pass it.
 */

import { matchesEvent } from '../../resources/webhooks/rules.js';
import { insertDeliveries, liveSubscriptions, pendingDelivery } from '../../resources/webhooks/store.js';
import type { Clock } from '../domain/clock.js';
import { newId } from '../domain/ids.js';
import type { Executor } from '../store/schema.js';
import { currentActor } from './actor.js';
import type { EventData, EventType } from './catalog.js';
import { insertEvent } from './store.js';

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
    actor: currentActor(),
  });
  const subscribers =
    event.deliverTo ??
    (await liveSubscriptions(trx, event.accountId))
      .filter((subscription) => matchesEvent(subscription.events, event.type))
      .map((subscription) => subscription.id);
  const at = now.toISOString();
  await insertDeliveries(
    trx,
    subscribers.map((webhookId) =>
      pendingDelivery({
        id: newId('delivery', now),
        webhookId,
        accountId: event.accountId,
        eventId: id,
        eventType: event.type,
        at,
      }),
    ),
  );
  return id;
}
