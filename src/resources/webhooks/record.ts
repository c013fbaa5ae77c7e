/**
 * The webhook subscription record: the one declaration of its fields, as the services see them (the
 * store's row decoded: store.ts). The API view (view.ts: the fields users see, in the API's order) and
 * the data of its events (events.ts) are derived from it, with its descriptions.
 */
import { type Static, Type } from '@sinclair/typebox';
import { StringEnum, Timestamp } from '../../platform/http/schemas.js';

export const WEBHOOK_STATUSES = ['active', 'disabled'] as const;
export type WebhookStatus = (typeof WEBHOOK_STATUSES)[number];

export const WebhookRecord = Type.Object({
  id: Type.String(),
  account_id: Type.String(),
  url: Type.String(),
  events: Type.Array(Type.String()),
  /** Sealed (platform/secret-box.ts). */
  secret: Type.String(),
  previous_secret: Type.Union([Type.String(), Type.Null()]),
  previous_secret_until: Type.Union([Timestamp, Type.Null()]),
  description: Type.Union([Type.String(), Type.Null()]),
  enabled: Type.Boolean({ description: 'Set by you: a disabled subscription gets no deliveries' }),
  status: StringEnum(WEBHOOK_STATUSES, {
    description:
      '`disabled` when Nimbus turned deliveries off (see `disabled_reason`); enabling it again restarts it',
  }),
  disabled_reason: Type.Union([Type.String(), Type.Null()]),
  failing_since: Type.Union([Timestamp, Type.Null()]),
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type Webhook = Static<typeof WebhookRecord>;
