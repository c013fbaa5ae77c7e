import { randomBytes } from 'node:crypto';

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
  apiKey: 'key',
  webhook: 'whk',
  event: 'evt',
  delivery: 'dlv',
  invoice: 'inv',
  account: 'acct',
  sshKey: 'sshk',
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

function encodeRandom(length: number): string {
  const bytes = randomBytes(length);
  let out = '';
  for (const byte of bytes) out += CROCKFORD[byte % 32];
  return out;
}

export function newId(kind: IdKind, at: Date = new Date()): string {
  return `${ID_PREFIXES[kind]}_${encodeTime(at.getTime())}${encodeRandom(16)}`;
}
