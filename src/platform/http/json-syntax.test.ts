import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jsonSyntaxError } from './json-syntax.js';

/** What JSON.parse says of `text`: fine, or the position its message names (null when it names none). */
function v8Verdict(text: string): { valid: true } | { valid: false; position: number | null } {
  try {
    JSON.parse(text);
    return { valid: true };
  } catch (error) {
    const message = (error as Error).message;
    if (message === 'Unexpected end of JSON input') return { valid: false, position: text.length };
    const at = /at position (\d+)/.exec(message);
    return { valid: false, position: at ? Number(at[1]) : null };
  }
}

/** JSON texts with a mistake or two: a character dropped, added or changed, or the text cut short. */
const damagedJson = fc
  .tuple(
    fc.jsonValue({ maxDepth: 4 }).map((value) => JSON.stringify(value, null, Math.random() < 0.5 ? 0 : 2)),
    fc.array(
      fc.tuple(
        fc.constantFrom('drop', 'insert', 'replace', 'cut'),
        fc.nat(),
        fc.constantFrom(...'{}[]:,"\\ \n01-.eE+tfnulx\u0001'.split('')),
      ),
      { maxLength: 2 },
    ),
  )
  .map(([text, edits]) => {
    let damaged = text;
    for (const [kind, at, char] of edits) {
      const i = damaged.length === 0 ? 0 : at % (damaged.length + 1);
      if (kind === 'drop') damaged = damaged.slice(0, i) + damaged.slice(i + 1);
      else if (kind === 'insert') damaged = damaged.slice(0, i) + char + damaged.slice(i);
      else if (kind === 'replace') damaged = damaged.slice(0, i) + char + damaged.slice(i + 1);
      else damaged = damaged.slice(0, i);
    }
    return damaged;
  });

describe('jsonSyntaxError', () => {
  it('finds an error exactly when JSON.parse does, at the position JSON.parse names', () => {
    fc.assert(
      fc.property(damagedJson, (text) => {
        const found = jsonSyntaxError(text);
        const v8 = v8Verdict(text);
        expect(found === null, text).toBe(v8.valid);
        if (!v8.valid && v8.position !== null) expect(found?.position, text).toBe(v8.position);
      }),
      { numRuns: 2000 },
    );
  });

  it('names the position JSON.parse leaves out, with its line and column', () => {
    expect(jsonSyntaxError('{"a":}')).toEqual({
      position: 5,
      line: 1,
      column: 6,
      reason: 'expected a JSON value (an object, array, string, number, true, false or null)',
    });
    expect(jsonSyntaxError('{\n  "a": tru\n}')).toMatchObject({ position: 12, line: 2, column: 11 });
    expect(jsonSyntaxError('nope')).toMatchObject({ position: 1, reason: 'expected null' });
    expect(jsonSyntaxError('{"a": "b')).toMatchObject({
      position: 8,
      reason: 'the body ends inside a string',
    });
    expect(jsonSyntaxError('{"a": 1')).toMatchObject({
      position: 7,
      reason: 'the body ends before the JSON value does',
    });
  });
});
