/**
 * Webhook fan-out, an outbox subscriber (platform/events/outbox.ts) the composition root registers: one
 * pending delivery per live subscription of the account whose `events` match, written in the transaction
 * that records the event. So a delivery exists exactly when its event does — no dispatcher position to
 * keep, and none to lose when transactions commit out of order — and the delivery worker
 * (delivery-worker.ts) only has to send what is due.
 */
import { newId } from '../../platform/domain/ids.js';
import type { RecordedEvent } from '../../platform/events/outbox.js';
import type { Executor } from '../../platform/store/schema.js';
import { matchesEvent } from './rules.js';
import { insertDeliveries, liveSubscriptions, pendingDelivery } from './store.js';

export async function fanOutToWebhooks(trx: Executor, event: RecordedEvent): Promise<void> {
  const subscribers =
    event.deliverTo ??
    (await liveSubscriptions(trx, event.accountId))
      .filter((subscription) => matchesEvent(subscription.events, event.type))
      .map((subscription) => subscription.id);
  const at = event.recordedAt.toISOString();
  await insertDeliveries(
    trx,
    subscribers.map((webhookId) =>
      pendingDelivery({
        id: newId('delivery', event.recordedAt),
        webhookId,
        accountId: event.accountId,
        eventId: event.id,
        eventType: event.type,
        at,
      }),
    ),
  );
}
