/** Webhook rules: event patterns, the signed bytes, the retry schedule and the SSRF address rule. */
import { createHmac } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EVENT_CATALOGUE } from '../../resources.js';
import {
  deliveryBody,
  headerSignature,
  isEventPattern,
  isForbiddenAddress,
  matchesEvent,
  retryDelayMs,
  standardSignature,
  urlProblem,
} from './rules.js';

const anyType = fc.constantFrom(...EVENT_CATALOGUE.types);

describe('event patterns', () => {
  it('* matches every type; a type matches itself only; a family matches exactly its own types', () => {
    fc.assert(
      fc.property(anyType, anyType, fc.constantFrom(...EVENT_CATALOGUE.families), (type, other, family) => {
        expect(matchesEvent(['*'], type)).toBe(true);
        expect(matchesEvent([other], type)).toBe(other === type);
        expect(matchesEvent([`${family}.*`], type)).toBe(type.split('.')[0] === family);
        expect(matchesEvent([], type)).toBe(false);
      }),
    );
  });

  it('api_key.* does not take a type of another family that starts alike', () => {
    expect(matchesEvent(['api_key.*'], 'api_keys.created')).toBe(false);
    expect(matchesEvent(['instance.*'], 'instance_x.created')).toBe(false);
  });

  it('accepts *, catalogue types and their families only', () => {
    for (const pattern of ['*', 'instance.created', 'instance.*', 'webhook.test']) {
      expect(isEventPattern(EVENT_CATALOGUE, pattern)).toBe(true);
    }
    for (const pattern of ['instance.exploded', 'instances.*', '*.*', 'instance.', '', 'INSTANCE.created']) {
      expect(isEventPattern(EVENT_CATALOGUE, pattern)).toBe(false);
    }
  });
});

describe('signatures', () => {
  const event = {
    id: 'evt_1',
    type: 'instance.created',
    timestamp: '2026-01-01T00:00:00.000Z',
    data: { a: 'é' },
    actor: { type: 'api_key', id: 'key_1', ip: '203.0.113.4' } as const,
  };

  it('the body field signs exactly the body without it, keys in order, the actor inside data', () => {
    const body = deliveryBody(event, 'secret-0123456789');
    const parsed = JSON.parse(body);
    expect(Object.keys(parsed)).toEqual(['id', 'type', 'timestamp', 'data', 'signature']);
    const unsigned =
      '{"id":"evt_1","type":"instance.created","timestamp":"2026-01-01T00:00:00.000Z",' +
      '"data":{"a":"é","actor":{"type":"api_key","id":"key_1","ip":"203.0.113.4"}}}';
    expect(parsed.signature).toBe(
      `sha256=${createHmac('sha256', 'secret-0123456789').update(unsigned, 'utf8').digest('hex')}`,
    );
  });

  it('the headers carry one signature per live secret, in the order given', () => {
    const header = headerSignature(['new-secret-0123456', 'old-secret-0123456'], 'body');
    expect(header.split(',')).toEqual([
      `sha256=${createHmac('sha256', 'new-secret-0123456').update('body').digest('hex')}`,
      `sha256=${createHmac('sha256', 'old-secret-0123456').update('body').digest('hex')}`,
    ]);
    const standard = standardSignature(
      ['k1-0123456789abcdef', 'k2-0123456789abcdef'],
      'dlv_1',
      1700000000,
      'b',
    );
    expect(standard.split(' ')).toEqual([
      `v1,${createHmac('sha256', 'k1-0123456789abcdef').update('dlv_1.1700000000.b').digest('base64')}`,
      `v1,${createHmac('sha256', 'k2-0123456789abcdef').update('dlv_1.1700000000.b').digest('base64')}`,
    ]);
  });
});

describe('retry schedule', () => {
  it('starts at the base and doubles', () => {
    expect([1, 2, 3, 11].map((n) => retryDelayMs(n, 60))).toEqual([60_000, 120_000, 240_000, 61_440_000]);
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 11 }), fc.integer({ min: 1, max: 3600 }), (n, base) => {
        expect(retryDelayMs(n + 1, base)).toBe(2 * retryDelayMs(n, base));
      }),
    );
  });
});

describe('receiver addresses', () => {
  it.each([
    '127.0.0.1',
    '127.255.0.9',
    '10.0.0.1',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.0.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '224.0.0.1',
    '255.255.255.255',
    '::1',
    '::',
    'fe80::1',
    'fd00:ec2::254',
    'fc00::1',
    '::ffff:127.0.0.1',
    '::ffff:10.0.0.1',
    '64:ff9b::a00:1',
    // IPv4 loopback and private space in every IPv6 form a host, translator or relay maps back to IPv4
    '::7f00:1',
    '::127.0.0.1',
    '::ffff:7f00:1',
    '::ffff:0:7f00:1',
    '::ffff:0:127.0.0.1',
    '64:ff9b::7f00:1',
    '64:ff9b::127.0.0.1',
    '64:ff9b::a9fe:a9fe',
    '2002:7f00:1::',
    '2002:a00:1::1',
    '2002:c0a8:101:1::1',
    // NAT64 local use and Teredo: refused whatever they carry
    '64:ff9b:1::808:808',
    '64:ff9b:1:7f00:1::',
    '2001:0:4136:e378:8000:63bf:3fff:fdd2',
    '2001:0:808:808:0:0:f7f7:f7f7',
    'fe80::1%eth0',
    'fec0::1',
    'not-an-address',
  ])('refuses %s', (address) => {
    expect(isForbiddenAddress(address)).toBe(true);
  });

  it.each([
    '8.8.8.8',
    '1.1.1.1',
    '172.32.0.1',
    '192.169.0.1',
    '2606:4700:4700::1111',
    '::ffff:8.8.4.4',
    '::ffff:808:404',
    '::808:808',
    '::ffff:0:808:808',
    '64:ff9b::808:808',
    '2002:808:808::1',
  ])('allows %s', (address) => {
    expect(isForbiddenAddress(address)).toBe(false);
  });

  it('every IPv4 address in 10/8, 127/8 and 192.168/16 is refused', () => {
    const octet = fc.integer({ min: 0, max: 255 });
    fc.assert(
      fc.property(fc.constantFrom('10', '127'), octet, octet, octet, (a, b, c, d) => {
        expect(isForbiddenAddress(`${a}.${b}.${c}.${d}`)).toBe(true);
      }),
    );
    fc.assert(
      fc.property(octet, octet, (c, d) => {
        expect(isForbiddenAddress(`192.168.${c}.${d}`)).toBe(true);
      }),
    );
  });

  /** Every way of writing an IPv4 address inside an IPv6 one that leads back to the IPv4 address. */
  const EMBEDDINGS: readonly [string, (octets: number[]) => string][] = [
    ['IPv4-compatible, dotted', (o) => `::${o.join('.')}`],
    ['IPv4-compatible, hex', (o) => `::${hex(o)}`],
    ['IPv4-mapped, dotted', (o) => `::ffff:${o.join('.')}`],
    ['IPv4-mapped, hex', (o) => `::ffff:${hex(o)}`],
    ['IPv4-translated', (o) => `::ffff:0:${hex(o)}`],
    ['IPv4-translated, dotted, uncompressed', (o) => `0:0:0:0:ffff:0:${o.join('.')}`],
    ['NAT64 well-known prefix', (o) => `64:ff9b::${hex(o)}`],
    ['NAT64 well-known prefix, dotted', (o) => `64:ff9b::${o.join('.')}`],
    ['6to4', (o) => `2002:${hex(o)}::1`],
    ['6to4, with a subnet and host', (o) => `2002:${hex(o)}:ab:cd:ef:12:34`],
  ];
  function hex([a = 0, b = 0, c = 0, d = 0]: number[]): string {
    return `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const octet = fc.integer({ min: 0, max: 255 });
  /** Loopback, private, link-local, CGNAT and "this network" IPv4 addresses. */
  const nonPublicIpv4 = fc.oneof(
    fc.tuple(fc.constant(127), octet, octet, octet),
    fc.tuple(fc.constant(10), octet, octet, octet),
    fc.tuple(fc.constant(0), octet, octet, octet),
    fc.tuple(fc.constant(172), fc.integer({ min: 16, max: 31 }), octet, octet),
    fc.tuple(fc.constant(192), fc.constant(168), octet, octet),
    fc.tuple(fc.constant(169), fc.constant(254), octet, octet),
    fc.tuple(fc.constant(100), fc.integer({ min: 64, max: 127 }), octet, octet),
  );

  it('refuses every loopback, private and link-local IPv4 address in every IPv6 embedding', () => {
    fc.assert(
      fc.property(nonPublicIpv4, fc.constantFrom(...EMBEDDINGS), (octets, [, embed]) => {
        expect(isForbiddenAddress(octets.join('.'))).toBe(true);
        expect(isForbiddenAddress(embed(octets))).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  it('judges any IPv4 address embedded in IPv6 as it judges the address itself', () => {
    fc.assert(
      fc.property(
        fc.tuple(octet, octet, octet, octet),
        fc.constantFrom(...EMBEDDINGS),
        (octets, [, embed]) => {
          expect(isForbiddenAddress(embed(octets))).toBe(isForbiddenAddress(octets.join('.')));
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('refuses NAT64 local-use and Teredo addresses whatever they carry', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 0xffff }), { minLength: 5, maxLength: 6 }), (rest) => {
        const tail = rest.map((word) => word.toString(16));
        expect(isForbiddenAddress(['64', 'ff9b', '1', ...tail.slice(0, 5)].join(':'))).toBe(true);
        expect(isForbiddenAddress(['2001', '0', ...tail, '0'].slice(0, 8).join(':'))).toBe(true);
      }),
    );
  });

  it('URLs: https only, no credentials, no fragment', () => {
    expect(urlProblem('https://hooks.example.com/x?y=1')).toBeNull();
    expect(urlProblem('http://hooks.example.com/')).toMatch(/https/);
    expect(urlProblem('https://a:b@hooks.example.com/')).toMatch(/credentials/);
    expect(urlProblem('https://hooks.example.com/#x')).toMatch(/fragment/);
    expect(urlProblem('hooks.example.com')).toMatch(/not a URL/);
  });
});
