import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { ok } from '../../platform/http/envelope.js';
import { principalOf } from '../../platform/http/plugins/guard.js';
import { described, errorResponses } from '../../platform/http/responses.js';
import { Envelope, IdParams, StringEnum } from '../../platform/http/schemas.js';
import { SshEndpoint } from '../instances/routes.js';
import { ACTIONS, DIRECTIONS, PACKET_PROTOCOLS, PORT, PROTOCOLS } from './firewall-rules.js';
import type { NetworkService } from './service.js';

const EffectiveRule = Type.Object(
  {
    source: StringEnum(['rule', 'preset', 'default'] as const, {
      description:
        'Where the rule comes from: your firewall rules, the instance preset, or the default policy',
    }),
    id: Type.Union([Type.String(), Type.Null()], {
      description: 'The firewall rule id; null for presets and defaults',
    }),
    name: Type.String(),
    direction: StringEnum(DIRECTIONS),
    action: StringEnum(ACTIONS),
    protocol: StringEnum(PROTOCOLS),
    ports: Type.Union([Type.String(), Type.Null()]),
    sources: Type.Array(Type.String()),
    destinations: Type.Array(Type.String()),
    priority: Type.Union([Type.Integer(), Type.Null()], { description: 'null for presets and defaults' }),
  },
  { title: 'EffectiveFirewallRule' },
);

const Network = Type.Object(
  {
    instance_id: Type.String(),
    public_ip: Type.Union([Type.String(), Type.Null()], { description: 'null: the instance has none' }),
    private_ip: Type.String(),
    mac_address: Type.String(),
    hostname: Type.String(),
    internal_hostname: Type.String(),
    private_network: Type.Object({ region: Type.String(), cidr: Type.String() }),
    firewall_preset: Type.String(),
    ssh: SshEndpoint,
    firewall_rules: Type.Array(EffectiveRule, {
      description:
        'Every rule that can decide the instance’s traffic, in evaluation order (first match wins)',
    }),
    private_traffic_free: Type.Boolean(),
    note: Type.String(),
  },
  { title: 'InstanceNetwork' },
);

const CheckQuery = Type.Object(
  {
    direction: Type.Optional(StringEnum(DIRECTIONS, { default: 'inbound' })),
    protocol: StringEnum(PACKET_PROTOCOLS),
    port: Type.Optional(
      Type.Integer({
        minimum: PORT.min,
        maximum: PORT.max,
        description: 'Required for tcp and udp; none for icmp',
      }),
    ),
    address: Type.String({
      minLength: 1,
      maxLength: 64,
      description:
        'The remote end: where an inbound packet comes from, where an outbound one goes (IPv4 or IPv6)',
    }),
  },
  { additionalProperties: false },
);

const Check = Type.Object(
  {
    instance_id: Type.String(),
    packet: Type.Object({
      direction: StringEnum(DIRECTIONS),
      protocol: StringEnum(PACKET_PROTOCOLS),
      port: Type.Union([Type.Integer(), Type.Null()]),
      address: Type.String(),
    }),
    verdict: StringEnum(ACTIONS),
    matched_rule: EffectiveRule,
  },
  { title: 'FirewallCheck' },
);

export const networkRoutes: FastifyPluginAsyncTypebox<{ network: NetworkService }> = async (
  app,
  { network },
) => {
  const read = { permission: ['networking', 'read'] } as const;

  app.get(
    '/instances/:id/network',
    {
      schema: {
        tags: ['networking'],
        summary: 'Get network info: addresses, DNS names, firewall rules',
        description:
          "The instance's public and private IPv4 addresses, MAC address, DNS names, private network, firewall " +
          'preset, and the firewall rules that decide its traffic in evaluation order: your rules that select it, ' +
          'then its preset, then the defaults. Traffic on the private network is free.',
        params: IdParams,
        response: { 200: described(Envelope(Network), 'The network information'), ...errorResponses(404) },
      },
      config: read,
    },
    async (request) => ok(request, await network.network(principalOf(request).accountId, request.params.id)),
  );

  app.get(
    '/instances/:id/network/check',
    {
      schema: {
        tags: ['networking'],
        summary: 'Check whether the firewall lets a packet through',
        description:
          'Evaluates one packet against the instance\'s firewall ("can 198.51.100.7 reach port 5432?") and ' +
          'answers the verdict and the rule that decided it.',
        params: IdParams,
        querystring: CheckQuery,
        response: {
          200: described(Envelope(Check), 'The verdict and the deciding rule'),
          ...errorResponses(404),
        },
      },
      config: read,
    },
    async (request) =>
      ok(request, await network.check(principalOf(request).accountId, request.params.id, request.query)),
  );
};
