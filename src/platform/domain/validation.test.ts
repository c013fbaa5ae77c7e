import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  isEmail,
  isMailboxAddress,
  isPrintableName,
  MAX_NAME_LENGTH,
  PRINTABLE_NAME_PATTERN,
} from './validation.js';

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

describe('isMailboxAddress (alert recipients)', () => {
  const chars = (set: string) => fc.constantFrom(...set.split(''));
  const alnum = chars('abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789');
  const atom = fc.string({ unit: chars("abcxyzABC0189+_-!#$%&*/^`{|}~'"), minLength: 1, maxLength: 12 });
  const localPart = fc.array(atom, { minLength: 1, maxLength: 4 }).map((atoms) => atoms.join('.'));
  const label = fc
    .tuple(alnum, fc.string({ unit: chars('abz09-'), maxLength: 20 }), alnum)
    .map(([first, middle, last]) => `${first}${middle}${last}`);
  const tld = fc
    .tuple(fc.string({ unit: chars('abz09'), maxLength: 4 }), chars('abcxyz'))
    .map(([rest, letter]) => `${rest}${letter}`);
  const domain = fc
    .tuple(fc.array(label, { minLength: 1, maxLength: 4 }), tld)
    .map(([labels, top]) => [...labels, top].join('.'));
  const address = fc.tuple(localPart, domain).map(([local, host]) => `${local}@${host}`);

  it('accepts a plain local part at a host name whose top-level domain is not all digits', () => {
    fc.assert(fc.property(address, (value) => isMailboxAddress(value)));
  });

  it('refuses IP literals, dotted IPv4, quoted local parts and encoded words', () => {
    fc.assert(
      fc.property(
        localPart,
        domain,
        fc.ipV4(),
        fc.ipV6(),
        fc.string({ unit: alnum, maxLength: 10 }),
        (local, host, v4, v6, text) => {
          expect(isMailboxAddress(`${local}@[${v4}]`)).toBe(false);
          expect(isMailboxAddress(`${local}@[IPv6:${v6}]`)).toBe(false);
          expect(isMailboxAddress(`${local}@${v4}`)).toBe(false);
          expect(isMailboxAddress(`"${local}"@${host}`)).toBe(false);
          expect(isMailboxAddress(`"${local} x"@${host}`)).toBe(false);
          expect(isMailboxAddress(`=?utf-8?q?${text}?=@${host}`)).toBe(false);
          expect(isMailboxAddress(`${local}=?UTF-8?B?${text}?=@${host}`)).toBe(false);
        },
      ),
    );
  });

  it('refuses an address with a control, space or non-ASCII character put anywhere in it', () => {
    const intruder = fc.oneof(
      fc.integer({ min: 0, max: 0x20 }).map((c) => String.fromCharCode(c)),
      fc.constantFrom(
        '\u007f',
        '\u0085',
        '\u00e9',
        '\u202e',
        '\u200b',
        'ä',
        '😀',
        '(',
        ')',
        ',',
        ';',
        ':',
        '<',
        '>',
        '\\',
        '[',
        ']',
        '"',
      ),
    );
    fc.assert(
      fc.property(address, intruder, fc.nat(), (value, char, at) => {
        const i = at % (value.length + 1);
        expect(isMailboxAddress(`${value.slice(0, i)}${char}${value.slice(i)}`)).toBe(false);
      }),
    );
  });

  it('holds the length limits: 64 before the @, 63 per label, 254 in all', () => {
    fc.assert(
      fc.property(address, (value) => {
        const [local, host] = value.split('@') as [string, string];
        expect(isMailboxAddress(`${'a'.repeat(65)}@${host}`)).toBe(false);
        expect(isMailboxAddress(`${local}@${'b'.repeat(64)}.${host}`)).toBe(false);
        expect(isMailboxAddress(`${local}@${'c'.repeat(63)}.${host}`)).toBe(value.length + 64 <= 254);
        expect(isMailboxAddress(`${local}@${`${'d'.repeat(60)}.`.repeat(5)}${host}`)).toBe(false);
      }),
    );
  });

  it('refuses malformed dots, hyphens and @ signs', () => {
    for (const value of [
      'a@example',
      '@example.com',
      'a@',
      'a@@example.com',
      'a@b@example.com',
      '.a@example.com',
      'a.@example.com',
      'a..b@example.com',
      'a@.example.com',
      'a@example..com',
      'a@example.com.',
      'a@-example.com',
      'a@example-.com',
      'a@example.123',
      'a@exa_mple.com',
    ]) {
      expect(isMailboxAddress(value), value).toBe(false);
    }
    for (const value of [
      'ops+nimbus@example.co.uk',
      'a@xn--bcher-kva.example',
      'first.last@sub-1.example.io',
      'x@1.2.3.example',
    ]) {
      expect(isMailboxAddress(value), value).toBe(true);
    }
  });
});
