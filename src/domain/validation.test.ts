import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isEmail, isPrintableName, MAX_NAME_LENGTH, PRINTABLE_NAME_PATTERN } from './validation.js';

const unicodeRule = /^[^\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]$/u;

describe('the printable-name rule', () => {
  it('the JSON Schema pattern matches the rule for every BMP character, with or without the u flag', () => {
    const withFlag = new RegExp(PRINTABLE_NAME_PATTERN, 'u');
    const withoutFlag = new RegExp(PRINTABLE_NAME_PATTERN);
    for (let cp = 0; cp <= 0xffff; cp++) {
      if (cp >= 0xd800 && cp <= 0xdfff) continue;
      const char = String.fromCodePoint(cp);
      const expected = unicodeRule.test(char);
      // Inside a name, so white space (allowed inside, not at the ends) is judged as a character.
      expect(withFlag.test(`a${char}a`), cp.toString(16)).toBe(expected);
      expect(withoutFlag.test(`a${char}a`), cp.toString(16)).toBe(expected);
      expect(isPrintableName(`a${char}a`), cp.toString(16)).toBe(expected);
    }
  });

  const printable = fc.string({ unit: 'grapheme', minLength: 1, maxLength: 20 }).filter(isPrintableName);
  const forbidden = fc.constantFrom(
    '\u0000',
    '\u001b',
    '\n',
    '\r',
    '\t',
    '\u007f',
    '\u0085',
    '\u202e',
    '\u200b',
    '\u2028',
    '\u2029',
    '\ufeff',
    '\u{e0041}',
    '\ud800',
  );

  it('refuses a printable name with a forbidden character put anywhere in it', () => {
    fc.assert(
      fc.property(printable, forbidden, fc.nat(), (name, bad, at) => {
        const chars = [...name];
        const i = at % (chars.length + 1);
        expect(isPrintableName([...chars.slice(0, i), bad, ...chars.slice(i)].join(''))).toBe(false);
      }),
    );
  });

  it('refuses white space at either end, but not inside', () => {
    fc.assert(
      fc.property(printable, fc.constantFrom(' ', '\u00a0', '\u3000'), (name, space) => {
        expect(isPrintableName(`${space}${name}`)).toBe(false);
        expect(isPrintableName(`${name}${space}`)).toBe(false);
        if (name.length + 2 <= MAX_NAME_LENGTH) expect(isPrintableName(`${name}${space}${name}`)).toBe(true);
      }),
    );
  });

  it('counts characters, not UTF-16 units, up to the limit', () => {
    expect(isPrintableName('🚀'.repeat(MAX_NAME_LENGTH))).toBe(true);
    expect(isPrintableName('🚀'.repeat(MAX_NAME_LENGTH + 1))).toBe(false);
    expect(isPrintableName('')).toBe(false);
  });
});

describe('isEmail', () => {
  it.each(['a\u0000@example.com', 'a@exa\u001bmple.com', 'a b@example.com', 'a@example', 'a@@b.c'])(
    'refuses %j',
    (email) => {
      expect(isEmail(email)).toBe(false);
    },
  );

  it('accepts ordinary addresses', () => {
    expect(isEmail('ops+nimbus@example.co.uk')).toBe(true);
  });
});
