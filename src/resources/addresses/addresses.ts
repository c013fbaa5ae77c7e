/**
 * IPv4 arithmetic and the address plan: public addresses come from a pool per region (documentation
 * ranges by default, so a simulated address can never collide with a real host); private addresses from
 * a per-account network per region. MAC addresses are locally administered (02:…), derived from the
 * instance id, so they are stable without being stored twice.
 *
 * This folder is the address management that instances and VPN gateways share (the plan here, the
 * allocation in address-store.ts and public-ip-store.ts); it imports no other resource, so both can use it.
 */
import { createHash } from 'node:crypto';

export function ipToInt(ip: string): number {
  const parts = ip.split('.').map(Number);
  return (((parts[0] ?? 0) << 24) | ((parts[1] ?? 0) << 16) | ((parts[2] ?? 0) << 8) | (parts[3] ?? 0)) >>> 0;
}

export function intToIp(value: number): string {
  return [value >>> 24, (value >>> 16) & 255, (value >>> 8) & 255, value & 255].join('.');
}

export interface Cidr {
  cidr: string;
  /** First and last address handed out: the network address, the gateway (.1) and broadcast are kept back. */
  first: number;
  last: number;
}

const CIDR_PATTERN = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\/(\d{1,2})$/;

export function parseCidr(cidr: string): Cidr {
  const match = CIDR_PATTERN.exec(cidr.trim());
  const bits = Number(match?.[5]);
  if (!match || match.slice(1, 5).some((octet) => Number(octet) > 255) || bits < 8 || bits > 30) {
    throw new Error(`"${cidr}" is not an IPv4 CIDR block between /8 and /30`);
  }
  const size = 2 ** (32 - bits);
  const network = Math.floor(ipToInt(match.slice(1, 5).join('.')) / size) * size;
  return { cidr: `${intToIp(network)}/${bits}`, first: network + 2, last: network + size - 2 };
}

/** The lowest address of the block not in `used`; null when the block is full. */
export function lowestFree(block: Cidr, used: Iterable<string>): string | null {
  const taken = new Set<number>();
  for (const ip of used) taken.add(ipToInt(ip));
  for (let candidate = block.first; candidate <= block.last; candidate++) {
    if (!taken.has(candidate)) return intToIp(candidate);
  }
  return null;
}

export const DEFAULT_PUBLIC_POOLS: Record<string, string> = {
  'us-east-1': '203.0.113.0/24',
  'us-west-2': '198.51.100.0/24',
  'eu-central-1': '192.0.2.0/25',
  'ap-northeast-1': '192.0.2.128/25',
};

/** Each account's private network in a region; accounts' networks are isolated, so they may overlap. */
export const PRIVATE_NETWORKS: Record<string, string> = {
  'us-east-1': '10.10.0.0/16',
  'us-west-2': '10.20.0.0/16',
  'eu-central-1': '10.30.0.0/16',
  'ap-northeast-1': '10.40.0.0/16',
};

export function macAddressFor(instanceId: string): string {
  const digest = createHash('sha256').update(instanceId).digest();
  const octets = [0x02, digest[0], digest[1], digest[2], digest[3], digest[4]] as number[];
  return octets.map((o) => o.toString(16).padStart(2, '0')).join(':');
}
