import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { resourceRoutes } from '../../platform/http/resource-routes.js';
import { withExample } from '../../platform/http/responses.js';
import { IdParams, ListQuery, ResourceName, StringEnum } from '../../platform/http/schemas.js';
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
import { PEER_STATS, VpnPeerView, VpnView } from './view.js';
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

// A peer just added has no figures yet: the answer is the record and its file.
const peerFields = Type.Omit(VpnPeerView, PEER_STATS).properties;

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
  const route = resourceRoutes(app, { path: '/vpn', tag: 'networking', permission: 'networking', view: Vpn });

  route.create({
    summary: 'Create VPN (202 provisioning; poll until active)',
    description:
      "A WireGuard gateway into the account's private network of one region, on a public IPv4 of the region's " +
      `pool and UDP port ${VPN_PORT}. Quota \`vpns\` (403); a past-due account gets 402; an exhausted address ` +
      'pool is 503.',
    body: withExample(NewVpn, { name: 'office', region: 'us-east-1', tunnel_cidr: DEFAULT_TUNNEL_CIDR }),
    status: 202,
    answer: 'Accepted: the VPN, provisioning',
    errors: [402],
    viewOfMade: (accountId, made) => vpns.get(accountId, made.id),
    run: ({ principal, body }) => vpns.create(principal, body),
  });

  route.list({
    summary: 'List VPNs',
    description:
      'Newest first unless sorted otherwise (`created_at`, `name`); filters status and region combine.',
    query: ListVpnsQuery,
    answer: 'One page of VPNs',
    run: ({ accountId, query }) => vpns.list(accountId, query),
  });

  route.get({
    summary: 'Get VPN',
    description: 'One VPN; poll it to follow a change of status.',
    answer: 'The VPN',
    errors: [404],
    run: ({ accountId, params }) => vpns.get(accountId, params.id),
  });

  route.update({
    summary: 'Update VPN (name, allowed_cidrs)',
    description:
      'In any status but `deleting` (409 then). New routes reach clients through their configuration files ' +
      '(`GET …/peers/{peer_id}/config`); any other field is a 400.',
    body: VpnUpdate,
    answer: 'The VPN as changed',
    errors: [404, 409],
    run: ({ accountId, params, body }) => vpns.update(accountId, params.id, body),
  });

  route.delete({
    summary: 'Delete VPN (202 deleting; then 404)',
    description:
      'Takes the gateway down with its peers and frees its public address. Deleting twice is a 409.',
    status: 202,
    answer: 'Accepted: the VPN, deleting',
    errors: [404, 409],
    run: ({ accountId, params }) => vpns.delete(accountId, params.id),
  });

  route.create({
    path: '/:id/peers',
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
    status: 201,
    returns: CreatedVpnPeer,
    answer: 'The peer, with its wg-quick file',
    errors: [404, 409],
    viewOfMade: (accountId, made, params) => vpns.getPeer(accountId, params.id ?? '', made.id),
    // A generated private key is shown once: an Idempotency-Key replay returns the peer without it.
    config: { idempotencyOmit: ['private_key', 'config'], carriesSecret: true },
    run: ({ accountId, params, body }) => vpns.addPeer(accountId, params.id, body),
  });

  route.list({
    path: '/:id/peers',
    summary: "List a VPN's peers",
    description: 'Newest first unless sorted otherwise (`created_at`, `name`).',
    params: IdParams,
    query: ListPeersQuery,
    returns: VpnPeer,
    answer: 'One page of peers',
    errors: [404],
    run: ({ accountId, params, query }) => vpns.listPeers(accountId, params.id, query),
  });

  route.get({
    path: '/:id/peers/:peer_id',
    summary: 'Get peer',
    description: "One peer, with the gateway's figures (last handshake, bytes); never its private key.",
    params: PeerParams,
    returns: VpnPeer,
    answer: 'The peer',
    errors: [404],
    run: ({ accountId, params }) => vpns.getPeer(accountId, params.id, params.peer_id),
  });

  route.delete({
    path: '/:id/peers/:peer_id',
    summary: 'Remove peer',
    description:
      'The gateway stops accepting its key; its address is free for a later peer. A VPN being deleted is a 409.',
    params: PeerParams,
    returns: VpnPeer,
    answer: 'The peer removed',
    errors: [404, 409],
    run: ({ accountId, params }) => vpns.removePeer(accountId, params.id, params.peer_id),
  });

  route.get({
    path: '/:id/peers/:peer_id/config',
    summary: "Get a peer's wg-quick file (without its private key)",
    description:
      'The client file with the current routes and a placeholder for the private key, which the server never keeps.',
    params: PeerParams,
    returns: PeerConfig,
    answer: 'The configuration file',
    errors: [404],
    run: ({ accountId, params }) => vpns.peerConfig(accountId, params.id, params.peer_id),
  });
};
