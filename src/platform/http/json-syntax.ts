/**
 * Where a JSON text first breaks RFC 8259, and why: what a client needs to find its mistake. JSON.parse
 * names the position for most mistakes but not all ("Unexpected token 'x', … is not valid JSON" names
 * none), and its wording changes between V8 versions, so the malformed-JSON answer takes both from this
 * one linear scan instead. It runs only after JSON.parse has failed, and costs about what JSON.parse did.
 */

export interface JsonSyntaxError {
  /** Offset of the first character that cannot continue the text (0-based, in UTF-16 code units). */
  position: number;
  line: number;
  column: number;
  reason: string;
}

const OBJECT = 0;
const ARRAY = 1;

function isWhitespace(code: number): boolean {
  return code === 0x20 || code === 0x09 || code === 0x0a || code === 0x0d;
}

function isDigit(code: number): boolean {
  return code >= 0x30 && code <= 0x39;
}

function isHexDigit(code: number): boolean {
  return isDigit(code) || (code >= 0x41 && code <= 0x46) || (code >= 0x61 && code <= 0x66);
}

const UNTERMINATED = 'the body ends inside a string';
const SIMPLE_ESCAPES = new Set(['"', '\\', '/', 'b', 'f', 'n', 'r', 't']);

class Broken {
  constructor(
    readonly position: number,
    readonly reason: string,
  ) {}
}

/** 1-based line and column of `position` (lines end at \n; a column counts UTF-16 code units). */
function lineAndColumn(text: string, position: number): { line: number; column: number } {
  let line = 1;
  let lineStart = 0;
  for (let at = text.indexOf('\n'); at !== -1 && at < position; at = text.indexOf('\n', at + 1)) {
    line++;
    lineStart = at + 1;
  }
  return { line, column: position - lineStart + 1 };
}

/** The first syntax error of `text`, or null when it is one valid JSON value. */
export function jsonSyntaxError(text: string): JsonSyntaxError | null {
  try {
    scan(text);
    return null;
  } catch (error) {
    if (!(error instanceof Broken)) throw error;
    return { position: error.position, ...lineAndColumn(text, error.position), reason: error.reason };
  }
}

function scan(text: string): void {
  const end = text.length;
  const open: number[] = [];
  let i = skipWhitespace(text, 0);

  const fail = (at: number, reason: string): never => {
    throw new Broken(
      at,
      at >= end && reason !== UNTERMINATED ? 'the body ends before the JSON value does' : reason,
    );
  };

  /** A property name and its colon; leaves `i` where the property's value starts. */
  const propertyName = (): void => {
    if (text.charCodeAt(i) !== 0x22) fail(i, 'expected a property name in double quotes');
    i = skipWhitespace(text, stringEnd(text, i, fail));
    if (text.charCodeAt(i) !== 0x3a) fail(i, "expected ':' after the property name");
    i = skipWhitespace(text, i + 1);
  };

  for (;;) {
    // A value starts at i.
    const c = text.charCodeAt(i);
    if (c === 0x7b) {
      i = skipWhitespace(text, i + 1);
      if (text.charCodeAt(i) === 0x7d) i++;
      else {
        if (text.charCodeAt(i) !== 0x22) fail(i, "expected a property name in double quotes or '}'");
        propertyName();
        open.push(OBJECT);
        continue;
      }
    } else if (c === 0x5b) {
      i = skipWhitespace(text, i + 1);
      if (text.charCodeAt(i) === 0x5d) i++;
      else {
        open.push(ARRAY);
        continue;
      }
    } else if (c === 0x22) i = stringEnd(text, i, fail);
    else if (c === 0x2d || isDigit(c)) i = numberEnd(text, i, fail);
    else if (c === 0x74) i = literalEnd(text, i, 'true', fail);
    else if (c === 0x66) i = literalEnd(text, i, 'false', fail);
    else if (c === 0x6e) i = literalEnd(text, i, 'null', fail);
    else fail(i, 'expected a JSON value (an object, array, string, number, true, false or null)');

    // A value ended at i: close what it completes, until a comma asks for the next one.
    for (;;) {
      i = skipWhitespace(text, i);
      const container = open.at(-1);
      if (container === undefined) {
        if (i < end) fail(i, 'unexpected text after the JSON value');
        return;
      }
      const next = text.charCodeAt(i);
      if (next === 0x2c) {
        i = skipWhitespace(text, i + 1);
        if (container === OBJECT) propertyName();
        break;
      }
      if ((container === OBJECT && next === 0x7d) || (container === ARRAY && next === 0x5d)) {
        open.pop();
        i++;
        continue;
      }
      fail(
        i,
        container === OBJECT
          ? "expected ',' or '}' after a property value"
          : "expected ',' or ']' after an array element",
      );
    }
  }
}

function skipWhitespace(text: string, from: number): number {
  let i = from;
  while (i < text.length && isWhitespace(text.charCodeAt(i))) i++;
  return i;
}

type Fail = (at: number, reason: string) => never;

/** The index after the string whose opening quote is at `start`. */
function stringEnd(text: string, start: number, fail: Fail): number {
  let i = start + 1;
  for (;;) {
    if (i >= text.length) fail(i, UNTERMINATED);
    const c = text.charCodeAt(i);
    if (c === 0x22) return i + 1;
    if (c < 0x20) fail(i, 'a control character (U+0000 to U+001F) in a string must be escaped');
    if (c !== 0x5c) {
      i++;
      continue;
    }
    const escaped = text[i + 1];
    if (escaped === 'u') {
      for (let hex = i + 2; hex < i + 6; hex++) {
        if (!isHexDigit(text.charCodeAt(hex))) fail(hex, 'a \\u escape takes four hexadecimal digits');
      }
      i += 6;
    } else if (escaped !== undefined && SIMPLE_ESCAPES.has(escaped)) i += 2;
    else fail(i + 1, 'unknown escape: after \\ come only " \\ / b f n r t or u');
  }
}

/** The index after the number that starts at `start`. */
function numberEnd(text: string, start: number, fail: Fail): number {
  let i = start;
  if (text.charCodeAt(i) === 0x2d) i++;
  if (!isDigit(text.charCodeAt(i))) fail(i, "expected a digit after '-'");
  if (text.charCodeAt(i) === 0x30) i++;
  else while (isDigit(text.charCodeAt(i))) i++;
  if (text.charCodeAt(i) === 0x2e) {
    i++;
    if (!isDigit(text.charCodeAt(i))) fail(i, 'expected a digit after the decimal point');
    while (isDigit(text.charCodeAt(i))) i++;
  }
  const e = text.charCodeAt(i);
  if (e === 0x65 || e === 0x45) {
    i++;
    const sign = text.charCodeAt(i);
    if (sign === 0x2b || sign === 0x2d) i++;
    if (!isDigit(text.charCodeAt(i))) fail(i, 'expected a digit in the exponent');
    while (isDigit(text.charCodeAt(i))) i++;
  }
  return i;
}

function literalEnd(text: string, start: number, literal: string, fail: Fail): number {
  for (let k = 0; k < literal.length; k++) {
    if (text[start + k] !== literal[k]) fail(start + k, `expected ${literal}`);
  }
  return start + literal.length;
}
