/**
 * Webhook rules as pure functions (docs/design.md, "Events and webhooks"): which events a
 * subscription takes, the exact bytes that are signed and how, the retry schedule, and which addresses a
 * receiver may not have (the SSRF rule, checked when a subscription is saved and again at connect time).
 */
import { createHmac } from 'node:crypto';
import { BlockList, isIP } from 'node:net';
import type { Actor } from '../../platform/events/actor.js';
import type { EventCatalogue } from '../../platform/events/catalog.js';

/** Attempts a delivery gets in all: the first and 11 retries, about three days at the default base. */
export const MAX_DELIVERY_ATTEMPTS = 12;
/** A receiver that answers nothing within this long has failed the attempt. */
export const DELIVERY_TIMEOUT_MS = 10_000;
/** How much of a receiver's answer is read and kept in the delivery log. */
export const RESPONSE_EXCERPT_BYTES = 64 * 1024;
export const RESPONSE_EXCERPT_KEPT_CHARS = 1024;
/** A subscription whose deliveries have all failed for this long is disabled. */
export const DISABLE_AFTER_FAILING_MS = 3 * 24 * 3600 * 1000;
export const MIN_SECRET_LENGTH = 16;
/** How long the old secret keeps signing after a rotation, unless the request says otherwise. */
export const DEFAULT_ROTATION_OVERLAP_SECONDS = 24 * 3600;
export const MAX_ROTATION_OVERLAP_SECONDS = 7 * 24 * 3600;

/** What `events` may hold: `*`, a catalogue type, or a family of them (`instance.*`). */
export function eventPatterns(catalogue: EventCatalogue): string[] {
  return ['*', ...catalogue.types, ...catalogue.families.map((f) => `${f}.*`)];
}

export function isEventPattern(catalogue: EventCatalogue, pattern: string): boolean {
  if (pattern === '*' || catalogue.isEventType(pattern)) return true;
  return pattern.endsWith('.*') && catalogue.families.includes(pattern.slice(0, -2));
}

export function matchesEvent(patterns: readonly string[], type: string): boolean {
  return patterns.some(
    (pattern) =>
      pattern === '*' ||
      pattern === type ||
      (pattern.endsWith('.*') && type.startsWith(pattern.slice(0, -1))),
  );
}

/** The delay before retry number `attemptsMade` (1 after the first failure): the base, doubling. */
export function retryDelayMs(attemptsMade: number, baseSeconds: number): number {
  return baseSeconds * 1000 * 2 ** (attemptsMade - 1);
}

export interface DeliveredEvent {
  id: string;
  type: string;
  timestamp: string;
  data: Record<string, unknown>;
  actor: Actor;
}

const hmac = (secret: string, text: string) => createHmac('sha256', secret).update(text, 'utf8');

/** `sha256=` + lowercase hex HMAC-SHA256 of `text`, keyed with the secret's UTF-8 bytes. */
export function signatureOf(secret: string, text: string): string {
  return `sha256=${hmac(secret, text).digest('hex')}`;
}

/**
 * The delivery body: the event with its `signature`, computed over exactly
 * `JSON.stringify({id, type, timestamp, data})` (compact, keys in that order), which is the body without
 * its signature field. The current secret signs it.
 *
 * The actor rides in `data` (its last field), not beside it: a field beside `data` would either sit
 * outside the signature or break the rule that it signs the body without itself, which receivers verify
 * by; inside `data` it is signed like the rest.
 */
export function deliveryBody(event: DeliveredEvent, secret: string): string {
  const unsigned = {
    id: event.id,
    type: event.type,
    timestamp: event.timestamp,
    data: { ...event.data, actor: event.actor },
  };
  return JSON.stringify({ ...unsigned, signature: signatureOf(secret, JSON.stringify(unsigned)) });
}

/** `X-Nimbus-Signature`: over the raw body (as GitHub does), one per live secret, comma-separated. */
export function headerSignature(secrets: readonly string[], body: string): string {
  return secrets.map((secret) => signatureOf(secret, body)).join(',');
}

/**
 * `webhook-signature` of the Standard Webhooks scheme: `v1,` + base64 HMAC-SHA256 over
 * `<webhook-id>.<webhook-timestamp>.<body>`, one per live secret, space-separated.
 */
export function standardSignature(
  secrets: readonly string[],
  messageId: string,
  timestampSeconds: number,
  body: string,
): string {
  return secrets
    .map((secret) => `v1,${hmac(secret, `${messageId}.${timestampSeconds}.${body}`).digest('base64')}`)
    .join(' ');
}

const FORBIDDEN = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8], // "this" network, unspecified
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, with the cloud metadata address 169.254.169.254
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15], // benchmarking
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, and broadcast
] as const) {
  FORBIDDEN.addSubnet(network, prefix, 'ipv4');
}
/**
 * IPv6 ranges refused whatever follows the prefix. The forms that carry an IPv4 address a translator or
 * relay would reach (embeddedIpv4) are judged by that address instead, before these.
 */
for (const [network, prefix] of [
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated, still routed by some stacks)
  ['ff00::', 8], // multicast
  ['100::', 64], // discard-only
  // NAT64 local use (RFC 8215): a site's own translator, not globally reachable, and where in the address
  // it carries the IPv4 one is the site's choice (RFC 6052 allows six layouts), so it cannot be judged.
  ['64:ff9b:1::', 48],
  // Teredo: the client's IPv4 address is carried bit-inverted and the relay is the client's choice; a
  // receiver behind Teredo in 2020s practice does not exist, so the whole prefix is refused.
  ['2001::', 32],
] as const) {
  FORBIDDEN.addSubnet(network, prefix, 'ipv6');
}

/** The eight 16-bit words of an IPv6 address (null: not one), read from its canonical form. */
function ipv6Words(address: string): number[] | null {
  let canonical: string;
  try {
    // The URL parser validates and writes the address compressed, in hex only (no dotted tail, no zone).
    canonical = new URL(`http://[${address}]/`).hostname.slice(1, -1);
  } catch {
    return null;
  }
  const [head = '', tail] = canonical.split('::');
  const words = (part: string) =>
    part === '' ? [] : part.split(':').map((word) => Number.parseInt(word, 16));
  if (tail === undefined) return words(head);
  const [before, after] = [words(head), words(tail)];
  return [...before, ...new Array<number>(8 - before.length - after.length).fill(0), ...after];
}

const dotted = (high: number, low: number) => `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`;

/**
 * The IPv4 address an IPv6 one stands for, where a host, translator or relay would take it to that
 * address: IPv4-compatible `::a.b.c.d` (with `::` and `::1`), IPv4-mapped `::ffff:a.b.c.d`,
 * IPv4-translated `::ffff:0:a.b.c.d` (RFC 2765), NAT64's well-known prefix `64:ff9b::/96` (RFC 6052)
 * and 6to4 `2002:AABB:CCDD::/48` (RFC 3056). Null for any other address.
 */
export function embeddedIpv4(words: readonly number[]): string | null {
  const [w0, w1, w2, w3, w4, w5, w6 = 0, w7 = 0] = words;
  const zeroUpTo = (end: number) => words.slice(0, end).every((word) => word === 0);
  if (zeroUpTo(5) && (w5 === 0 || w5 === 0xffff)) return dotted(w6, w7);
  if (zeroUpTo(4) && w4 === 0xffff && w5 === 0) return dotted(w6, w7);
  if (w0 === 0x64 && w1 === 0xff9b && w2 === 0 && w3 === 0 && w4 === 0 && w5 === 0) return dotted(w6, w7);
  if (w0 === 0x2002) return dotted(w1 ?? 0, w2 ?? 0);
  return null;
}

/**
 * Whether a receiver may be at this address: public unicast only. An IPv6 address that carries an IPv4
 * one (embeddedIpv4) gets the IPv4 address's verdict; anything that is not an address is refused.
 */
export function isForbiddenAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return FORBIDDEN.check(address, 'ipv4');
  if (family === 0) return true;
  const words = ipv6Words(address);
  if (words === null || words.length !== 8) return true;
  const ipv4 = embeddedIpv4(words);
  if (ipv4 !== null) return FORBIDDEN.check(ipv4, 'ipv4');
  return FORBIDDEN.check(address, 'ipv6');
}

/** Why a receiver URL is refused before any lookup (null: its form is acceptable). */
export function urlProblem(text: string): string | null {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return 'is not a URL';
  }
  if (url.protocol !== 'https:') return 'must use https://';
  if (url.username !== '' || url.password !== '') return 'must not carry credentials (user:password@)';
  if (url.hostname === '') return 'has no host';
  if (url.hash !== '') return 'must not have a #fragment';
  return null;
}

/** The host part of a URL as a lookup or an address check takes it (IPv6 without brackets). */
export function hostOf(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}
