import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { TAG_VALUE_MAX_LENGTH } from '../../platform/domain/labels.js';
import { MAX_EMAIL_LENGTH } from '../../platform/domain/validation.js';
import { resourceRoutes } from '../../platform/http/resource-routes.js';
import { withExample } from '../../platform/http/responses.js';
import { IdParams, ListQuery, StringEnum, Timestamp } from '../../platform/http/schemas.js';
import { AlertIncidentRecord, AlertPolicyRecord, Compare, Metric, State, Window } from './record.js';
import {
  CHANNEL_KINDS,
  CHAT_FORMATS,
  INCIDENT_STATUSES,
  MAX_CHAT_CHANNELS,
  MAX_DESCRIPTION_LENGTH,
  MAX_EMAILS,
  MAX_TARGET_INSTANCES,
  MAX_TARGET_TAGS,
  MAX_WEBHOOK_CHANNELS,
  NOTIFICATION_STATUSES,
} from './rules.js';
import type { AlertService } from './service.js';

const nullable = <T extends ReturnType<typeof Type.String> | ReturnType<typeof StringEnum>>(schema: T) =>
  Type.Union([schema, Type.Null()]);

const Threshold = Type.Number({
  description: 'In the metric’s unit: percentages 0–100, rates (bytes per second) 0 or more',
});
const Targets = Type.Object(
  {
    instance_ids: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 64 }), {
        maxItems: MAX_TARGET_INSTANCES,
        description: 'Instances of the account, by id',
      }),
    ),
    tags: Type.Optional(
      Type.Record(
        Type.String({ minLength: 1, maxLength: 128 }),
        Type.String({ maxLength: TAG_VALUE_MAX_LENGTH }),
        {
          maxProperties: MAX_TARGET_TAGS,
          description: 'Instances carrying every one of these tags',
        },
      ),
    ),
  },
  {
    additionalProperties: false,
    description:
      'Listed instances, and those with every tag given; neither given: every instance of the account',
  },
);

const ChatChannel = Type.Object(
  {
    url: Type.String({
      minLength: 1,
      maxLength: 2048,
      description:
        'An https:// URL (a Slack or Discord incoming webhook, or any receiver of JSON) whose host is not on a ' +
        'loopback, private, link-local or metadata address',
    }),
    format: StringEnum(CHAT_FORMATS, {
      description: 'slack: text plus blocks; discord: content plus embeds; generic: the alert event as JSON',
    }),
  },
  { additionalProperties: false },
);

const Channels = Type.Object(
  {
    email: Type.Optional(
      Type.Array(Type.String({ minLength: 3, maxLength: MAX_EMAIL_LENGTH }), {
        maxItems: MAX_EMAILS,
        description: 'Addresses sent a message each way (needs NIMBUS_SMTP_URL on the server)',
      }),
    ),
    webhook_ids: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 64 }), {
        maxItems: MAX_WEBHOOK_CHANNELS,
        description:
          'Webhook subscriptions of the account that get the alert.firing and alert.resolved events',
      }),
    ),
    chat: Type.Optional(Type.Array(ChatChannel, { maxItems: MAX_CHAT_CHANNELS })),
  },
  {
    additionalProperties: false,
    description: 'At least one e-mail address, webhook subscription or chat URL',
  },
);

const Name = Type.String({ minLength: 1, maxLength: 100, description: 'What the policy is called' });
const Description = Type.String({ maxLength: MAX_DESCRIPTION_LENGTH });

/** What the API shows of a policy: its record, less the account it belongs to. */
const Policy = Type.Object(Type.Omit(AlertPolicyRecord, ['account_id']).properties, {
  $id: 'AlertPolicy',
  title: 'AlertPolicy',
});

const Notification = Type.Object(
  {
    id: Type.String({
      description: 'The delivery id (`dlv_…`), sent with every attempt so repeats can be dropped',
    }),
    transition: StringEnum(['firing', 'resolved'] as const),
    channel: StringEnum(CHANNEL_KINDS),
    target: Type.String({ description: 'The address, the webhook id or the chat URL' }),
    status: StringEnum(NOTIFICATION_STATUSES),
    attempts: Type.Integer(),
    last_error: Type.Union([Type.String(), Type.Null()]),
    created_at: Timestamp,
  },
  { $id: 'AlertNotification', title: 'AlertNotification' },
);

/** What the API shows of an incident: its record less what stays in the server, with its notifications. */
const Incident = Type.Object(
  {
    ...Type.Omit(AlertIncidentRecord, ['account_id', 'created_at', 'updated_at']).properties,
    notifications: Type.Array(Notification, {
      description: 'One per channel target per transition (firing, then resolved), oldest first',
    }),
  },
  { $id: 'AlertIncident', title: 'AlertIncident' },
);

const TestResult = Type.Object(
  {
    alert_id: Type.String(),
    results: Type.Array(
      Type.Object({
        channel: StringEnum(CHANNEL_KINDS),
        target: Type.String(),
        status: StringEnum(['succeeded', 'failed'] as const),
        error: Type.Union([Type.String(), Type.Null()]),
        duration_ms: Type.Integer(),
        delivery_id: Type.String(),
      }),
    ),
  },
  { $id: 'AlertTestResult', title: 'AlertTestResult' },
);

const NewPolicy = Type.Object(
  {
    name: Name,
    description: Type.Optional(Description),
    metric: Type.Optional(Metric),
    compare: Type.Optional(Compare),
    threshold: Type.Optional(Threshold),
    window: Type.Optional(Window),
    state: Type.Optional(State),
    targets: Type.Optional(Targets),
    channels: Channels,
    enabled: Type.Optional(Type.Boolean({ default: true })),
  },
  { title: 'NewAlertPolicy', additionalProperties: false },
);

const PolicyChanges = Type.Object(
  {
    name: Type.Optional(Name),
    description: Type.Optional(nullable(Description)),
    metric: Type.Optional(nullable(Metric)),
    compare: Type.Optional(nullable(Compare)),
    threshold: Type.Optional(Type.Union([Threshold, Type.Null()])),
    window: Type.Optional(nullable(Window)),
    state: Type.Optional(nullable(State)),
    targets: Type.Optional(Targets),
    channels: Type.Optional(Channels),
    enabled: Type.Optional(Type.Boolean()),
  },
  { title: 'AlertPolicyUpdate', additionalProperties: false, minProperties: 1 },
);

const IncidentFilters = {
  status: Type.Optional(StringEnum(INCIDENT_STATUSES)),
  instance_id: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
};
const IncidentQuery = ListQuery(['started_at'] as const, { sort: 'started_at' }, IncidentFilters);

export const alertRoutes: FastifyPluginAsyncTypebox<{ alerts: AlertService }> = async (app, { alerts }) => {
  const route = resourceRoutes(app, {
    path: '/alerts',
    tag: 'monitoring',
    permission: 'monitoring',
    view: Policy,
  });

  route.create({
    summary: 'Create alert policy',
    description:
      'A metric threshold (`metric`, `compare`, `threshold`, `window`: the window average past the threshold ' +
      'fires; a whole window back on the good side resolves) or a state (`error`, or `stuck` with a `window`), ' +
      'for the instances of `targets`, notifying `channels` when an incident opens and when it resolves ' +
      '(docs/api.md, "Alerts"). Another account’s instance or webhook id is a 404 naming the field; an ' +
      'e-mail channel on a server without NIMBUS_SMTP_URL is a 400.',
    body: withExample(NewPolicy, {
      name: 'High CPU on prod',
      metric: 'cpu_percent',
      compare: 'above',
      threshold: 80,
      window: '5m',
      targets: { tags: { env: 'prod' } },
      // E-mail only: a chat URL in the example would have to resolve wherever the example is tried.
      channels: { email: ['oncall@example.com'] },
    }),
    status: 201,
    answer: 'The policy',
    errors: [404],
    viewOfMade: (accountId, made) => alerts.get(accountId, made.id),
    run: ({ accountId, body }) => alerts.create(accountId, body),
  });

  route.list({
    summary: 'List alert policies',
    description: "The account's alert policies, newest first.",
    query: ListQuery(
      ['created_at', 'name'] as const,
      { sort: 'created_at' },
      { enabled: Type.Optional(Type.Boolean()) },
    ),
    answer: 'One page of policies',
    run: ({ accountId, query: { enabled, ...page } }) => alerts.list(accountId, { enabled }, page),
  });

  route.list({
    path: '/incidents',
    summary: 'List incidents',
    description:
      "The account's incidents across its policies, newest first, each with its notifications; `status` " +
      'picks the firing or the resolved ones.',
    query: IncidentQuery,
    returns: Incident,
    answer: 'One page of incidents',
    run: ({ accountId, query: { status, instance_id, ...page } }) =>
      alerts.listIncidents(accountId, { status, instanceId: instance_id }, page),
  });

  route.get({
    summary: 'Get alert policy',
    description: 'One alert policy of the account.',
    answer: 'The policy',
    errors: [404],
    run: ({ accountId, params }) => alerts.get(accountId, params.id),
  });

  route.update({
    summary: 'Update alert policy',
    description:
      'Changes any field; the result must be a whole policy (switch a metric policy to a state one with ' +
      '`{"metric": null, "compare": null, "threshold": null, "window": null, "state": "error"}`). Disabling ' +
      'a policy, or changing what it watches, resolves its open incidents (`policy_disabled`, ' +
      '`policy_changed`) with their notifications; a new threshold, compare or window applies to open ' +
      'incidents from the next collection.',
    body: PolicyChanges,
    answer: 'The policy as changed',
    errors: [404],
    run: ({ accountId, params, body }) => alerts.update(accountId, params.id, body),
  });

  route.delete({
    summary: 'Delete alert policy',
    description: 'The policy, its incidents and their notifications are removed; nothing more is sent.',
    answer: 'The policy as it was',
    errors: [404],
    run: ({ accountId, params }) => alerts.delete(accountId, params.id),
  });

  route.list({
    path: '/:id/incidents',
    summary: 'List incidents of a policy',
    description: "The policy's incidents, newest first, each with its notifications.",
    params: IdParams,
    query: IncidentQuery,
    returns: Incident,
    answer: 'One page of incidents',
    errors: [404],
    run: ({ accountId, params, query: { status, instance_id, ...page } }) =>
      alerts.incidentsOf(accountId, params.id, { status, instanceId: instance_id }, page),
  });

  route.action('test', {
    summary: 'Test alert channels',
    description:
      'Sends a test notification to every channel of the policy now and answers with each one’s outcome: ' +
      'e-mail and chat get one attempt; webhook subscriptions get an `alert.firing` event with `test: true` ' +
      '(retried like any delivery if this attempt fails).',
    returns: TestResult,
    answer: 'Each channel target’s outcome',
    errors: [404],
    run: ({ accountId, params }) => alerts.test(accountId, params.id),
  });
};
