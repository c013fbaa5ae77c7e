import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { ok, okList } from '../../platform/http/envelope.js';
import { principalOf } from '../../platform/http/plugins/guard.js';
import { described, errorResponses, withExample } from '../../platform/http/responses.js';
import {
  Envelope,
  IdParams,
  ListEnvelope,
  ListQuery,
  ResourceName,
  StringEnum,
} from '../../platform/http/schemas.js';
import { REGION_NAMES } from '../catalog/catalog.js';
import {
  DEFAULT_TUNNEL_CIDR,
  MAX_ALLOWED_CIDRS,
  PEER_SORTS,
  TUNNEL_PREFIX,
  VPN_PORT,
  VPN_SORTS,
} from './record.js';
import type { VpnService } from './service.js';
import { VPN_STATUSES } from './states.js';
import { VpnPeerView, VpnView } from './view.js';
import { WIREGUARD_KEY_PATTERN } from './wireguard.js';

const CidrText = Type.String({
  minLength: 9,
  maxLength: 18,
  description: 'An IPv4 CIDR block, e.g. 10.0.0.0/24',
});
const AllowedCidrs = Type.Array(CidrText, {
  maxItems: MAX_ALLOWED_CIDRS,
  description:
    'Blocks routed to clients besides the private network (0.0.0.0/0: everything); none may cut into the tunnel network',
});

export const Vpn = VpnView;

const peerFields = VpnPeerView.properties;

export const VpnPeer = VpnPeerView;

const CreatedVpnPeer = Type.Object(
  {
    ...peerFields,
    // Optional because an Idempotency-Key replay leaves both out: the private key is never stored.
    config: Type.Optional(
      Type.String({
        description:
          "The client's wg-quick file; with a generated key it holds the private key (this answer only), " +
          'otherwise a placeholder. Not in a replayed answer (Idempotent-Replayed: true).',
      }),
    ),
    private_key: Type.Optional(
      Type.String({
        description:
          'A generated private key, shown in this answer and never again (not stored; not in a replayed answer)',
      }),
    ),
  },
  { title: 'CreatedVpnPeer' },
);

const PeerConfig = Type.Object(
  {
    peer_id: Type.String(),
    vpn_id: Type.String(),
    private_key_included: Type.Literal(false),
    config: Type.String({ description: 'The wg-quick file with a placeholder where the private key goes' }),
  },
  { title: 'VpnPeerConfig' },
);

const NewVpn = Type.Object(
  {
    name: ResourceName,
    region: StringEnum(REGION_NAMES),
    tunnel_cidr: Type.Optional({
      ...CidrText,
      description:
        `Client network, /${TUNNEL_PREFIX.min}–/${TUNNEL_PREFIX.max} in 10/8, 172.16/12, 192.168/16 or 100.64/10, ` +
        `clear of the region's private network (default ${DEFAULT_TUNNEL_CIDR})`,
    }),
    allowed_cidrs: Type.Optional(AllowedCidrs),
  },
  { title: 'NewVpn', additionalProperties: false },
);

const VpnUpdate = Type.Object(
  { name: Type.Optional(ResourceName), allowed_cidrs: Type.Optional(AllowedCidrs) },
  { title: 'VpnUpdate', additionalProperties: false, minProperties: 1 },
);

const NewPeer = Type.Object(
  {
    name: ResourceName,
    public_key: Type.Optional(
      Type.String({
        pattern: WIREGUARD_KEY_PATTERN,
        description: 'Your public key (`wg genkey | wg pubkey`); absent: the server generates a pair',
      }),
    ),
  },
  { title: 'NewVpnPeer', additionalProperties: false },
);

const PeerParams = Type.Object({
  id: Type.String({ minLength: 1, maxLength: 64 }),
  peer_id: Type.String({ minLength: 1, maxLength: 64 }),
});

const ListVpnsQuery = ListQuery(
  VPN_SORTS,
  { sort: 'created_at' },
  {
    status: Type.Optional(StringEnum(VPN_STATUSES)),
    region: Type.Optional(StringEnum(REGION_NAMES)),
  },
);
const ListPeersQuery = ListQuery(PEER_SORTS, { sort: 'created_at' });

export const vpnRoutes: FastifyPluginAsyncTypebox<{ vpns: VpnService }> = async (app, { vpns }) => {
  const write = { permission: ['networking', 'write'] } as const;
  const read = { permission: ['networking', 'read'] } as const;
  const tags = ['networking'];
  const accountOf = (request: Parameters<typeof principalOf>[0]) => principalOf(request).accountId;

  app.post(
    '/vpn',
    {
      schema: {
        tags,
        summary: 'Create VPN (202 provisioning; poll until active)',
        description:
          "A WireGuard gateway into the account's private network of one region, on a public IPv4 of the region's " +
          `pool and UDP port ${VPN_PORT}. Quota \`vpns\` (403); a past-due account gets 402; an exhausted address ` +
          'pool is 503.',
        body: withExample(NewVpn, { name: 'office', region: 'us-east-1', tunnel_cidr: DEFAULT_TUNNEL_CIDR }),
        response: {
          202: described(Envelope(Vpn), 'Accepted: the VPN, provisioning'),
          ...errorResponses(402),
        },
      },
      config: {
        ...write,
        idempotentCreate: { status: 202, view: (accountId, made) => vpns.get(accountId, made.id) },
      },
    },
    async (request, reply) =>
      reply.code(202).send(ok(request, await vpns.create(principalOf(request), request.body))),
  );

  app.get(
    '/vpn',
    {
      schema: {
        tags,
        summary: 'List VPNs',
        description:
          'Newest first unless sorted otherwise (`created_at`, `name`); filters status and region combine.',
        querystring: ListVpnsQuery,
        response: { 200: described(ListEnvelope(Vpn), 'One page of VPNs') },
      },
      config: read,
    },
    async (request) => okList(request, await vpns.list(accountOf(request), request.query)),
  );

  app.get(
    '/vpn/:id',
    {
      schema: {
        tags,
        summary: 'Get VPN',
        description: 'One VPN; poll it to follow a change of status.',
        params: IdParams,
        response: { 200: described(Envelope(Vpn), 'The VPN'), ...errorResponses(404) },
      },
      config: read,
    },
    async (request) => ok(request, await vpns.get(accountOf(request), request.params.id)),
  );

  app.patch(
    '/vpn/:id',
    {
      schema: {
        tags,
        summary: 'Update VPN (name, allowed_cidrs)',
        description:
          'In any status but `deleting` (409 then). New routes reach clients through their configuration files ' +
          '(`GET …/peers/{peer_id}/config`); any other field is a 400.',
        params: IdParams,
        body: VpnUpdate,
        response: { 200: described(Envelope(Vpn), 'The VPN as changed'), ...errorResponses(404, 409) },
      },
      config: write,
    },
    async (request) => ok(request, await vpns.update(accountOf(request), request.params.id, request.body)),
  );

  app.delete(
    '/vpn/:id',
    {
      schema: {
        tags,
        summary: 'Delete VPN (202 deleting; then 404)',
        description:
          'Takes the gateway down with its peers and frees its public address. Deleting twice is a 409.',
        params: IdParams,
        response: {
          202: described(Envelope(Vpn), 'Accepted: the VPN, deleting'),
          ...errorResponses(404, 409),
        },
      },
      config: write,
    },
    async (request, reply) =>
      reply.code(202).send(ok(request, await vpns.delete(accountOf(request), request.params.id))),
  );

  app.post(
    '/vpn/:id/peers',
    {
      schema: {
        tags,
        summary: 'Add peer (with your public key, or a generated key pair shown once)',
        description:
          'The peer gets the lowest free address of the tunnel network. With `public_key` nothing secret leaves the ' +
          'server and `config` has a placeholder for your private key; without it the server generates a pair and ' +
          'this answer alone carries `private_key` and a complete `config` (kept nowhere). A key already on the VPN, ' +
          'a full tunnel network or a VPN being deleted are 409.',
        params: IdParams,
        body: withExample(NewPeer, {
          name: 'laptop',
          public_key: 'bW55bZqs7kLhd+8wDdJEiCewhjTNdBES+PDWI6mrTCA=',
        }),
        response: {
          201: described(Envelope(CreatedVpnPeer), 'The peer, with its wg-quick file'),
          ...errorResponses(404, 409),
        },
      },
      // A generated private key is shown once: an Idempotency-Key replay returns the peer without it.
      config: {
        ...write,
        idempotencyOmit: ['private_key', 'config'],
        carriesSecret: true,
        idempotentCreate: {
          status: 201,
          view: (accountId, made, params) => vpns.getPeer(accountId, params.id ?? '', made.id),
        },
      },
    },
    async (request, reply) =>
      reply
        .code(201)
        .send(ok(request, await vpns.addPeer(accountOf(request), request.params.id, request.body))),
  );

  app.get(
    '/vpn/:id/peers',
    {
      schema: {
        tags,
        summary: "List a VPN's peers",
        description: 'Newest first unless sorted otherwise (`created_at`, `name`).',
        params: IdParams,
        querystring: ListPeersQuery,
        response: { 200: described(ListEnvelope(VpnPeer), 'One page of peers'), ...errorResponses(404) },
      },
      config: read,
    },
    async (request) =>
      okList(request, await vpns.listPeers(accountOf(request), request.params.id, request.query)),
  );

  app.get(
    '/vpn/:id/peers/:peer_id',
    {
      schema: {
        tags,
        summary: 'Get peer',
        description: 'One peer of the VPN (never its private key).',
        params: PeerParams,
        response: { 200: described(Envelope(VpnPeer), 'The peer'), ...errorResponses(404) },
      },
      config: read,
    },
    async (request) =>
      ok(request, await vpns.getPeer(accountOf(request), request.params.id, request.params.peer_id)),
  );

  app.delete(
    '/vpn/:id/peers/:peer_id',
    {
      schema: {
        tags,
        summary: 'Remove peer',
        description:
          'The gateway stops accepting its key; its address is free for a later peer. A VPN being deleted is a 409.',
        params: PeerParams,
        response: { 200: described(Envelope(VpnPeer), 'The peer removed'), ...errorResponses(404, 409) },
      },
      config: write,
    },
    async (request) =>
      ok(request, await vpns.removePeer(accountOf(request), request.params.id, request.params.peer_id)),
  );

  app.get(
    '/vpn/:id/peers/:peer_id/config',
    {
      schema: {
        tags,
        summary: "Get a peer's wg-quick file (without its private key)",
        description:
          'The client configuration with the current routes; where the private key goes it has a placeholder: the ' +
          'server never keeps a peer private key (a generated one is shown only when the peer is added).',
        params: PeerParams,
        response: { 200: described(Envelope(PeerConfig), 'The configuration file'), ...errorResponses(404) },
      },
      config: read,
    },
    async (request) =>
      ok(request, await vpns.peerConfig(accountOf(request), request.params.id, request.params.peer_id)),
  );
};
