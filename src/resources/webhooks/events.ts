/**
 * Webhook events: their types and the shape of their data, added to the platform's catalogue
 * (platform/events/catalog.ts). They carry none of the record's fields (record.ts) but the id: `reason`
 * is what `disabled_reason` was set to, which is never null when the event is written.
 */
import { Type } from '@sinclair/typebox';
import { entry } from '../../platform/events/catalog.js';

const WebhookEvent = Type.Object({
  webhook_id: Type.String({ description: 'The webhook subscription' }),
  reason: Type.Optional(Type.String({ description: 'webhook.disabled: why' })),
});

export const WEBHOOK_EVENTS = {
  'webhook.test': entry('A test delivery asked for by the user', WebhookEvent),
  'webhook.disabled': entry('A webhook subscription was disabled', WebhookEvent),
};

type WebhookEvents = typeof WEBHOOK_EVENTS;
declare module '../../platform/events/catalog.js' {
  interface EventCatalog extends WebhookEvents {}
}
