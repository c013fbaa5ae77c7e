/**
 * The transactional outbox: every state change writes its event row in the same transaction, so an
 * event exists exactly when its change committed. Webhook delivery, WebSocket pushes and billing meters
 * read the events table; none of them depends on an in-memory callback. Types and their data come from
 * the catalogue (domain/event-catalog.ts).
 */
import type { Clock } from '../domain/clock.js';
import type { EventData, EventType } from '../domain/event-catalog.js';
import { newId } from '../domain/ids.js';
import { insertEvent } from '../store/events.js';
import type { Executor } from '../store/schema.js';

export interface EventInput<T extends EventType> {
  accountId: string;
  type: T;
  resourceId: string;
  data: EventData<T>;
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
  return id;
}
