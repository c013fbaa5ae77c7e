import { randomFillSync } from 'node:crypto';

/**
 * Identifiers are a type prefix plus 10 characters of base32 time (milliseconds) and 16 of randomness,
 * so they sort by creation time and cannot be guessed.
 */
export const ID_PREFIXES = {
  instance: 'ins',
  volume: 'vol',
  snapshot: 'snap',
  firewallRule: 'fwr',
  vpn: 'vpn',
  vpnPeer: 'vpnp',
  apiKey: 'key',
  webhook: 'whk',
  alert: 'alr',
  incident: 'inc',
  event: 'evt',
  delivery: 'dlv',
  invoice: 'inv',
  account: 'acct',
  sshKey: 'sshk',
  publicIp: 'ip',
  job: 'job',
  request: 'req',
} as const;

export type IdKind = keyof typeof ID_PREFIXES;

const CROCKFORD = '0123456789abcdefghjkmnpqrstvwxyz';

function encodeTime(ms: number): string {
  let out = '';
  let rest = ms;
  for (let i = 0; i < 10; i++) {
    out = CROCKFORD[rest % 32] + out;
    rest = Math.floor(rest / 32);
  }
  return out;
}

// Random characters are drawn from a pool refilled from the CSPRNG 4 KiB at a time: every request gets an
// id, and one randomBytes call (and Buffer) per id was a visible share of the request path. The bytes
// are the same CSPRNG output either way; each is used once. (Node's randomUUID pools the same way.)
// Each refill is turned into Crockford characters in place, so an id's random part is one slice of it.
const CROCKFORD_CODES = Buffer.from(CROCKFORD, 'latin1');
const pool = Buffer.alloc(4096);
let poolOffset = pool.length;

function encodeRandom(length: number): string {
  if (poolOffset + length > pool.length) {
    randomFillSync(pool);
    for (let i = 0; i < pool.length; i++) pool[i] = CROCKFORD_CODES[(pool[i] as number) % 32] as number;
    poolOffset = 0;
  }
  const out = pool.toString('latin1', poolOffset, poolOffset + length);
  poolOffset += length;
  return out;
}

// Every request gets an id, and many share a millisecond: the time part is encoded once per millisecond.
let encodedAtMs = Number.NaN;
let encodedTime = '';

function timePart(ms: number): string {
  if (ms !== encodedAtMs) {
    encodedTime = encodeTime(ms);
    encodedAtMs = ms;
  }
  return encodedTime;
}

export function newId(kind: IdKind, at?: Date): string {
  return `${ID_PREFIXES[kind]}_${timePart(at === undefined ? Date.now() : at.getTime())}${encodeRandom(16)}`;
}
