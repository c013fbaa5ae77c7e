/**
 * How a webhook subscription looks to users: the record's fields less its account and secrets, and
 * `previous_secret_expires_at` computed from the rotation in progress (docs/api.md, Webhooks).
 */
import { type Static, Type } from '@sinclair/typebox';
import { Timestamp } from '../../platform/http/schemas.js';
import { WebhookRecord } from './record.js';

const shown = Type.Pick(WebhookRecord, [
  'id',
  'url',
  'events',
  'description',
  'enabled',
  'status',
  'disabled_reason',
]).properties;
const stamps = Type.Pick(WebhookRecord, ['created_at', 'updated_at']).properties;

export const webhookViewFields = {
  ...shown,
  previous_secret_expires_at: Type.Union([Timestamp, Type.Null()], {
    description: 'After a rotation: until when the previous secret still signs, beside the new one',
  }),
  ...stamps,
};
export const WebhookView = Type.Object(webhookViewFields, { $id: 'Webhook', title: 'Webhook' });
export type WebhookView = Static<typeof WebhookView>;
