/**
 * VPNs as the services see them (the store's records, decoded), and the pure rules of their addresses:
 * the tunnel network clients get addresses from, the routes they are given, and how a peer's address is
 * chosen. WireGuard keys and configuration text are in wireguard.ts.
 */

import { type Static, Type } from '@sinclair/typebox';
import { StringEnum, Timestamp } from '../../platform/http/schemas.js';
import { intToIp, ipToInt, PRIVATE_NETWORKS } from '../addresses/addresses.js';
import { VPN_STATUSES } from './states.js';

/** The UDP port every gateway listens on (WireGuard's usual one). */
export const VPN_PORT = 51820;
/** A VPN's client network when none is given: carrier-grade NAT space, clear of every private network. */
export const DEFAULT_TUNNEL_CIDR = '100.96.0.0/24';
/** Tunnel networks from /16 (65,533 clients) to /29 (5 clients). */
export const TUNNEL_PREFIX = { min: 16, max: 29 } as const;
export const MAX_ALLOWED_CIDRS = 16;
/** Clients behind NAT keep their mapping open with a packet this often. */
export const PERSISTENT_KEEPALIVE_SECONDS = 25;
/** A gateway costs this while it exists (docs/design.md, "Billing"), in micro-USD. */
export const VPN_PRICE_MICROS_PER_HOUR = 50_000;

export const VPN_SORTS = ['created_at', 'name'] as const;
export type VpnSort = (typeof VPN_SORTS)[number];
export const PEER_SORTS = ['created_at', 'name'] as const;
export type PeerSort = (typeof PEER_SORTS)[number];

/**
 * The VPN record: the one declaration of its fields. The store's columns and decoding
 * (resources/vpns/store.ts) and the fields the API view copies (resources/vpns/view.ts) follow from it.
 * Timestamps are ISO 8601 UTC strings, as every record of the store carries them.
 */
export const VpnRecord = Type.Object({
  id: Type.String(),
  account_id: Type.String(),
  name: Type.String(),
  region: Type.String(),
  status: StringEnum(VPN_STATUSES),
  // Never an instance's (resources/addresses/public-ip-store.ts).
  endpoint_ip: Type.String({ description: "The gateway's public IPv4, from the region's pool" }),
  endpoint_port: Type.Integer({ description: 'UDP port' }),
  server_public_key: Type.String({ description: "The gateway's WireGuard public key (base64)" }),
  /** The gateway's private key, sealed (platform/secret-box.ts) and bound to the VPN id. */
  server_private_key_sealed: Type.String(),
  tunnel_cidr: Type.String({ description: 'The network client addresses are taken from' }),
  allowed_cidrs: Type.Array(Type.String()),
  /** Bumped by every write; writers guard on it so two of them cannot both win. */
  version: Type.Integer(),
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type Vpn = Static<typeof VpnRecord>;

export type VpnChanges = Partial<Pick<Vpn, 'name' | 'allowed_cidrs' | 'status'>> & { updated_at?: string };

/** A client of a VPN. */
export const VpnPeerRecord = Type.Object({
  id: Type.String(),
  vpn_id: Type.String(),
  account_id: Type.String(),
  name: Type.String(),
  public_key: Type.String({ description: "The client's WireGuard public key" }),
  address: Type.String({ description: "The client's tunnel address, held until the peer is removed" }),
  // The private key of a generated pair was shown once and is not kept.
  key_generated: Type.Boolean({ description: 'true when the server generated the key pair' }),
  created_at: Timestamp,
});
export type VpnPeer = Static<typeof VpnPeerRecord>;

export interface Ipv4Block {
  /** The network address as an unsigned integer. */
  network: number;
  bits: number;
}

const CIDR = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\/(\d{1,2})$/;

/**
 * A CIDR block as users must write it: four decimal octets, a prefix length within `prefix`, and no host
 * bits set (`10.0.0.1/24` is refused, naming `10.0.0.0/24`). Returns the block or why it is refused.
 */
export function parseBlock(
  text: string,
  prefix: { min: number; max: number } = { min: 0, max: 32 },
): Ipv4Block | { error: string } {
  const match = CIDR.exec(text);
  if (!match || match.slice(1, 5).some((octet) => Number(octet) > 255 || /^0\d/.test(octet))) {
    return { error: `"${text}" is not an IPv4 CIDR block such as 10.0.0.0/24` };
  }
  const bits = Number(match[5]);
  if (bits < prefix.min || bits > prefix.max) {
    return { error: `"${text}" must have a prefix length from /${prefix.min} to /${prefix.max}` };
  }
  const address = ipToInt(match.slice(1, 5).join('.'));
  const network = networkOf(address, bits);
  if (network !== address) {
    return { error: `"${text}" has host bits set; the block is ${formatBlock({ network, bits })}` };
  }
  return { network, bits };
}

function networkOf(address: number, bits: number): number {
  const size = 2 ** (32 - bits);
  return Math.floor(address / size) * size;
}

export function formatBlock(block: Ipv4Block): string {
  return `${intToIp(block.network)}/${block.bits}`;
}

export function blockSize(block: Ipv4Block): number {
  return 2 ** (32 - block.bits);
}

export function overlaps(a: Ipv4Block, b: Ipv4Block): boolean {
  const aEnd = a.network + blockSize(a) - 1;
  const bEnd = b.network + blockSize(b) - 1;
  return a.network <= bEnd && b.network <= aEnd;
}

/** `inner` lies wholly inside `outer`. */
export function contains(outer: Ipv4Block, inner: Ipv4Block): boolean {
  return (
    inner.network >= outer.network && inner.network + blockSize(inner) <= outer.network + blockSize(outer)
  );
}

/** Where a tunnel network may be: private (RFC 1918) or shared carrier-grade NAT (RFC 6598) space. */
export const TUNNEL_SPACES: readonly string[] = [
  '10.0.0.0/8',
  '172.16.0.0/12',
  '192.168.0.0/16',
  '100.64.0.0/10',
];

/** The account's private network in a region, which every VPN of that region routes to. */
export function privateNetworkCidr(region: string): string {
  return PRIVATE_NETWORKS[region] ?? '10.250.0.0/16';
}

/**
 * Why a tunnel network cannot be used in `region`, or null when it can. The
 * checks: the form (parseBlock), private or CGNAT space, clear of the region's private network (extra
 * routes are checked against it by cutsIntoTunnel).
 */
export function tunnelProblem(tunnel: string, region: string): string | null {
  const block = parseBlock(tunnel, TUNNEL_PREFIX);
  if ('error' in block) return block.error;
  const spaces = TUNNEL_SPACES.map((space) => parseBlock(space) as Ipv4Block);
  if (!spaces.some((space) => contains(space, block))) {
    return `${tunnel} must lie in private or shared address space: ${TUNNEL_SPACES.join(', ')}`;
  }
  const privateNetwork = privateNetworkCidr(region);
  if (overlaps(block, parseBlock(privateNetwork) as Ipv4Block)) {
    return `${tunnel} overlaps the private network of ${region} (${privateNetwork}); clients need addresses of their own`;
  }
  return null;
}

/** Why an extra route list is refused (index and reason), or null. */
export function allowedCidrsProblem(allowed: readonly string[]): { index: number; message: string } | null {
  const seen = new Set<string>();
  for (const [index, route] of allowed.entries()) {
    const block = parseBlock(route);
    if ('error' in block) return { index, message: block.error };
    if (seen.has(route)) return { index, message: `${route} is listed twice` };
    seen.add(route);
  }
  return null;
}

/**
 * Whether an extra route leaves the tunnel alone: it may contain the whole tunnel network (a full tunnel
 * such as 0.0.0.0/0) or lie clear of it, but not cut into it (those addresses are the clients').
 */
export function cutsIntoTunnel(route: string, tunnel: string): boolean {
  const a = parseBlock(route);
  const t = parseBlock(tunnel);
  if ('error' in a || 'error' in t) return false;
  return overlaps(a, t) && !contains(a, t);
}

/** What clients are given to route through the VPN: the private network first, then the extra routes. */
export function routesOf(vpn: Pick<Vpn, 'region' | 'allowed_cidrs'>): string[] {
  return [privateNetworkCidr(vpn.region), ...vpn.allowed_cidrs];
}

/** The gateway's own address in the tunnel: the first after the network address. */
export function gatewayAddress(tunnel: string): string {
  const block = parseBlock(tunnel) as Ipv4Block;
  return intToIp(block.network + 1);
}

/**
 * The lowest address of the tunnel not held by a peer: the network address, the gateway (.1) and the
 * broadcast address are never handed out; null when the tunnel is full. An address comes free only when
 * its peer is removed.
 */
export function lowestFreePeerAddress(tunnel: string, held: Iterable<string>): string | null {
  const block = parseBlock(tunnel) as Ipv4Block;
  const taken = new Set<number>();
  for (const address of held) taken.add(ipToInt(address));
  const last = block.network + blockSize(block) - 2;
  for (let candidate = block.network + 2; candidate <= last; candidate++) {
    if (!taken.has(candidate)) return intToIp(candidate);
  }
  return null;
}
