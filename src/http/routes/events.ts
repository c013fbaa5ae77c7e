import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { EventService } from '../../services/events.js';
import { ok, okList } from '../envelope.js';
import { principalOf } from '../plugins/guard.js';
import { described, errorResponses } from '../responses.js';
import { Envelope, IdParams, ListEnvelope, ListQuery, Timestamp } from '../schemas.js';

/** The webhook payload without its signature. */
const Event = Type.Object(
  {
    id: Type.String(),
    type: Type.String({ description: 'Event type, e.g. instance.created' }),
    timestamp: Timestamp,
    resource_id: Type.String({ description: 'The resource the event is about' }),
    data: Type.Object({}, { additionalProperties: true }),
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
          'filtered by type (or a family such as `instance.*`), resource and time.',
        querystring: ListQuery(['created_at'] as const, { sort: 'created_at' }, EventFilters),
        response: { 200: described(ListEnvelope(Event), 'One page of events') },
      },
      config: { permission: ['account', 'read'] },
    },
    async (request) => {
      const { type, resource_id, since, ...page } = request.query;
      return okList(
        request,
        await events.list(principalOf(request).accountId, { type, resource_id, since }, page),
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
