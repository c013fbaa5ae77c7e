import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  allowedValuesAt,
  findNul,
  isDecimalInteger,
  isDecimalNumber,
  validatorCompiler,
} from './validation.js';

function compile(schema: object, httpPart: string) {
  const compiler = validatorCompiler();
  return compiler({ schema, httpPart, method: 'POST', url: '/x' }) as ((data: unknown) => boolean) & {
    errors?: { keyword: string; instancePath: string }[] | null;
  };
}

/** The value a JSON Pointer (as findNul returns it) points at, or the key it ends on. */
function resolve(root: unknown, pointer: string): { value: unknown; key: string | undefined } {
  let current = root;
  let key: string | undefined;
  for (const raw of pointer.split('/').slice(1)) {
    key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    current = (current as Record<string, unknown>)[key];
  }
  return { value: current, key };
}

const withNul = fc.string({ unit: fc.constantFrom('a', '/', '~', '\u0000', 'é') });

describe('findNul', () => {
  it('finds a NUL exactly when the value holds one, and points at a string or key holding it', () => {
    const values = fc.letrec((tie) => ({
      value: fc.oneof(
        { depthSize: 'small' },
        withNul,
        fc.integer(),
        fc.constant(null),
        fc.array(tie('value'), { maxLength: 4 }),
        fc.dictionary(withNul, tie('value'), { maxKeys: 4 }),
      ),
    })).value;
    fc.assert(
      fc.property(values, (value) => {
        const at = findNul(value);
        expect(at === null).toBe(!JSON.stringify(value).includes('\\u0000'));
        if (at !== null) {
          const { value: found, key } = resolve(value, at);
          expect((typeof found === 'string' && found.includes('\u0000')) || key?.includes('\u0000')).toBe(
            true,
          );
        }
      }),
      { numRuns: 500 },
    );
  });
});

describe('decimal query numbers', () => {
  it('accepts every safe integer of at most 15 digits as it is written', () => {
    fc.assert(
      fc.property(fc.integer({ min: -999_999_999_999_999, max: 999_999_999_999_999 }), (n) => {
        expect(isDecimalInteger(String(n))).toBe(true);
        expect(isDecimalNumber(String(n))).toBe(true);
      }),
    );
  });

  it('whatever it accepts, Number() reads as the same safe integer', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: fc.constantFrom('0', '1', '9', '-', '+', 'e', 'x', '.', ' ', 'I') }),
        (text) => {
          if (isDecimalInteger(text)) {
            expect(Number.isSafeInteger(Number(text))).toBe(true);
            expect(text).toMatch(/^-?\d+$/);
          }
        },
      ),
    );
  });

  it.each(['Infinity', '1e309', '1e3', '0x10', '99999999999999999999', '1.0', '', ' 1', '+1', '1_000'])(
    'refuses %j as an integer',
    (text) => {
      expect(isDecimalInteger(text)).toBe(false);
    },
  );

  it.each(['Infinity', '1e3', '0x10', '.5', '1.', 'NaN'])('refuses %j as a number', (text) => {
    expect(isDecimalNumber(text)).toBe(false);
  });
});

describe('the compiled validator', () => {
  const numbers = {
    type: 'object',
    properties: { n: { type: 'integer' }, x: { type: 'number' } },
    additionalProperties: false,
  };

  it('refuses Infinity in a JSON body (1e400 parses to it) as an integer or a number', () => {
    const validate = compile(numbers, 'body');
    for (const body of ['{"n": 1e400}', '{"x": -1e400}']) {
      expect(validate(JSON.parse(body)), body).toBe(false);
    }
    expect(validate({ n: 3, x: 0.5 })).toBe(true);
  });

  it('checks query text before coercing it, and names the field', () => {
    const validate = compile(numbers, 'querystring');
    expect(validate({ n: '1e3' })).toBe(false);
    expect(validate.errors?.[0]).toMatchObject({ keyword: 'type', instancePath: '/n' });
    const query: Record<string, unknown> = { n: '12', x: '-0.25' };
    expect(validate(query)).toBe(true);
    expect(query).toEqual({ n: 12, x: -0.25 });
  });

  it('refuses NUL before anything else, in any part', () => {
    for (const part of ['body', 'querystring', 'params']) {
      const validate = compile({ type: 'object', additionalProperties: true }, part);
      expect(validate({ a: { b: ['ok', 'n\u0000'] } })).toBe(false);
      expect(validate.errors?.[0]).toMatchObject({ keyword: 'nul', instancePath: '/a/b/1' });
    }
  });

  it('refuses a leap second as a date-time', () => {
    const validate = compile({ type: 'string', format: 'date-time' }, 'body');
    expect(validate('2030-06-30T23:59:60Z')).toBe(false);
    expect(validate('2030-06-30T23:59:59Z')).toBe(true);
  });
});

describe('allowed values of the field an error is about', () => {
  /** A schema that puts `leaf` at `path`, each step an object property, an array item or a union with null. */
  function wrap(leaf: object, path: string[], unions: boolean[]): object {
    let schema = leaf;
    for (let i = path.length - 1; i >= 0; i--) {
      const segment = path[i] as string;
      schema = /^\d+$/.test(segment)
        ? { type: 'array', items: schema }
        : {
            type: 'object',
            properties: { [segment]: schema, other: { type: 'string' } },
            required: [segment],
          };
      if (unions[i]) schema = { anyOf: [schema, { type: 'null' }] };
    }
    return schema;
  }
  const values = fc.uniqueArray(fc.string({ minLength: 1, maxLength: 6 }), { minLength: 1, maxLength: 6 });

  // One compiler for every run: making one (two Ajv instances) costs more than the whole check.
  const bodies = validatorCompiler();

  it('every error about an enum field (missing, mistyped, wrong), however deep in objects and unions, carries the whole set', () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom('a', 'b', 'type'), { minLength: 1, maxLength: 4 }),
        fc.array(fc.boolean(), { minLength: 4, maxLength: 4 }),
        values,
        fc.oneof(
          fc.constant(undefined),
          fc.integer(),
          fc.boolean(),
          fc.string({ maxLength: 6 }),
          fc.constant({}),
        ),
        fc.boolean(),
        (path, unions, allowed, given, nullable) => {
          const leaf = nullable
            ? { anyOf: [{ type: 'string', enum: allowed }, { type: 'null' }] }
            : { type: 'string', enum: allowed };
          const validate = bodies({
            schema: wrap(leaf, path, unions),
            httpPart: 'body',
            method: 'POST',
            url: '/x',
          }) as ((data: unknown) => boolean) & { errors?: { params: Record<string, unknown> }[] | null };
          // The value at the path: `given`, or left out when undefined.
          let data: Record<string, unknown> = given === undefined ? {} : { [path.at(-1) as string]: given };
          for (const step of path.slice(0, -1).reverse()) data = { [step]: data };
          if (validate(data)) return;
          expect(validate.errors?.[0]?.params.allowedValues).toEqual(nullable ? [...allowed, null] : allowed);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('follows array items and unions, and gives none where the field has no set', () => {
    const schema = wrap({ anyOf: [{ const: 'x' }, { const: 'y' }] }, ['list', '0'], [false, true]);
    expect(allowedValuesAt(schema, ['list', '3'])).toEqual(['x', 'y']);
    expect(allowedValuesAt(schema, ['list'])).toBeNull();
    expect(allowedValuesAt(schema, ['other'])).toBeNull();
    expect(allowedValuesAt(schema, ['nowhere'])).toBeNull();
    expect(allowedValuesAt({ anyOf: [{ const: 1 }, { type: 'string' }] }, [])).toBeNull();
  });
});
