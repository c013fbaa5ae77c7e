/** The history's timestamp formatter writes exactly what toISOString() writes, for any time. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isoFormatter } from './metrics.js';

describe('isoFormatter', () => {
  it('matches toISOString for whole seconds and any millisecond, asked once or twice', () => {
    const format = isoFormatter();
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 4_102_444_800 }), fc.boolean(), (seconds, withMs) => {
        const ms = seconds * 1000 + (withMs ? seconds % 997 : 0);
        expect(format(ms)).toBe(new Date(ms).toISOString());
        expect(format(ms)).toBe(new Date(ms).toISOString());
      }),
    );
  });
});
