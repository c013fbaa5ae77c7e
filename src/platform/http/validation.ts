/**
 * Request validators. Query strings, path parameters and headers arrive as text, so their validator
 * converts "20" to 20; JSON bodies already carry types, so theirs converts nothing: `{"name": 42}` is
 * an error, not the name "42". Neither removes unknown fields: schemas reject them instead.
 *
 * Two rules run before the schema, on every route, so that no route can forget them:
 * - No string anywhere in the input (path, query, headers, body, object keys included) may contain
 *   U+0000. PostgreSQL cannot store it in text and SQLite can, so without this rule the two stores
 *   would answer the same request differently (a 500 on one, a stored NUL on the other).
 * - A text value for an integer or number field must be written in plain decimal digits. Ajv's own
 *   coercion goes through `Number()`, which reads "Infinity", "1e309", "1e3" and "0x10" as numbers.
 */
import { Ajv, type Options } from 'ajv';
import formatsPlugin from 'ajv-formats';
import type { FastifySchemaCompiler, FastifySchemaValidationError } from 'fastify';

/** The first violation in Ajv's error shape, so the error handler names the field like any other. */
export interface InputViolation {
  keyword: string;
  instancePath: string;
  schemaPath: string;
  message: string;
  params: Record<string, unknown>;
}

/** JSON Pointer escaping (RFC 6901) of one path segment, as Ajv writes `instancePath`. */
function pointerSegment(segment: string): string {
  return segment.replace(/~/g, '~0').replace(/\//g, '~1');
}

/** Whether a child needs looking into: a string holding NUL, or an array or object. */
function mayHoldNul(child: unknown): boolean {
  return typeof child === 'string' ? child.includes('\u0000') : child !== null && typeof child === 'object';
}

/**
 * Where the first string holding U+0000 is (a value or an object key), as a JSON Pointer, or null.
 * It runs on every validated part of every request, and most are small and hold no NUL: then it
 * allocates nothing (no paths, no entry arrays).
 */
export function findNul(value: unknown, path = ''): string | null {
  if (typeof value === 'string') return value.includes('\u0000') ? path : null;
  if (value === null || typeof value !== 'object') return null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      if (!mayHoldNul(value[i])) continue;
      const found = findNul(value[i], `${path}/${i}`);
      if (found !== null) return found;
    }
    return null;
  }
  for (const key in value) {
    if (!Object.hasOwn(value, key)) continue;
    if (key.includes('\u0000')) return `${path}/${pointerSegment(key)}`;
    const child = (value as Record<string, unknown>)[key];
    if (!mayHoldNul(child)) continue;
    const found = findNul(child, `${path}/${pointerSegment(key)}`);
    if (found !== null) return found;
  }
  return null;
}

// Sixteen digits would let through values past Number.MAX_SAFE_INTEGER, which no longer count exactly.
const DECIMAL_INTEGER = /^-?[0-9]{1,15}$/;
const DECIMAL_NUMBER = /^-?[0-9]{1,15}(?:\.[0-9]{1,15})?$/;

export function isDecimalInteger(text: string): boolean {
  return DECIMAL_INTEGER.test(text);
}

export function isDecimalNumber(text: string): boolean {
  return DECIMAL_NUMBER.test(text);
}

type NumericKind = 'integer' | 'number';

function numericKind(schema: unknown): NumericKind | null {
  if (schema === null || typeof schema !== 'object') return null;
  const type = (schema as { type?: unknown }).type;
  const types = Array.isArray(type) ? type : [type];
  if (types.includes('integer')) return 'integer';
  if (types.includes('number')) return 'number';
  return null;
}

/** The top-level integer and number properties of a text schema (query, params, headers). */
function numericFields(schema: unknown): Map<string, NumericKind> {
  const fields = new Map<string, NumericKind>();
  const properties = (schema as { properties?: Record<string, unknown> } | null)?.properties;
  if (!properties) return fields;
  for (const [name, property] of Object.entries(properties)) {
    const kind = numericKind(property) ?? numericKind((property as { items?: unknown })?.items);
    if (kind) fields.set(name, kind);
  }
  return fields;
}

function numericViolation(data: unknown, fields: Map<string, NumericKind>): InputViolation | null {
  if (fields.size === 0 || data === null || typeof data !== 'object') return null;
  for (const [name, kind] of fields) {
    const raw = (data as Record<string, unknown>)[name];
    if (raw === undefined) continue;
    const texts = Array.isArray(raw) ? raw : [raw];
    for (const text of texts) {
      if (typeof text !== 'string') continue;
      const fine = kind === 'integer' ? isDecimalInteger(text) : isDecimalNumber(text);
      if (!fine) {
        return {
          keyword: 'type',
          instancePath: `/${pointerSegment(name)}`,
          schemaPath: `#/properties/${pointerSegment(name)}/type`,
          message:
            kind === 'integer'
              ? 'must be a whole number written in decimal digits (at most 15)'
              : 'must be a number written in decimal digits',
          params: { type: kind },
        };
      }
    }
  }
  return null;
}

export function nulViolation(data: unknown): InputViolation | null {
  const at = findNul(data);
  return at === null
    ? null
    : {
        keyword: 'nul',
        instancePath: at,
        schemaPath: '#',
        message: 'must not contain the NUL character (U+0000)',
        params: {},
      };
}

function createAjv(options: Options): Ajv {
  const ajv = new Ajv({
    removeAdditional: false,
    useDefaults: true,
    allErrors: false,
    strict: false,
    // `strict: false` would also let Infinity (JSON's 1e400) pass as an integer or number.
    strictNumbers: true,
    ...options,
  });
  // ajv-formats is CommonJS: under NodeNext its default export arrives as the module object.
  (formatsPlugin as unknown as { default: (ajv: Ajv) => void }).default(ajv);
  // RFC 3339 allows what JavaScript's Date cannot hold (a leap second, 23:59:60): such a value passed
  // the schema and then broke whatever turned it into a Date. A date-time must be both.
  const rfc3339 = ajv.formats['date-time'] as { validate: (text: string) => boolean; compare: unknown };
  ajv.addFormat('date-time', {
    type: 'string',
    validate: (text: string) => rfc3339.validate(text) && Number.isFinite(Date.parse(text)),
    compare: rfc3339.compare as (a: string, b: string) => number | undefined,
  });
  return ajv;
}

type Validate = ((data: unknown) => boolean) & { errors?: FastifySchemaValidationError[] | null };

type SchemaNode = Record<string, unknown>;

function isNode(value: unknown): value is SchemaNode {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** A schema and, through anyOf/oneOf/allOf, every schema its value may have to match. */
function branches(schema: SchemaNode, into: SchemaNode[] = []): SchemaNode[] {
  into.push(schema);
  for (const keyword of ['anyOf', 'oneOf', 'allOf']) {
    const list = schema[keyword];
    if (Array.isArray(list)) for (const branch of list) if (isNode(branch)) branches(branch, into);
  }
  return into;
}

/** The schemas that describe the child `segment` of a value described by `schema`. */
function childSchemas(schema: SchemaNode, segment: string): SchemaNode[] {
  const found: SchemaNode[] = [];
  for (const node of branches(schema)) {
    const property = isNode(node.properties) ? node.properties[segment] : undefined;
    if (isNode(property)) {
      found.push(property);
      continue;
    }
    if (isNode(node.patternProperties)) {
      for (const [pattern, child] of Object.entries(node.patternProperties)) {
        if (isNode(child) && new RegExp(pattern, 'u').test(segment)) found.push(child);
      }
    }
    if (isNode(node.additionalProperties)) found.push(node.additionalProperties);
    if (isNode(node.items) && /^\d+$/.test(segment)) found.push(node.items);
  }
  return found;
}

/** The values a schema admits when they are a finite set (enum, const, null, unions of those), else null. */
function finiteValues(schema: SchemaNode): unknown[] | null {
  if (Array.isArray(schema.enum)) return schema.enum;
  if ('const' in schema) return [schema.const];
  if (schema.type === 'null') return [null];
  const union = Array.isArray(schema.anyOf)
    ? schema.anyOf
    : Array.isArray(schema.oneOf)
      ? schema.oneOf
      : null;
  if (union === null || union.length === 0) return null;
  const values: unknown[] = [];
  for (const branch of union) {
    const some = isNode(branch) ? finiteValues(branch) : null;
    if (some === null) return null;
    for (const value of some) if (!values.includes(value)) values.push(value);
  }
  return values;
}

/**
 * The allowed values of the field at `path` (property names and array indexes from the root), when the
 * schema gives it a finite set: what an error about that field lists as `allowed_values`, whether the
 * field was missing, of the wrong type or of a value outside the set.
 */
export function allowedValuesAt(schema: unknown, path: readonly string[]): unknown[] | null {
  if (!isNode(schema)) return null;
  let candidates: SchemaNode[] = [schema];
  for (const segment of path) {
    candidates = candidates.flatMap((candidate) => childSchemas(candidate, segment));
    if (candidates.length === 0) return null;
  }
  const values: unknown[] = [];
  for (const candidate of candidates) {
    const some = finiteValues(candidate);
    if (some === null) return null;
    for (const value of some) if (!values.includes(value)) values.push(value);
  }
  return values;
}

/** The field an Ajv error is about, as path segments: its instancePath, plus the property it names. */
export function violationPath(error: { instancePath: string; params: Record<string, unknown> }): string[] {
  // instancePath is a JSON Pointer (RFC 6901): only ~1 and ~0 are escapes, in that order.
  const segments = error.instancePath
    .split('/')
    .slice(1)
    .map((segment) => segment.replace(/~1/g, '/').replace(/~0/g, '~'));
  if (typeof error.params.missingProperty === 'string') segments.push(error.params.missingProperty);
  if (typeof error.params.additionalProperty === 'string') segments.push(error.params.additionalProperty);
  return segments;
}

/** Gives the first error the allowed values of its field (`params.allowedValues`), where there is a set. */
function withAllowedValues(schema: unknown, errors: FastifySchemaValidationError[] | null | undefined) {
  const first = errors?.[0];
  if (!first || first.keyword === 'additionalProperties') return errors;
  const allowed = allowedValuesAt(schema, violationPath(first));
  if (allowed !== null) first.params = { ...first.params, allowedValues: allowed };
  return errors;
}

export function validatorCompiler(): FastifySchemaCompiler<unknown> {
  const forText = createAjv({ coerceTypes: 'array' });
  const forJson = createAjv({ coerceTypes: false });
  return ({ schema, httpPart }) => {
    const isBody = httpPart === 'body';
    const validateSchema = (isBody ? forJson : forText).compile(schema as object);
    const numeric = isBody ? new Map<string, NumericKind>() : numericFields(schema);
    const validate: Validate = (data) => {
      const violation = nulViolation(data) ?? numericViolation(data, numeric);
      if (violation) {
        validate.errors = [violation];
        return false;
      }
      if (validateSchema(data)) {
        validate.errors = null;
        return true;
      }
      let errors = validateSchema.errors as FastifySchemaValidationError[];
      // No body (Fastify passes null) where one is required: name the first field it lacks, as for {}.
      if (isBody && data === null && !validateSchema({})) {
        errors = validateSchema.errors as FastifySchemaValidationError[];
      }
      validate.errors = withAllowedValues(schema, errors);
      return false;
    };
    return validate;
  };
}
