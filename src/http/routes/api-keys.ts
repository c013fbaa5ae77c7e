import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { ALL_PERMISSIONS } from '../../domain/permissions.js';
import type { ApiKeyService } from '../../services/api-keys.js';
import { ok, okList } from '../envelope.js';
import { principalOf } from '../plugins/guard.js';
import { Envelope, IdParams, ListEnvelope, ListQuery, responses, StringEnum, Timestamp } from '../schemas.js';

const Permission = StringEnum(ALL_PERMISSIONS);

const apiKeyFields = {
  id: Type.String(),
  name: Type.String(),
  prefix: Type.String({ description: 'The first characters of the key, to tell keys apart' }),
  permissions: Type.Array(Type.String()),
  expires_at: Type.Union([Timestamp, Type.Null()]),
  last_used_at: Type.Union([Timestamp, Type.Null()]),
  created_at: Timestamp,
};

const ApiKey = Type.Object(apiKeyFields, { $id: 'ApiKey', title: 'ApiKey' });
const CreatedApiKey = Type.Object(
  { ...apiKeyFields, key: Type.String({ description: 'The API key. Shown only in this response.' }) },
  { title: 'CreatedApiKey' },
);

const NewApiKey = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 100 }),
    permissions: Type.Optional(
      Type.Array(Permission, {
        minItems: 1,
        maxItems: ALL_PERMISSIONS.length,
        description: 'Defaults to the permissions of the key making the request',
      }),
    ),
    expires_at: Type.Optional(Type.String({ format: 'date-time' })),
  },
  { additionalProperties: false },
);

export const apiKeyRoutes: FastifyPluginAsyncTypebox<{ apiKeys: ApiKeyService }> = async (
  app,
  { apiKeys },
) => {
  app.post(
    '/account/api-keys',
    {
      schema: {
        tags: ['account'],
        summary: 'Create API key (the key is shown once, in this response)',
        body: NewApiKey,
        response: responses({ 201: Envelope(CreatedApiKey) }),
      },
      // The key is shown once: an Idempotency-Key replay returns the record without it.
      config: { permission: ['account', 'write'], idempotencyOmit: ['key'] },
    },
    async (request, reply) => {
      const created = await apiKeys.create(principalOf(request), request.body);
      return reply.code(201).send(ok(request, created));
    },
  );

  app.get(
    '/account/api-keys',
    {
      schema: {
        tags: ['account'],
        summary: 'List API keys',
        querystring: ListQuery(['created_at', 'name', 'last_used_at'] as const, { sort: 'created_at' }),
        response: responses({ 200: ListEnvelope(ApiKey) }),
      },
      config: { permission: ['account', 'read'] },
    },
    async (request) => okList(request, await apiKeys.list(principalOf(request).accountId, request.query)),
  );

  app.get(
    '/account/api-keys/:id',
    {
      schema: {
        tags: ['account'],
        summary: 'Get API key',
        params: IdParams,
        response: responses({ 200: Envelope(ApiKey) }),
      },
      config: { permission: ['account', 'read'] },
    },
    async (request) => ok(request, await apiKeys.get(principalOf(request).accountId, request.params.id)),
  );

  app.delete(
    '/account/api-keys/:id',
    {
      schema: {
        tags: ['account'],
        summary: 'Delete (revoke) API key',
        params: IdParams,
        response: responses({ 200: Envelope(ApiKey) }),
      },
      config: { permission: ['account', 'write'] },
    },
    async (request) => ok(request, await apiKeys.delete(principalOf(request).accountId, request.params.id)),
  );
};
