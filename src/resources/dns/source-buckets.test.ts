import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SourceBuckets, sourceOf } from './source-buckets.js';

describe('SourceBuckets', () => {
  it('lets a source ask no more than its burst and its rate since, and a quiet one its whole burst', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 200 }),
        fc.integer({ min: 1, max: 50 }),
        fc.array(fc.integer({ min: 0, max: 100 }), { minLength: 1, maxLength: 400 }),
        (perSecond, burst, gapsMs) => {
          let now = 0;
          const buckets = new SourceBuckets({ perSecond, burst, maxSources: 10 }, () => now);
          let allowed = 0;
          for (const gap of gapsMs) {
            now += gap;
            if (buckets.take('192.0.2.1')) allowed += 1;
            expect(allowed).toBeLessThanOrEqual(burst + (now * perSecond) / 1000 + 1e-9);
          }
          // Long enough to refill it, and the bucket has its whole burst again.
          now += Math.ceil((burst / perSecond) * 1000) + 1;
          let again = 0;
          while (buckets.take('192.0.2.1')) again += 1;
          expect(again).toBe(burst);
        },
      ),
    );
  });

  it('keeps the buckets of at most maxSources sources, and sources do not share one', () => {
    fc.assert(
      fc.property(
        fc.array(fc.ipV4(), { maxLength: 300 }),
        fc.integer({ min: 1, max: 50 }),
        (sources, max) => {
          const buckets = new SourceBuckets({ perSecond: 1, burst: 1, maxSources: max }, () => 0);
          for (const source of sources) buckets.take(source);
          expect(buckets.size).toBeLessThanOrEqual(max);
          // A new source always has its burst, however many others are empty.
          expect(buckets.take('198.51.100.77')).toBe(!sources.includes('198.51.100.77'));
        },
      ),
    );
  });
});

describe('sourceOf', () => {
  it('counts IPv4 by address, mapped or not, and IPv6 by /64', () => {
    expect(sourceOf('192.0.2.7')).toBe('192.0.2.7');
    expect(sourceOf('::ffff:192.0.2.7')).toBe('192.0.2.7');
    expect(sourceOf('2001:db8:0:1::5')).toBe('2001:db8:0:1::/64');
    expect(sourceOf('2001:0db8:0000:0001:ffff::1%eth0')).toBe('2001:db8:0:1::/64');
    expect(sourceOf('::1')).toBe('0:0:0:0::/64');
  });

  it('gives two IPv6 addresses one source exactly when their first 64 bits agree', () => {
    fc.assert(
      fc.property(fc.ipV6(), fc.ipV6(), (a, b) => {
        const prefix = (address: string) => expand(address).slice(0, 4).join(':');
        fc.pre(!a.includes('.') && !b.includes('.'));
        expect(sourceOf(a) === sourceOf(b)).toBe(prefix(a) === prefix(b));
      }),
    );
  });
});

/** The eight groups of an IPv6 address, as numbers. */
function expand(address: string): number[] {
  const [head = '', tail = ''] = address.split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = address.includes('::')
    ? [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right]
    : left;
  return groups.map((group) => Number.parseInt(group, 16));
}
