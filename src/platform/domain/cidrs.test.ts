/** CIDR parsing and containment, IPv4 and IPv6, as properties over any address and prefix. */
import { isIPv6 } from 'node:net';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type CidrBlock,
  CidrError,
  cidrContains,
  formatCidr,
  formatIp,
  type IpFamily,
  parseCidrBlock,
  parseIp,
  unmapped,
} from './cidrs.js';

const BITS = { 4: 32, 6: 128 } as const;
const address = (family: IpFamily) =>
  fc.bigInt({ min: 0n, max: (1n << BigInt(BITS[family])) - 1n }).map((value) => ({ family, value }));
const anyAddress = fc.oneof(address(4), address(6));
const hostMask = (family: IpFamily, prefix: number) => (1n << BigInt(BITS[family] - prefix)) - 1n;

/** A block made from any address by clearing its host bits. */
const block = (family: IpFamily): fc.Arbitrary<CidrBlock> =>
  fc
    .tuple(address(family), fc.integer({ min: 0, max: BITS[family] }))
    .map(([a, prefix]) => ({ family, prefix, network: a.value & ~hostMask(family, prefix) }));
const anyBlock = fc.oneof(block(4), block(6));

describe('addresses', () => {
  it('print and parse back to the same address, IPv6 in the form node:net accepts', () => {
    fc.assert(
      fc.property(anyAddress, (a) => {
        const text = formatIp(a);
        expect(parseIp(text)).toEqual(a);
        if (a.family === 6) expect(isIPv6(text)).toBe(true);
      }),
    );
  });

  it('IPv6 is printed as RFC 5952 says', () => {
    expect(formatIp(parseIp('2001:0db8:0000:0000:0000:0000:0000:0001') as never)).toBe('2001:db8::1');
    expect(formatIp(parseIp('2001:db8:0:1:0:0:0:1') as never)).toBe('2001:db8:0:1::1');
    expect(formatIp(parseIp('2001:db8:0:0:1:0:0:1') as never)).toBe('2001:db8::1:0:0:1');
    expect(formatIp(parseIp('2001:db8:0:1:1:1:1:1') as never)).toBe('2001:db8:0:1:1:1:1:1');
    expect(formatIp(parseIp('::') as never)).toBe('::');
    expect(formatIp(parseIp('::ffff:192.0.2.1') as never)).toBe('::ffff:c000:201');
  });

  it.each([
    '256.1.1.1',
    '1.2.3',
    '01.2.3.4',
    '1.2.3.4.5',
    ':::',
    '1::2::3',
    '1:2:3:4:5:6:7:8:9',
    '1:2:3:4:5:6:7',
    'g::1',
    '',
    'localhost',
  ])('%j is not an address', (text) => {
    expect(parseIp(text)).toBeNull();
  });

  it('an IPv4-mapped IPv6 address is its IPv4 address for matching', () => {
    fc.assert(
      fc.property(address(4), (v4) => {
        const mapped = parseIp(`::ffff:${formatIp(v4)}`);
        expect(mapped && unmapped(mapped)).toEqual(v4);
      }),
    );
  });
});

describe('CIDR blocks', () => {
  it('print and parse back to the same block', () => {
    fc.assert(
      fc.property(anyBlock, (b) => {
        expect(parseCidrBlock(formatCidr(b))).toEqual(b);
      }),
    );
  });

  it('contain exactly the addresses that share their first prefix bits', () => {
    fc.assert(
      fc.property(anyBlock, fc.bigInt({ min: 0n, max: (1n << 128n) - 1n }), (b, raw) => {
        const host = raw & hostMask(b.family, b.prefix);
        expect(cidrContains(b, { family: b.family, value: b.network | host })).toBe(true);
        // Flip one network bit: outside (a /0 has none to flip).
        if (b.prefix > 0) {
          const bit = 1n << BigInt(BITS[b.family] - 1 - Number(raw % BigInt(b.prefix)));
          expect(cidrContains(b, { family: b.family, value: (b.network | host) ^ bit })).toBe(false);
        }
      }),
    );
  });

  it('never contain an address of the other family', () => {
    fc.assert(
      fc.property(anyBlock, anyAddress, (b, a) => {
        if (a.family !== b.family) expect(cidrContains(b, a)).toBe(false);
      }),
    );
  });

  it('with host bits set are refused, naming the block meant', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.tuple(address(4), fc.integer({ min: 0, max: 31 })),
          fc.tuple(address(6), fc.integer({ min: 0, max: 127 })),
        ),
        ([a, prefix]) => {
          fc.pre((a.value & hostMask(a.family, prefix)) !== 0n);
          const text = `${formatIp(a)}/${prefix}`;
          const meant = formatCidr({
            family: a.family,
            prefix,
            network: a.value & ~hostMask(a.family, prefix),
          });
          expect(() => parseCidrBlock(text)).toThrow(CidrError);
          try {
            parseCidrBlock(text);
          } catch (error) {
            expect((error as CidrError).suggestion).toBe(meant);
          }
        },
      ),
    );
    expect(() => parseCidrBlock('10.0.0.7/8')).toThrow(/did you mean 10\.0\.0\.0\/8/);
  });

  it('a bare address is one host', () => {
    expect(formatCidr(parseCidrBlock('198.51.100.7'))).toBe('198.51.100.7/32');
    expect(formatCidr(parseCidrBlock('2001:DB8::7'))).toBe('2001:db8::7/128');
  });

  it.each(['10.0.0.0/33', '::/129', '10.0.0.0/', '10.0.0.0/08', '10.0.0.0/-1', '10.0.0.0/8/8', 'nope/8'])(
    '%j is refused',
    (text) => {
      expect(() => parseCidrBlock(text)).toThrow(CidrError);
    },
  );
});
