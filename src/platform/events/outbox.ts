/**
 * The transactional outbox: every state change writes its event row in the same transaction, so an
 * event exists exactly when its change committed. Webhook delivery, WebSocket pushes and billing meters
 * read the events table; none of them depends on an in-memory callback. Types and their data come from
 * the catalogue (platform/events/catalog.ts).
 *
 * What must exist exactly when its event does is written by the outbox's subscribers, in the same
 * transaction, after the event's row: the composition root subscribes the webhooks resource's fan-out
 * (resources/webhooks/fan-out.ts), so a pending delivery commits with its event or not at all.
 *
 * Each event names its actor, the one the work runs for (platform/events/actor.ts): callers never pass it.
 */

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
  /** Deliver to these webhook subscriptions only (a test delivery), instead of every matching one. */
  deliverTo?: readonly string[];
}

/** An event as the outbox wrote it, for its subscribers. */
export interface RecordedEvent<T extends EventType = EventType> extends EventInput<T> {
  id: string;
  recordedAt: Date;
}

/** Writes, in the transaction that records an event, what must commit with it (see above). */
export type EventSubscriber = (trx: Executor, event: RecordedEvent) => Promise<void>;

/** Process-wide, as the event catalogue is: every store this process opens records its events here. */
const subscribers = new Set<EventSubscriber>();

/**
 * Adds a subscriber for every event recorded from now on; adding one already there changes nothing, so a
 * process that composes the services twice (tests, replicas in one process) still writes each once.
 */
export function subscribeToEvents(subscriber: EventSubscriber): void {
  subscribers.add(subscriber);
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
  for (const subscriber of subscribers) await subscriber(trx, { ...event, id, recordedAt: now });
  return id;
}
