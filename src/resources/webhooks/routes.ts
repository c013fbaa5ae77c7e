import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { EventCatalogue } from '../../platform/events/catalog.js';
import { ok } from '../../platform/http/envelope.js';
import { resourceRoutes } from '../../platform/http/resource-routes.js';
import { described, withExample } from '../../platform/http/responses.js';
import { Envelope, IdParams, ListQuery, StringEnum, Timestamp } from '../../platform/http/schemas.js';
import { EventActor } from '../events/routes.js';
import { MAX_ROTATION_OVERLAP_SECONDS, MIN_SECRET_LENGTH } from './rules.js';
import type { WebhookService } from './service.js';
import { WebhookView, webhookViewFields } from './view.js';

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

const Webhook = WebhookView;

const WebhookWithSecret = Type.Object(
  {
    ...webhookViewFields,
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

const deliveryQuery = (catalogue: EventCatalogue) =>
  ListQuery(
    ['created_at'] as const,
    { sort: 'created_at' },
    {
      status: Type.Optional(StringEnum(['pending', 'succeeded', 'failed'] as const)),
      event_type: Type.Optional(StringEnum(catalogue.types)),
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
const deliveredTypes = (catalogue: EventCatalogue) =>
  Object.entries(catalogue.entries).map(([type, entry]) => ({
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

export const webhookRoutes: FastifyPluginAsyncTypebox<{
  webhooks: WebhookService;
  catalogue: EventCatalogue;
}> = async (app, { webhooks, catalogue }) => {
  const DeliveryQuery = deliveryQuery(catalogue);
  const DELIVERED_TYPES = deliveredTypes(catalogue);
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

  const route = resourceRoutes(app, {
    path: '/webhooks',
    tag: 'webhooks',
    permission: 'webhooks',
    view: Webhook,
  });

  route.create({
    summary: 'Create webhook subscription',
    description:
      'Subscribes an https URL to events. Each delivery is a POST of `{id, type, timestamp, data, signature}`, ' +
      'signed with the secret (docs/api.md, "Webhooks"). Without `secret`, one is generated and shown once.',
    body: withExample(NewWebhook, {
      url: 'https://hooks.example.com/nimbus',
      events: ['instance.*'],
      description: 'Instance changes to the deploy bot',
    }),
    status: 201,
    returns: WebhookWithSecret,
    answer: 'The subscription (with the secret when generated)',
    viewOfMade: (accountId, made) => webhooks.get(accountId, made.id),
    // A generated secret is shown once: never kept with an idempotent replay, never cached.
    config: { idempotencyOmit: ['secret'], carriesSecret: true },
    run: ({ accountId, body }) => webhooks.create(accountId, body),
  });

  route.list({
    summary: 'List webhook subscriptions',
    description: "The account's subscriptions, newest first. Secrets are never shown.",
    query: ListQuery(['created_at'] as const, { sort: 'created_at' }),
    answer: 'One page of subscriptions',
    run: ({ accountId, query }) => webhooks.list(accountId, query),
  });

  route.get({
    summary: 'Get webhook subscription',
    description: 'One subscription of the account.',
    answer: 'The subscription',
    errors: [404],
    run: ({ accountId, params }) => webhooks.get(accountId, params.id),
  });

  route.update({
    summary: 'Update webhook subscription',
    description:
      'Changes the URL, the events, the description or `enabled`. Enabling a subscription Nimbus disabled ' +
      'makes it active again. The secret changes only by rotation.',
    body: WebhookChanges,
    answer: 'The subscription as changed',
    errors: [404],
    run: ({ accountId, params, body }) => webhooks.update(accountId, params.id, body),
  });

  route.delete({
    summary: 'Delete webhook subscription',
    description: 'The subscription and its delivery log are removed; pending deliveries are not sent.',
    answer: 'The subscription as it was',
    errors: [404],
    run: ({ accountId, params }) => webhooks.delete(accountId, params.id),
  });

  route.action('rotate-secret', {
    summary: 'Rotate webhook secret',
    description:
      'Sets a new secret (given, or generated and shown once). For `overlap_seconds` (default one day) ' +
      'deliveries carry signatures by both secrets: comma-separated in X-Nimbus-Signature, space-separated ' +
      'in webhook-signature; the body field is signed with the new one.',
    body: Type.Union([Rotation, Type.Null()]),
    returns: WebhookWithSecret,
    answer: 'The subscription, with the new secret when generated',
    errors: [404],
    config: { idempotencyOmit: ['secret'], carriesSecret: true },
    run: ({ accountId, params, body }) => webhooks.rotateSecret(accountId, params.id, body ?? {}),
  });

  route.action('test', {
    summary: 'Send a test delivery',
    description:
      'Writes a `webhook.test` event for this subscription only and sends it at once; the answer is the ' +
      'delivery after that attempt. A failed test is retried like any delivery. `409` ' +
      '(`details.reason: "secret_unreadable"`) when the signing secret cannot be opened with the ' +
      "server's master key: nothing was sent; rotate the secret or ask the operator.",
    returns: Delivery,
    answer: 'The test delivery after its first attempt',
    errors: [404, 409],
    run: ({ accountId, params }) => webhooks.test(accountId, params.id),
  });

  route.list({
    path: '/:id/deliveries',
    summary: 'List deliveries',
    description:
      "The subscription's delivery log, newest first: each with its attempts, the last answer and the next attempt.",
    params: IdParams,
    query: DeliveryQuery,
    returns: Delivery,
    answer: 'One page of deliveries',
    errors: [404],
    run: ({ accountId, params, query: { status, event_type, ...page } }) =>
      webhooks.deliveries(accountId, params.id, { status, eventType: event_type }, page),
  });

  route.get({
    path: '/:id/deliveries/:delivery_id',
    summary: 'Get delivery',
    description: 'One delivery of the subscription.',
    params: DeliveryParams,
    returns: Delivery,
    answer: 'The delivery',
    errors: [404],
    run: ({ accountId, params }) => webhooks.delivery(accountId, params.id, params.delivery_id),
  });

  route.action('redeliver', {
    path: '/:id/deliveries/:delivery_id',
    summary: 'Redeliver',
    description:
      'Sends the same event to the subscription again as a new delivery (its `redelivery_of` names the ' +
      'original), due at once; the original stays in the log as it was.',
    params: DeliveryParams,
    status: 202,
    returns: Delivery,
    answer: 'The new delivery, pending',
    errors: [404],
    viewOfMade: (accountId, made, params) => webhooks.delivery(accountId, params.id ?? '', made.id),
    run: ({ accountId, params }) => webhooks.redeliver(accountId, params.id, params.delivery_id),
  });
};
