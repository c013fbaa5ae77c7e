/** Properties of the /v2 list cursors: they round-trip, and any change to one, or another key, is refused. */
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type CursorContent, CursorRefused, CursorSigner, filtersDigest } from './cursors.js';

const content: fc.Arbitrary<CursorContent> = fc.record({
  sort: fc.constantFrom('created_at', 'name', 'last_used_at', 'size_gb'),
  order: fc.constantFrom('asc' as const, 'desc' as const),
  direction: fc.constantFrom('next' as const, 'prev' as const),
  after: fc.record({
    value: fc.oneof(
      fc.constant(null),
      fc.string({ maxLength: 80 }),
      fc.integer(),
      fc.double({ noNaN: true, noDefaultInfinity: true }),
    ),
    id: fc.string({ minLength: 1, maxLength: 40 }),
  }),
  filters: fc.string({ minLength: 1, maxLength: 22 }),
});

const signer = new CursorSigner(randomBytes(32));

function refusal(open: () => unknown): CursorRefused | undefined {
  try {
    open();
  } catch (error) {
    if (error instanceof CursorRefused) return error;
    throw error;
  }
  return undefined;
}

describe('list cursors', () => {
  it('open what they sealed, exactly', () => {
    fc.assert(
      fc.property(content, (made) => {
        const opened = signer.open(signer.seal(made));
        // -0 travels through JSON as 0, which compares the same in SQL.
        expect(opened).toEqual({
          ...made,
          after: { ...made.after, value: Object.is(made.after.value, -0) ? 0 : made.after.value },
        });
      }),
    );
  });

  it('are URL-safe without escaping', () => {
    fc.assert(
      fc.property(content, (made) => {
        expect(signer.seal(made)).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
      }),
    );
  });

  it('refuse any one character changed, removed or added', () => {
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.';
    fc.assert(
      fc.property(
        content,
        fc.nat(),
        fc.constantFrom(...alphabet),
        fc.constantFrom('change', 'remove', 'add'),
        (made, at, char, edit) => {
          const cursor = signer.seal(made);
          const i = at % cursor.length;
          const altered =
            edit === 'change'
              ? cursor.slice(0, i) + char + cursor.slice(i + 1)
              : edit === 'remove'
                ? cursor.slice(0, i) + cursor.slice(i + 1)
                : cursor.slice(0, i) + char + cursor.slice(i);
          fc.pre(altered !== cursor);
          expect(refusal(() => signer.open(altered))).toBeInstanceOf(CursorRefused);
        },
      ),
    );
  });

  it('refuse cursors sealed with another key, and text that is no cursor', () => {
    const other = new CursorSigner(randomBytes(32));
    fc.assert(
      fc.property(content, (made) => {
        expect(refusal(() => signer.open(other.seal(made)))?.reason).toBe('forged');
      }),
    );
    fc.assert(
      fc.property(fc.string({ maxLength: 200 }), (text) => {
        expect(refusal(() => signer.open(text))).toBeDefined();
      }),
    );
  });

  it('digest filters independently of key order, and tell apart any change', () => {
    fc.assert(
      fc.property(
        fc.dictionary(
          fc.string({ maxLength: 8 }),
          fc.oneof(fc.string(), fc.integer(), fc.array(fc.string())),
        ),
        (filters) => {
          const reordered = Object.fromEntries(Object.entries(filters).reverse());
          expect(filtersDigest(reordered)).toBe(filtersDigest(filters));
          expect(filtersDigest({ ...filters, extra_filter_name: 'x' })).not.toBe(filtersDigest(filters));
        },
      ),
    );
    expect(filtersDigest({ status: undefined })).toBe(filtersDigest({}));
    expect(filtersDigest({ tag: ['a:1', 'b:2'] })).not.toBe(filtersDigest({ tag: ['b:2', 'a:1'] }));
  });
});
