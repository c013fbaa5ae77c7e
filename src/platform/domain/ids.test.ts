import { describe, expect, it } from 'vitest';
import { newId } from './ids.js';

const ID = /^ins_[0-9a-hjkmnp-tv-z]{26}$/;

describe('newId', () => {
  it('is the prefix and 26 Crockford base32 characters, unique across many pool refills', () => {
    const ids = Array.from({ length: 20_000 }, () => newId('instance'));
    for (const id of ids) expect(id).toMatch(ID);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('sorts by creation time: the first ten characters encode the millisecond', () => {
    const earlier = newId('instance', new Date('2026-01-01T00:00:00.000Z'));
    const later = newId('instance', new Date('2026-01-01T00:00:00.001Z'));
    expect(earlier < later).toBe(true);
    expect(earlier.slice(4, 14)).not.toBe(later.slice(4, 14));
    expect(newId('instance', new Date('2026-01-01T00:00:00.000Z')).slice(4, 14)).toBe(earlier.slice(4, 14));
  });

  it('uses every character of the alphabet in its random part', () => {
    const seen = new Set(
      Array.from({ length: 2_000 }, () => newId('request').slice(14))
        .join('')
        .split(''),
    );
    expect(seen.size).toBe(32);
  });
});
