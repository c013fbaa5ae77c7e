import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { ok, okList } from '../../platform/http/envelope.js';
import { principalOf } from '../../platform/http/plugins/guard.js';
import { described, errorResponses, withExample } from '../../platform/http/responses.js';
import { Envelope, IdParams, ListEnvelope, ListQuery } from '../../platform/http/schemas.js';
import {
  MAX_PUBLIC_KEY_LENGTH,
  MAX_SSH_KEY_NAME_LENGTH,
  SSH_KEY_NAME_PATTERN,
  SSH_KEY_TYPES,
} from './rules.js';
import type { SshKeyService } from './service.js';
import { SshKeyView } from './view.js';

const SshKeyName = Type.String({
  minLength: 1,
  maxLength: MAX_SSH_KEY_NAME_LENGTH,
  pattern: SSH_KEY_NAME_PATTERN,
  description: 'Letters, digits, ".", "_" and "-"; unique in the account',
});

const SshKey = SshKeyView;

const NewSshKey = Type.Object(
  {
    name: SshKeyName,
    public_key: Type.String({
      minLength: 1,
      maxLength: MAX_PUBLIC_KEY_LENGTH,
      description: `The contents of a .pub file. Types: ${SSH_KEY_TYPES.join(', ')}; RSA keys of at least 2048 bits`,
    }),
  },
  { title: 'NewSshKey', additionalProperties: false },
);

const SshKeyListQuery = ListQuery(
  ['created_at', 'name'] as const,
  { sort: 'created_at' },
  {
    name: Type.Optional(
      Type.String({ minLength: 1, maxLength: MAX_SSH_KEY_NAME_LENGTH, description: 'Exact name' }),
    ),
  },
);

export const sshKeyRoutes: FastifyPluginAsyncTypebox<{ sshKeys: SshKeyService }> = async (
  app,
  { sshKeys },
) => {
  app.post(
    '/ssh-keys',
    {
      schema: {
        tags: ['ssh-keys'],
        summary: 'Upload SSH public key',
        description:
          'Stores an OpenSSH public key (ed25519, RSA of 2048 bits or more, ECDSA) under a name, for instance ' +
          'creation to install. The name and the key (by fingerprint) are each unique in the account (409 otherwise).',
        body: withExample(NewSshKey, {
          name: 'alice-laptop',
          public_key:
            'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILhbBjiuIdqgI9uRYRvgAaMRfgbHbbEEzCypHIqF0FIr alice@laptop',
        }),
        response: {
          201: described(Envelope(SshKey), 'The stored key with its fingerprint'),
          ...errorResponses(409),
        },
      },
      config: {
        permission: ['instances', 'write'],
        idempotentCreate: { status: 201, view: (accountId, made) => sshKeys.get(accountId, made.id) },
      },
    },
    async (request, reply) => {
      const created = await sshKeys.create(principalOf(request).accountId, request.body);
      return reply.code(201).send(ok(request, created));
    },
  );

  app.get(
    '/ssh-keys',
    {
      schema: {
        tags: ['ssh-keys'],
        summary: 'List SSH keys',
        description: "The account's SSH keys, newest first; `name` finds one by its exact name.",
        querystring: SshKeyListQuery,
        response: { 200: described(ListEnvelope(SshKey), 'One page of SSH keys') },
      },
      config: { permission: ['instances', 'read'] },
    },
    async (request) => okList(request, await sshKeys.list(principalOf(request).accountId, request.query)),
  );

  app.get(
    '/ssh-keys/:id',
    {
      schema: {
        tags: ['ssh-keys'],
        summary: 'Get SSH key',
        description: 'One SSH key of the account.',
        params: IdParams,
        response: { 200: described(Envelope(SshKey), 'The SSH key'), ...errorResponses(404) },
      },
      config: { permission: ['instances', 'read'] },
    },
    async (request) => ok(request, await sshKeys.get(principalOf(request).accountId, request.params.id)),
  );

  app.delete(
    '/ssh-keys/:id',
    {
      schema: {
        tags: ['ssh-keys'],
        summary: 'Delete SSH key (instances created with it keep it)',
        description:
          'Allowed while instances created with the key exist: they keep the key they booted with. ' +
          'New instances can no longer name it.',
        params: IdParams,
        response: { 200: described(Envelope(SshKey), 'The SSH key as it was'), ...errorResponses(404) },
      },
      config: { permission: ['instances', 'write'] },
    },
    async (request) => ok(request, await sshKeys.delete(principalOf(request).accountId, request.params.id)),
  );
};
