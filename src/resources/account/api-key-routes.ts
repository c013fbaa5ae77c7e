import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { ALL_PERMISSIONS } from '../../platform/domain/permissions.js';
import { ok, okList } from '../../platform/http/envelope.js';
import { principalOf } from '../../platform/http/plugins/guard.js';
import { described, errorResponses, withExample } from '../../platform/http/responses.js';
import {
  Envelope,
  IdParams,
  ListEnvelope,
  ListQuery,
  PrintableName,
  StringEnum,
} from '../../platform/http/schemas.js';
import type { ApiKeyService } from './api-key-service.js';
import { ApiKeyView } from './api-key-view.js';

const Permission = StringEnum(ALL_PERMISSIONS);

const ApiKey = ApiKeyView;
const CreatedApiKey = Type.Object(
  {
    ...ApiKeyView.properties,
    // Optional because an Idempotency-Key replay of the creation leaves it out (the key is kept as a hash only).
    key: Type.Optional(
      Type.String({
        description:
          'The API key, shown in the first answer and never again: a replayed answer (Idempotent-Replayed: true) ' +
          'does not carry it',
      }),
    ),
  },
  { title: 'CreatedApiKey' },
);

const NewApiKey = Type.Object(
  {
    name: PrintableName(),
    permissions: Type.Optional(
      Type.Array(Permission, {
        minItems: 1,
        maxItems: ALL_PERMISSIONS.length,
        description: 'Defaults to the permissions of the key making the request',
      }),
    ),
    expires_at: Type.Optional(Type.String({ format: 'date-time' })),
  },
  { title: 'NewApiKey', additionalProperties: false },
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
        description:
          'Makes a key with the given permissions (by default those of the key making the request; a key can only ' +
          'grant what it holds) and an optional expiry. The `key` value is in this answer only: the server keeps ' +
          'its SHA-256. Replaying the request with the same Idempotency-Key returns the record without `key`.',
        body: withExample(NewApiKey, {
          name: 'ci-deploy',
          permissions: ['instances:write', 'account:read'],
          expires_at: '2030-01-01T00:00:00Z',
        }),
        response: { 201: described(Envelope(CreatedApiKey), 'The new key, with its value') },
      },
      // The key is shown once: an Idempotency-Key replay returns the record without it.
      config: {
        permission: ['account', 'write'],
        idempotencyOmit: ['key'],
        carriesSecret: true,
        idempotentCreate: { status: 201, view: (accountId, made) => apiKeys.get(accountId, made.id) },
        // A replay shows the key made: only to a caller that could have made it.
        idempotentReplayCheck: (principal, data) => apiKeys.checkReplay(principal, data),
      },
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
        description: "The account's keys, without their values (`prefix` tells them apart), newest first.",
        querystring: ListQuery(['created_at', 'name', 'last_used_at'] as const, { sort: 'created_at' }),
        response: { 200: described(ListEnvelope(ApiKey), 'One page of keys') },
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
        description: 'One key of the account, without its value.',
        params: IdParams,
        response: { 200: described(Envelope(ApiKey), 'The key'), ...errorResponses(404) },
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
        description:
          'Revokes the key at once on this server and, through Redis, on the others (at the latest after ' +
          '`NIMBUS_AUTH_CACHE_SECONDS`). A key may delete itself.',
        params: IdParams,
        response: { 200: described(Envelope(ApiKey), 'The key as it was'), ...errorResponses(404) },
      },
      // No route permission: any key may delete itself; for other keys the service asks for account:write.
      config: {},
    },
    async (request) => ok(request, await apiKeys.revoke(principalOf(request), request.params.id)),
  );
};
