import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH, nestsDeeperThan } from './json-body.js';

/** How deeply arrays and objects nest in a parsed value (a scalar is 0). */
function depthOf(value: unknown): number {
  if (value === null || typeof value !== 'object') return 0;
  const children = Array.isArray(value) ? value : Object.values(value);
  return 1 + Math.max(0, ...children.map(depthOf));
}

describe('nestsDeeperThan', () => {
  it('agrees with the depth of the parsed value, for any JSON text and any limit', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 12 }), fc.integer({ min: 0, max: 14 }), (value, limit) => {
        const text = JSON.stringify(value);
        expect(nestsDeeperThan(text, limit)).toBe(depthOf(JSON.parse(text)) > limit);
      }),
      { numRuns: 500 },
    );
  });

  it('ignores brackets, quotes and backslashes inside strings', () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom('[', ']', '{', '}', '"', '\\', 'a') }), (text) => {
        expect(nestsDeeperThan(JSON.stringify({ s: text }), 1)).toBe(false);
        expect(nestsDeeperThan(JSON.stringify([[text]]), 1)).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  it('refuses the attack from issue 20 without looking past the limit', () => {
    const text = `${'['.repeat(10_000)}${']'.repeat(10_000)}`;
    expect(nestsDeeperThan(text, MAX_JSON_DEPTH)).toBe(true);
    expect(nestsDeeperThan(`${'['.repeat(64)}${']'.repeat(64)}`, MAX_JSON_DEPTH)).toBe(false);
  });
});
