import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { ok, okList } from '../../platform/http/envelope.js';
import { principalOf } from '../../platform/http/plugins/guard.js';
import { described, errorResponses } from '../../platform/http/responses.js';
import { Envelope, IdParams, ListEnvelope, ListQuery, Timestamp } from '../../platform/http/schemas.js';
import type { EventService } from './service.js';

/** Who an event was written for (platform/events/actor.ts). */
export const EventActor = Type.Union(
  [
    Type.Object(
      {
        type: Type.Literal('api_key'),
        id: Type.String({
          description: 'The id of the API key the request was made with (never its secret)',
        }),
        ip: Type.String({ description: 'The address the request came from' }),
      },
      { title: 'API key actor' },
    ),
    Type.Object({ type: Type.Literal('operator') }, { title: 'Operator actor' }),
    Type.Object({ type: Type.Literal('system') }, { title: 'System actor' }),
  ],
  {
    description:
      'Who did it: `api_key` for a request (its key and address), `operator` for an admin command, ' +
      '`system` for the platform’s own work (reconcilers finishing what a request started, schedules, ' +
      'billing), and for events written before actors were recorded.',
  },
);

/** The webhook payload without its signature (a delivery carries the actor as `data.actor`). */
const Event = Type.Object(
  {
    id: Type.String(),
    type: Type.String({ description: 'Event type, e.g. instance.created' }),
    timestamp: Timestamp,
    resource_id: Type.String({ description: 'The resource the event is about' }),
    data: Type.Object({}, { additionalProperties: true }),
    actor: EventActor,
  },
  { $id: 'Event', title: 'Event' },
);

const EventFilters = {
  type: Type.Optional(
    Type.String({
      pattern: '^[a-z_]+(\\.[a-z_]+|\\.\\*)$',
      maxLength: 100,
      description: 'An event type (instance.created), or a family of them (instance.*)',
    }),
  ),
  resource_id: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
  actor_type: Type.Optional(
    Type.Union([Type.Literal('api_key'), Type.Literal('operator'), Type.Literal('system')], {
      description: 'Only the events of this kind of actor',
    }),
  ),
  actor_id: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 64,
      description: 'Only the events written for requests made with this API key (its id)',
    }),
  ),
  since: Type.Optional(
    Type.String({
      format: 'date-time',
      description:
        'Events created at or after this time (inclusive). Polling with the newest timestamp seen returns ' +
        'that event again: deduplicate by id.',
    }),
  ),
};

export const eventRoutes: FastifyPluginAsyncTypebox<{ events: EventService }> = async (app, { events }) => {
  app.get(
    '/events',
    {
      schema: {
        tags: ['events'],
        summary: 'List events (newest first)',
        description:
          "The account's event log, in the order the events were written: every state change of its resources, " +
          'filtered by type (or a family such as `instance.*`), resource, time and actor (`actor_id`: what ' +
          'one API key did).',
        querystring: ListQuery(['created_at'] as const, { sort: 'created_at' }, EventFilters),
        response: { 200: described(ListEnvelope(Event), 'One page of events') },
      },
      config: { permission: ['account', 'read'] },
    },
    async (request) => {
      const { type, resource_id, since, actor_type, actor_id, ...page } = request.query;
      return okList(
        request,
        await events.list(
          principalOf(request).accountId,
          { type, resource_id, since, actor_type, actor_id },
          page,
        ),
      );
    },
  );

  app.get(
    '/events/:id',
    {
      schema: {
        tags: ['events'],
        summary: 'Get event',
        description: 'One event of the account, as webhook deliveries carry it (without the signature).',
        params: IdParams,
        response: { 200: described(Envelope(Event), 'The event'), ...errorResponses(404) },
      },
      config: { permission: ['account', 'read'] },
    },
    async (request) => ok(request, await events.get(principalOf(request).accountId, request.params.id)),
  );
};
