/** How a VPN and its peers look to users (docs/api.md, VPNs): fields of their records, and what follows from them. */
import { type Static, Type } from '@sinclair/typebox';
import type { GatewayPeerStats } from '../../drivers/driver.js';
import { microsToUsd } from '../../platform/domain/money.js';
import { Nullable } from '../../platform/http/schemas.js';
import { viewOf } from '../../platform/http/view-of.js';
import {
  gatewayAddress,
  routesOf,
  VPN_PORT,
  VPN_PRICE_MICROS_PER_HOUR,
  type Vpn,
  type VpnPeer,
  VpnPeerRecord,
  VpnRecord,
} from './record.js';

const vpn = VpnRecord.properties;

export const VpnView = Type.Object(
  {
    id: vpn.id,
    name: vpn.name,
    region: vpn.region,
    status: vpn.status,
    endpoint: Type.String({ description: `Where clients connect: \`<public_ip>:${VPN_PORT}\`` }),
    public_ip: vpn.endpoint_ip,
    port: vpn.endpoint_port,
    server_public_key: vpn.server_public_key,
    tunnel_cidr: vpn.tunnel_cidr,
    gateway_address: Type.String({
      description: "The gateway's address in the tunnel; clients use it as their DNS resolver",
    }),
    allowed_cidrs: vpn.allowed_cidrs,
    routes: Type.Array(Type.String(), {
      description: "What clients route through the VPN: the region's private network, then allowed_cidrs",
    }),
    price_per_hour: Type.Number({ description: 'USD per hour while the VPN exists' }),
    created_at: vpn.created_at,
    updated_at: vpn.updated_at,
  },
  { $id: 'Vpn', title: 'Vpn' },
);
export type VpnView = Static<typeof VpnView>;

const recordFields = viewOf(VpnView);

export function vpnView(record: Vpn): VpnView {
  return {
    ...recordFields(record),
    endpoint: `${record.endpoint_ip}:${record.endpoint_port}`,
    public_ip: record.endpoint_ip,
    port: record.endpoint_port,
    gateway_address: gatewayAddress(record.tunnel_cidr),
    routes: routesOf(record),
    price_per_hour: microsToUsd(VPN_PRICE_MICROS_PER_HOUR),
  };
}

// Made again as an object of its own, so its $id and title come first as in every other schema.
export const VpnPeerView = Type.Object(
  {
    ...Type.Omit(VpnPeerRecord, ['account_id']).properties,
    // The gateway's figures (docs/api.md, "Peers"): from the real gateway, or the simulator's.
    last_handshake_at: Nullable(Type.String({ format: 'date-time' })),
    received_bytes: Type.Integer(),
    sent_bytes: Type.Integer(),
  },
  { $id: 'VpnPeer', title: 'VpnPeer' },
);
export type PeerView = Static<typeof VpnPeerView>;
const peerFields = viewOf(VpnPeerView);

/** The gateway's figures, which a peer just added or removed is shown without. */
export const PEER_STATS = ['last_handshake_at', 'received_bytes', 'sent_bytes'] as const;
/** A peer as it is recorded, without the gateway's figures. */
export const peerRecordView = viewOf(Type.Omit(VpnPeerView, PEER_STATS));

/** A peer with the gateway's figures for it (none: no handshake yet, nothing moved). */
export function peerView(record: VpnPeer, stats?: GatewayPeerStats): PeerView {
  return {
    ...peerFields(record),
    last_handshake_at: stats?.lastHandshakeAt?.toISOString() ?? null,
    received_bytes: stats?.receivedBytes ?? 0,
    sent_bytes: stats?.sentBytes ?? 0,
  };
}
