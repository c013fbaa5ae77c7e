/**
 * IPv4 and IPv6 addresses and CIDR blocks as firewall rules use them: parsed strictly, held as a family
 * and a bigint, printed canonically (IPv6 as RFC 5952: lowercase, the longest run of two or more zero
 * groups shortened to `::`), and tested for containment. A block whose address has bits set beyond its
 * prefix (`10.0.0.7/8`) is refused rather than silently narrowed, because the writer most likely meant
 * something else than what normalising would keep; the error says which block was probably meant.
 */

export type IpFamily = 4 | 6;

export interface IpAddress {
  family: IpFamily;
  value: bigint;
}

export interface CidrBlock {
  family: IpFamily;
  /** The network address (host bits all zero). */
  network: bigint;
  prefix: number;
}

export class CidrError extends Error {
  constructor(
    message: string,
    /** The block the value probably meant (its network address), for a block with host bits set. */
    readonly suggestion?: string,
  ) {
    super(message);
  }
}

const BITS: Record<IpFamily, number> = { 4: 32, 6: 128 };
const IPV4_PATTERN = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;

function parseIpv4(text: string): bigint | null {
  const match = IPV4_PATTERN.exec(text);
  if (!match) return null;
  let value = 0n;
  for (const octet of match.slice(1, 5)) {
    // Leading zeros are refused: some parsers read them as octal, so "010" is ambiguous.
    if ((octet.length > 1 && octet.startsWith('0')) || Number(octet) > 255) return null;
    value = (value << 8n) | BigInt(octet);
  }
  return value;
}

function parseGroups(part: string): bigint[] | null {
  if (part === '') return [];
  const groups: bigint[] = [];
  for (const group of part.split(':')) {
    if (!/^[0-9a-fA-F]{1,4}$/.test(group)) return null;
    groups.push(BigInt(`0x${group}`));
  }
  return groups;
}

function parseIpv6(text: string): bigint | null {
  let body = text;
  let tail: bigint[] = [];
  // An embedded dotted-quad in the last 32 bits (::ffff:192.0.2.1).
  const lastColon = body.lastIndexOf(':');
  if (lastColon >= 0 && body.slice(lastColon + 1).includes('.')) {
    const v4 = parseIpv4(body.slice(lastColon + 1));
    if (v4 === null) return null;
    tail = [v4 >> 16n, v4 & 0xffffn];
    body = body.slice(0, lastColon + 1);
    if (body.endsWith(':') && !body.endsWith('::')) body = body.slice(0, -1);
  }
  const halves = body.split('::');
  if (halves.length > 2) return null;
  const head = parseGroups(halves[0] as string);
  const rest = halves.length === 2 ? parseGroups(halves[1] as string) : [];
  if (head === null || rest === null) return null;
  const given = head.length + rest.length + tail.length;
  let groups: bigint[];
  if (halves.length === 2) {
    if (given > 7) return null;
    groups = [...head, ...new Array<bigint>(8 - given).fill(0n), ...rest, ...tail];
  } else {
    if (given !== 8) return null;
    groups = [...head, ...tail];
  }
  return groups.reduce((value, group) => (value << 16n) | group, 0n);
}

/** An IPv4 or IPv6 address without a prefix; null when it is neither. */
export function parseIp(text: string): IpAddress | null {
  if (text.includes(':')) {
    const value = parseIpv6(text);
    return value === null ? null : { family: 6, value };
  }
  const value = parseIpv4(text);
  return value === null ? null : { family: 4, value };
}

/**
 * The address a packet from it is: an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, how dual-stack sockets
 * show IPv4 peers) is that IPv4 address, so writing it the other way cannot slip past an IPv4 rule.
 */
export function unmapped(address: IpAddress): IpAddress {
  if (address.family === 6 && address.value >> 32n === 0xffffn) {
    return { family: 4, value: address.value & 0xffffffffn };
  }
  return address;
}

export function formatIp(address: IpAddress): string {
  if (address.family === 4) {
    const v = address.value;
    return [24n, 16n, 8n, 0n].map((shift) => String((v >> shift) & 255n)).join('.');
  }
  const groups = [7n, 6n, 5n, 4n, 3n, 2n, 1n, 0n].map((i) => (address.value >> (i * 16n)) & 0xffffn);
  // RFC 5952: shorten the longest run of two or more zero groups (the first of equal runs).
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0n) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0n) j++;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  const hex = (list: bigint[]) => list.map((g) => g.toString(16)).join(':');
  if (bestStart < 0) return hex(groups);
  return `${hex(groups.slice(0, bestStart))}::${hex(groups.slice(bestStart + bestLength))}`;
}

function mask(family: IpFamily, prefix: number): bigint {
  const bits = BITS[family];
  return ((1n << BigInt(bits)) - 1n) ^ ((1n << BigInt(bits - prefix)) - 1n);
}

/**
 * `a.b.c.d/n`, `x:…:y/n`, or a bare address (one host: /32 or /128). Throws CidrError saying what is
 * wrong; a block with host bits set names the block it probably meant.
 */
export function parseCidrBlock(text: string): CidrBlock {
  const slash = text.indexOf('/');
  const addressText = slash < 0 ? text : text.slice(0, slash);
  const address = parseIp(addressText);
  if (!address) throw new CidrError(`"${addressText}" is not an IPv4 or IPv6 address`);
  const bits = BITS[address.family];
  let prefix = bits;
  if (slash >= 0) {
    const prefixText = text.slice(slash + 1);
    if (!/^(0|[1-9]\d{0,2})$/.test(prefixText) || Number(prefixText) > bits) {
      throw new CidrError(`The prefix length of "${text}" must be 0 to ${bits}`);
    }
    prefix = Number(prefixText);
  }
  const network = address.value & mask(address.family, prefix);
  if (network !== address.value) {
    const meant = formatCidr({ family: address.family, network, prefix });
    throw new CidrError(
      `"${text}" has host bits set beyond its /${prefix} prefix (the bits after the first ${prefix}); did you mean ${meant}?`,
      meant,
    );
  }
  return { family: address.family, network, prefix };
}

export function formatCidr(block: CidrBlock): string {
  return `${formatIp({ family: block.family, value: block.network })}/${block.prefix}`;
}

/** True when the address is inside the block; addresses of the other family never are. */
export function cidrContains(block: CidrBlock, address: IpAddress): boolean {
  return (
    block.family === address.family && (address.value & mask(block.family, block.prefix)) === block.network
  );
}
