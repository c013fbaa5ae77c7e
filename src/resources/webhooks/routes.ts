import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { EVENT_CATALOG, EVENT_TYPES } from '../../platform/events/catalog.js';
import { ok, okList } from '../../platform/http/envelope.js';
import { principalOf } from '../../platform/http/plugins/guard.js';
import { described, errorResponses, withExample } from '../../platform/http/responses.js';
import {
  Envelope,
  IdParams,
  ListEnvelope,
  ListQuery,
  StringEnum,
  Timestamp,
} from '../../platform/http/schemas.js';
import { EventActor } from '../events/routes.js';
import { MAX_ROTATION_OVERLAP_SECONDS, MIN_SECRET_LENGTH } from './rules.js';
import type { WebhookService } from './service.js';

const EventPatterns = Type.Array(Type.String({ minLength: 1, maxLength: 100 }), {
  minItems: 1,
  maxItems: 50,
  description: 'Event types (`instance.created`), families (`instance.*`) or `*` for every event',
});

const Url = Type.String({
  minLength: 1,
  maxLength: 2048,
  description:
    'An https:// URL without credentials, whose host is not on a loopback, private, link-local or metadata address',
});

const Secret = Type.String({
  minLength: MIN_SECRET_LENGTH,
  maxLength: 256,
  description: `At least ${MIN_SECRET_LENGTH} printable ASCII characters; generated (and shown once) when omitted`,
});

const Description = Type.String({ maxLength: 500, description: 'What the subscription is for' });

const webhookFields = {
  id: Type.String(),
  url: Type.String(),
  events: Type.Array(Type.String()),
  description: Type.Union([Type.String(), Type.Null()]),
  enabled: Type.Boolean({ description: 'Set by you: a disabled subscription gets no deliveries' }),
  status: StringEnum(['active', 'disabled'] as const, {
    description:
      '`disabled` when Nimbus turned deliveries off (see `disabled_reason`); enabling it again restarts it',
  }),
  disabled_reason: Type.Union([Type.String(), Type.Null()]),
  previous_secret_expires_at: Type.Union([Timestamp, Type.Null()], {
    description: 'After a rotation: until when the previous secret still signs, beside the new one',
  }),
  created_at: Timestamp,
  updated_at: Timestamp,
};

const Webhook = Type.Object(webhookFields, { $id: 'Webhook', title: 'Webhook' });

const WebhookWithSecret = Type.Object(
  {
    ...webhookFields,
    secret: Type.Optional(
      Type.String({ description: 'The signing secret, shown this once, when Nimbus generated it' }),
    ),
  },
  { $id: 'WebhookWithSecret', title: 'WebhookWithSecret' },
);

const Delivery = Type.Object(
  {
    id: Type.String({
      description: 'Also sent as X-Nimbus-Delivery and webhook-id; the same on every retry',
    }),
    webhook_id: Type.String(),
    event_id: Type.String(),
    event_type: Type.String(),
    status: StringEnum(['pending', 'succeeded', 'failed'] as const),
    attempts: Type.Integer(),
    last_status_code: Type.Union([Type.Integer(), Type.Null()]),
    last_error: Type.Union([Type.String(), Type.Null()]),
    response_excerpt: Type.Union([Type.String(), Type.Null()], {
      description: 'The start of the receiver’s last answer',
    }),
    duration_ms: Type.Union([Type.Integer(), Type.Null()]),
    next_attempt_at: Type.Union([Timestamp, Type.Null()]),
    redelivery_of: Type.Union([Type.String(), Type.Null()]),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: 'WebhookDelivery', title: 'WebhookDelivery' },
);

const NewWebhook = Type.Object(
  {
    url: Url,
    events: EventPatterns,
    secret: Type.Optional(Secret),
    description: Type.Optional(Description),
    enabled: Type.Optional(Type.Boolean({ default: true })),
  },
  { title: 'NewWebhook', additionalProperties: false },
);

const WebhookChanges = Type.Object(
  {
    url: Type.Optional(Url),
    events: Type.Optional(EventPatterns),
    description: Type.Optional(Type.Union([Description, Type.Null()])),
    enabled: Type.Optional(Type.Boolean()),
  },
  { title: 'WebhookUpdate', additionalProperties: false, minProperties: 1 },
);

const Rotation = Type.Object(
  {
    secret: Type.Optional(Secret),
    overlap_seconds: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: MAX_ROTATION_OVERLAP_SECONDS,
        description: 'How long the previous secret keeps signing beside the new one (default 86400)',
      }),
    ),
  },
  { title: 'WebhookSecretRotationRequest', additionalProperties: false },
);

const DeliveryParams = Type.Object({
  id: Type.String({ minLength: 1, maxLength: 64 }),
  delivery_id: Type.String({ minLength: 1, maxLength: 64 }),
});

const DeliveryQuery = ListQuery(
  ['created_at'] as const,
  { sort: 'created_at' },
  {
    status: Type.Optional(StringEnum(['pending', 'succeeded', 'failed'] as const)),
    event_type: Type.Optional(StringEnum(EVENT_TYPES)),
  },
);

const EventTypeInfo = Type.Object(
  { type: Type.String(), description: Type.String(), data: Type.Object({}, { additionalProperties: true }) },
  { $id: 'EventType', title: 'EventType' },
);

/**
 * Each type's `data` schema as deliveries carry it: with the `actor` a delivery puts in `data`
 * (resources/webhooks/rules.ts `deliveryBody`), so a receiver validating against the catalogue accepts it.
 */
const DELIVERED_TYPES = Object.entries(EVENT_CATALOG).map(([type, entry]) => ({
  type,
  description: entry.description,
  data: {
    ...entry.data,
    properties: {
      ...entry.data.properties,
      actor: {
        ...EventActor,
        description: `Webhook deliveries: ${EventActor.description} (\`GET /v1/events\` has it beside \`data\`)`,
      },
    },
  },
}));

export const webhookRoutes: FastifyPluginAsyncTypebox<{ webhooks: WebhookService }> = async (
  app,
  { webhooks },
) => {
  const read = { permission: ['webhooks', 'read'] as const };
  const write = { permission: ['webhooks', 'write'] as const };

  app.get(
    '/events/types',
    {
      schema: {
        tags: ['events'],
        summary: 'List event types',
        description:
          'The event catalogue: every type Nimbus writes, what it means, and the JSON Schema of its `data`. ' +
          'Webhook subscriptions and event filters take these names.',
        response: { 200: described(Envelope(Type.Array(EventTypeInfo)), 'Every event type') },
      },
      config: { permission: ['account', 'read'] },
    },
    async (request) => ok(request, DELIVERED_TYPES),
  );

  app.post(
    '/webhooks',
    {
      schema: {
        tags: ['webhooks'],
        summary: 'Create webhook subscription',
        description:
          'Subscribes an https URL to events. Each delivery is a POST of `{id, type, timestamp, data, signature}`, ' +
          'signed with the secret (docs/api.md, "Webhooks"). Without `secret`, one is generated and shown once.',
        body: withExample(NewWebhook, {
          url: 'https://hooks.example.com/nimbus',
          events: ['instance.*'],
          description: 'Instance changes to the deploy bot',
        }),
        response: {
          201: described(Envelope(WebhookWithSecret), 'The subscription (with the secret when generated)'),
        },
      },
      // A generated secret is shown once: never kept with an idempotent replay, never cached.
      config: {
        ...write,
        idempotencyOmit: ['secret'],
        carriesSecret: true,
        idempotentCreate: { status: 201, view: (accountId, made) => webhooks.get(accountId, made.id) },
      },
    },
    async (request, reply) => {
      const created = await webhooks.create(principalOf(request).accountId, request.body);
      return reply.code(201).send(ok(request, created));
    },
  );

  app.get(
    '/webhooks',
    {
      schema: {
        tags: ['webhooks'],
        summary: 'List webhook subscriptions',
        description: "The account's subscriptions, newest first. Secrets are never shown.",
        querystring: ListQuery(['created_at'] as const, { sort: 'created_at' }),
        response: { 200: described(ListEnvelope(Webhook), 'One page of subscriptions') },
      },
      config: read,
    },
    async (request) => okList(request, await webhooks.list(principalOf(request).accountId, request.query)),
  );

  app.get(
    '/webhooks/:id',
    {
      schema: {
        tags: ['webhooks'],
        summary: 'Get webhook subscription',
        description: 'One subscription of the account.',
        params: IdParams,
        response: { 200: described(Envelope(Webhook), 'The subscription'), ...errorResponses(404) },
      },
      config: read,
    },
    async (request) => ok(request, await webhooks.get(principalOf(request).accountId, request.params.id)),
  );

  app.patch(
    '/webhooks/:id',
    {
      schema: {
        tags: ['webhooks'],
        summary: 'Update webhook subscription',
        description:
          'Changes the URL, the events, the description or `enabled`. Enabling a subscription Nimbus disabled ' +
          'makes it active again. The secret changes only by rotation.',
        params: IdParams,
        body: WebhookChanges,
        response: {
          200: described(Envelope(Webhook), 'The subscription as changed'),
          ...errorResponses(404),
        },
      },
      config: write,
    },
    async (request) =>
      ok(request, await webhooks.update(principalOf(request).accountId, request.params.id, request.body)),
  );

  app.delete(
    '/webhooks/:id',
    {
      schema: {
        tags: ['webhooks'],
        summary: 'Delete webhook subscription',
        description: 'The subscription and its delivery log are removed; pending deliveries are not sent.',
        params: IdParams,
        response: { 200: described(Envelope(Webhook), 'The subscription as it was'), ...errorResponses(404) },
      },
      config: write,
    },
    async (request) => ok(request, await webhooks.delete(principalOf(request).accountId, request.params.id)),
  );

  app.post(
    '/webhooks/:id/rotate-secret',
    {
      schema: {
        tags: ['webhooks'],
        summary: 'Rotate webhook secret',
        description:
          'Sets a new secret (given, or generated and shown once). For `overlap_seconds` (default one day) ' +
          'deliveries carry signatures by both secrets: comma-separated in X-Nimbus-Signature, space-separated ' +
          'in webhook-signature; the body field is signed with the new one.',
        params: IdParams,
        body: Type.Union([Rotation, Type.Null()]),
        response: {
          200: described(Envelope(WebhookWithSecret), 'The subscription, with the new secret when generated'),
          ...errorResponses(404),
        },
      },
      config: { ...write, idempotencyOmit: ['secret'], carriesSecret: true },
    },
    async (request) =>
      ok(
        request,
        await webhooks.rotateSecret(principalOf(request).accountId, request.params.id, request.body ?? {}),
      ),
  );

  app.post(
    '/webhooks/:id/test',
    {
      schema: {
        tags: ['webhooks'],
        summary: 'Send a test delivery',
        description:
          'Writes a `webhook.test` event for this subscription only and sends it at once; the answer is the ' +
          'delivery after that attempt. A failed test is retried like any delivery. `409` ' +
          '(`details.reason: "secret_unreadable"`) when the signing secret cannot be opened with the ' +
          "server's master key: nothing was sent; rotate the secret or ask the operator.",
        params: IdParams,
        response: {
          200: described(Envelope(Delivery), 'The test delivery after its first attempt'),
          ...errorResponses(404, 409),
        },
      },
      config: write,
    },
    async (request) => ok(request, await webhooks.test(principalOf(request).accountId, request.params.id)),
  );

  app.get(
    '/webhooks/:id/deliveries',
    {
      schema: {
        tags: ['webhooks'],
        summary: 'List deliveries',
        description:
          "The subscription's delivery log, newest first: each with its attempts, the last answer and the next attempt.",
        params: IdParams,
        querystring: DeliveryQuery,
        response: {
          200: described(ListEnvelope(Delivery), 'One page of deliveries'),
          ...errorResponses(404),
        },
      },
      config: read,
    },
    async (request) => {
      const { status, event_type, ...page } = request.query;
      return okList(
        request,
        await webhooks.deliveries(
          principalOf(request).accountId,
          request.params.id,
          { status, eventType: event_type },
          page,
        ),
      );
    },
  );

  app.get(
    '/webhooks/:id/deliveries/:delivery_id',
    {
      schema: {
        tags: ['webhooks'],
        summary: 'Get delivery',
        description: 'One delivery of the subscription.',
        params: DeliveryParams,
        response: { 200: described(Envelope(Delivery), 'The delivery'), ...errorResponses(404) },
      },
      config: read,
    },
    async (request) =>
      ok(
        request,
        await webhooks.delivery(
          principalOf(request).accountId,
          request.params.id,
          request.params.delivery_id,
        ),
      ),
  );

  app.post(
    '/webhooks/:id/deliveries/:delivery_id/redeliver',
    {
      schema: {
        tags: ['webhooks'],
        summary: 'Redeliver',
        description:
          'Sends the same event to the subscription again as a new delivery (its `redelivery_of` names the ' +
          'original), due at once; the original stays in the log as it was.',
        params: DeliveryParams,
        response: { 202: described(Envelope(Delivery), 'The new delivery, pending'), ...errorResponses(404) },
      },
      config: {
        ...write,
        idempotentCreate: {
          status: 202,
          view: (accountId, made, params) => webhooks.delivery(accountId, params.id ?? '', made.id),
        },
      },
    },
    async (request, reply) => {
      const copy = await webhooks.redeliver(
        principalOf(request).accountId,
        request.params.id,
        request.params.delivery_id,
      );
      return reply.code(202).send(ok(request, copy));
    },
  );
};
