/**
 * Hostile requests made from the OpenAPI document, for the fuzz test (test/fuzz.test.ts, a few thousand
 * per store) and bench/fuzz.mjs (100,000 against a started server).
 *
 * Every operation of the document is a source of requests: its method on its path, each path parameter
 * either a real id or something hostile, each query parameter left out, valid or hostile, and a body
 * that follows the operation's schema with hostile values slipped in at any depth, or is not JSON at
 * all. Hostile means what has broken servers before: NUL and control characters, bidirectional
 * overrides, lone surrogates, huge strings, numbers JSON.parse turns into Infinity or -0 or rounds,
 * 100,000 levels of nesting, wrong types, bad percent-encoding, oversized headers. A smaller share goes
 * to paths and methods the document does not have. The server must answer all of them in the envelope,
 * and never with a 5xx: `problemWith` says what is wrong with an answer.
 *
 * Plain JavaScript so the benchmark can run it without a build; fuzz-requests.d.mts gives its types.
 */
import fc from 'fast-check';

/** A number written into the JSON text as it is: what JSON.stringify cannot produce. */
class RawNumber {
  constructor(text) {
    this.text = text;
  }
}

/** JSON text of `value`, with RawNumbers verbatim and every key an own key (`__proto__` included). */
export function toJsonText(value) {
  if (value instanceof RawNumber) return value.text;
  if (Array.isArray(value)) return `[${value.map(toJsonText).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    return `{${Object.entries(value)
      .map(([key, item]) => `${JSON.stringify(key)}:${toJsonText(item)}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

function withKey(object, key, value) {
  // Assignment would set the prototype for `__proto__`; the server must see it as a plain field.
  Object.defineProperty(object, key, { value, enumerable: true, configurable: true, writable: true });
  return object;
}

export const HOSTILE_STRINGS = [
  '',
  ' ',
  '\u0000',
  'nul\u0000inside',
  '\u0001\u0002\u001b[31mred',
  '\u007f\u0085\u009f',
  '\u202eevil\u202c',
  '\u200b\u200d\ufeff',
  '\ud800',
  '\udfff\ud800',
  'e\u0301\u0301\u0301',
  '𝕏🙂',
  '\r\nX-Injected: 1',
  '../../etc/passwd',
  '%00',
  '%ZZ',
  "' OR '1'='1",
  '"; DROP TABLE instances; --',
  '<script>alert(1)</script>',
  '{{7*7}}#{7*7}',
  '__proto__',
  'constructor',
  'null',
  'NaN',
  '-0',
  '1e309',
  'a'.repeat(300),
  'ü'.repeat(70_000),
];

/** Query and path values that look like numbers to one parser and not to another. */
export const HOSTILE_NUMBER_TEXTS = [
  'Infinity',
  '-Infinity',
  'NaN',
  '1e309',
  '-1e309',
  '-0',
  '0',
  '99999999999999999999',
  '9007199254740993',
  '1.5',
  '-1',
  '1e2',
  '0x10',
  '1_000',
  ' 7',
  '+1',
  '١٢',
  '',
];

const RAW_NUMBERS = [
  '1e309',
  '-1e309',
  '-0',
  '99999999999999999999',
  '123456789012345678901234567890',
  '1e-400',
  '0.1e1',
  '9007199254740993',
];

/** Bodies that are not what the schema wants, or not JSON at all. */
const RAW_BODIES = [
  '',
  '{',
  '{"name": }',
  "{'name': 'x'}",
  '\u0000',
  'null',
  '[]',
  '"text"',
  '1e309',
  'true',
  '{"__proto__": {"admin": true}}',
  '{"constructor": {"prototype": {"admin": true}}}',
  '{"name": "a", "name": "b"}',
  '\ufeff{}',
  '{"name": "\\ud800"}',
  '{"name": "nul\\u0000inside"}',
  `{"name": "${'x'.repeat(1_100_000)}"}`,
];

const RAW_QUERY_BITS = ['%ZZ=1', 'a=%', '%00=%00', '=', '&&', 'page=1&page=2', 'page[]=1', 'a%20b=%C0%AF'];

const ODD_PATHS = [
  '/',
  '/v1',
  '/v1/',
  '/v2/instances',
  '/v0/account',
  '/V1/account',
  '/v1/nope',
  '/v1/instances/x/y/z',
  '/v1/account/api-keys/x/extra',
  '/v1/openapi.json/x',
  '/v1/%ZZ',
  `/v1/${'a'.repeat(20_000)}`,
];

/** `arbitrary` one time in `oneIn`, null otherwise (fc.option's default is the other way round). */
function rarely(arbitrary, oneIn) {
  return fc.oneof({ weight: oneIn - 1, arbitrary: fc.constant(null) }, { weight: 1, arbitrary });
}

const HEADER_TEXT = fc.string({
  unit: fc.integer({ min: 0x20, max: 0x7e }).map(String.fromCharCode),
  maxLength: 40,
});

/** Percent-encodes UTF-8 bytes (lone surrogates become U+FFFD, as any client would send them). */
export function percentEncode(text) {
  let encoded = '';
  for (const byte of Buffer.from(text, 'utf8')) {
    const char = String.fromCharCode(byte);
    encoded += /[A-Za-z0-9\-._~]/.test(char) ? char : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return encoded;
}

const hostileString = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...HOSTILE_STRINGS) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
  { weight: 1, arbitrary: fc.string({ maxLength: 40 }) },
);

/** Any JSON value of any type, hostile leaves, a little nesting. */
const hostileJson = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    hostileString,
    fc.constantFrom(...RAW_NUMBERS).map((text) => new RawNumber(text)),
    fc.double(),
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('value'), { maxLength: 3 }),
    fc.dictionary(fc.string({ maxLength: 8 }), tie('value'), { maxKeys: 3 }),
  ),
})).value;

function deepArrays(depth) {
  return `${'['.repeat(depth)}${']'.repeat(depth)}`;
}

function deepObjects(depth) {
  return `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
}

/** What a `$ref` (`#/components/schemas/Volume`, `#/components/parameters/limit`) names, or `node` itself. */
function resolve(node, document) {
  let current = node;
  while (current && typeof current.$ref === 'string') {
    current = current.$ref
      .slice(2)
      .split('/')
      .map((segment) => segment.replace(/~1/g, '/').replace(/~0/g, '~'))
      .reduce((parent, key) => parent?.[key], document);
  }
  return current ?? {};
}

function stringFor(schema) {
  if (schema.format === 'date-time') {
    return fc
      .date({ min: new Date('2000-01-01'), max: new Date('2100-01-01'), noInvalidDate: true })
      .map((date) => date.toISOString());
  }
  if (typeof schema.pattern === 'string') {
    try {
      const matching = fc.stringMatching(new RegExp(schema.pattern), { size: 'xsmall' });
      return schema.maxLength === undefined
        ? matching
        : matching.filter((text) => text.length <= schema.maxLength);
    } catch {
      // A pattern fast-check cannot invert (\p{…}): plain strings, which the server must judge anyway.
    }
  }
  return fc.string({ minLength: schema.minLength ?? 0, maxLength: Math.min(schema.maxLength ?? 30, 30) });
}

/** Values the schema accepts, mostly; any node may be replaced by a hostile value. */
function valueFor(schema, document, depth = 0) {
  const valid = validFor(resolve(schema, document), document, depth);
  return fc.oneof({ weight: 8, arbitrary: valid }, { weight: 1, arbitrary: hostileJson });
}

function validFor(schema, document, depth) {
  if (depth > 6) return fc.constant(null);
  const options = schema.anyOf ?? schema.oneOf;
  if (Array.isArray(options))
    return fc.oneof(...options.map((option) => valueFor(option, document, depth + 1)));
  if (Array.isArray(schema.enum)) return fc.constantFrom(...schema.enum);
  if ('const' in schema) return fc.constant(schema.const);
  const types = Array.isArray(schema.type) ? schema.type : [schema.type ?? 'object'];
  return fc.oneof(...types.map((type) => validOfType(type, schema, document, depth)));
}

function validOfType(type, schema, document, depth) {
  switch (type) {
    case 'string':
      return stringFor(schema);
    case 'integer':
      return fc.integer({ min: schema.minimum ?? -1000, max: schema.maximum ?? 1000 });
    case 'number':
      return fc.double({
        min: schema.minimum ?? -1e6,
        max: schema.maximum ?? 1e6,
        noNaN: true,
        noDefaultInfinity: true,
      });
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array':
      return fc.array(valueFor(schema.items ?? {}, document, depth + 1), {
        minLength: schema.minItems ?? 0,
        maxLength: Math.min(schema.maxItems ?? 4, 4),
      });
    default:
      return objectFor(schema, document, depth);
  }
}

function objectFor(schema, document, depth) {
  const properties = schema.properties ?? {};
  const record = fc.record(
    Object.fromEntries(
      Object.entries(properties).map(([name, property]) => [name, valueFor(property, document, depth + 1)]),
    ),
    { requiredKeys: (schema.required ?? []).filter((name) => name in properties) },
  );
  const patterned = Object.values(schema.patternProperties ?? {})[0];
  const extra =
    patterned !== undefined
      ? fc.dictionary(fc.string({ minLength: 1, maxLength: 12 }), valueFor(patterned, document, depth + 1), {
          maxKeys: 4,
        })
      : fc.constant({});
  const stray = rarely(
    fc.tuple(fc.constantFrom('unknown_field', '__proto__', 'constructor', '', 'NAME'), hostileJson),
    6,
  );
  return fc.tuple(record, extra, stray).map(([fields, more, strayField]) => {
    const object = {};
    for (const [key, value] of [...Object.entries(more), ...Object.entries(fields)])
      withKey(object, key, value);
    if (strayField) withKey(object, strayField[0], strayField[1]);
    return object;
  });
}

function queryFor(parameters, document) {
  const query = parameters.filter((parameter) => parameter.in === 'query');
  const text = (parameter) => {
    const schema = resolve(parameter.schema ?? {}, document);
    const items = schema.type === 'array' ? resolve(schema.items ?? {}, document) : schema;
    const one = fc.oneof(
      {
        weight: 6,
        arbitrary: validFor(items, document, 1).map((value) =>
          typeof value === 'string' ? value : toJsonText(value),
        ),
      },
      { weight: 2, arbitrary: fc.constantFrom(...HOSTILE_NUMBER_TEXTS) },
      { weight: 2, arbitrary: hostileString },
    );
    return schema.type === 'array' ? fc.array(one, { maxLength: 3 }) : one.map((value) => [value]);
  };
  return fc
    .tuple(
      fc.tuple(...query.map((parameter) => fc.option(text(parameter), { freq: 2 }))),
      rarely(
        fc.tuple(fc.constantFrom('unknown', 'pagee', '__proto__', 'constructor', 'Page'), hostileString),
        8,
      ),
      rarely(fc.constantFrom(...RAW_QUERY_BITS), 10),
    )
    .map(([values, unknown, raw]) => {
      const pairs = [];
      values.forEach((list, index) => {
        for (const value of list ?? []) pairs.push(`${query[index].name}=${percentEncode(value)}`);
      });
      if (unknown) pairs.push(`${percentEncode(unknown[0])}=${percentEncode(unknown[1])}`);
      if (raw) pairs.push(raw);
      return pairs.length > 0 ? `?${pairs.join('&')}` : '';
    });
}

function pathFor(template, ids) {
  const segment = fc.oneof(
    { weight: 4, arbitrary: ids.length > 0 ? fc.constantFrom(...ids) : fc.constant('ins_none') },
    { weight: 4, arbitrary: hostileString.map(percentEncode) },
    {
      weight: 1,
      arbitrary: fc.constantFrom('%ZZ', '%', '%00', '%2F', '%2e%2e', 'a'.repeat(5000), '..', '.'),
    },
  );
  const names = template.match(/\{[^}]+\}/g) ?? [];
  return fc
    .tuple(...names.map(() => segment))
    .map((values) => names.reduce((path, name, index) => path.replace(name, values[index]), template));
}

/** The example body the document shows for the create at `pathName` (its request body may be a `$ref`). */
export function createExample(document, pathName) {
  return resolve(document.paths[pathName].post.requestBody, document).content?.['application/json']?.example;
}

function bodyFor(operation, document) {
  const schema = resolve(operation.requestBody, document).content?.['application/json']?.schema;
  // Operations without a body mostly get none; a body they do get must not upset them either.
  const shaped = schema
    ? [{ weight: 12, arbitrary: valueFor(schema, document).map(toJsonText) }]
    : [{ weight: 40, arbitrary: fc.constant(undefined) }];
  return fc.oneof(
    ...shaped,
    { weight: 2, arbitrary: hostileJson.map(toJsonText) },
    { weight: 2, arbitrary: fc.constantFrom(...RAW_BODIES) },
    { weight: 1, arbitrary: fc.integer({ min: 1_000, max: 100_000 }).map(deepArrays) },
    { weight: 1, arbitrary: fc.integer({ min: 1_000, max: 100_000 }).map(deepObjects) },
    { weight: 1, arbitrary: fc.constant(undefined) },
  );
}

function headersFor(method, hasBody, key) {
  const authorization = fc.oneof(
    { weight: 30, arbitrary: fc.constant({ authorization: `Bearer ${key}` }) },
    { weight: 1, arbitrary: fc.constant({}) },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        { authorization: 'Bearer' },
        { authorization: 'Bearer nmb_' },
        { authorization: `Bearer ${key} ${key}` },
        { authorization: 'Basic YWxhZGRpbjpvcGVuc2VzYW1l' },
        { 'x-api-key': 'nmb_fake' },
      ),
    },
    { weight: 1, arbitrary: HEADER_TEXT.map((text) => ({ authorization: text })) },
  );
  const contentType = fc.oneof(
    { weight: 12, arbitrary: fc.constant('application/json') },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        '',
        'text/plain',
        'application/json; charset=utf-16',
        'application/x-www-form-urlencoded',
        'application/jsonx',
        'multipart/form-data; boundary=x',
        'APPLICATION/JSON',
      ),
    },
  );
  const idempotencyKey =
    method === 'POST'
      ? rarely(fc.oneof(fc.uuid(), HEADER_TEXT, fc.constant('k'.repeat(300))), 4)
      : fc.constant(null);
  const padding = rarely(fc.constant('p'.repeat(20_000)), 200);
  return fc.tuple(authorization, contentType, idempotencyKey, padding).map(([auth, type, idem, pad]) => ({
    ...auth,
    ...(type === '' || !hasBody ? {} : { 'content-type': type }),
    ...(idem === null ? {} : { 'idempotency-key': idem }),
    ...(pad === null ? {} : { 'x-padding': pad }),
  }));
}

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

/** Node's HTTP parser limit on a request's line and headers (src/main.ts). */
const PARSER_MAX_HEAD_BYTES = 64 * 1024;

/**
 * A HEAD whose request line and headers pass the parser's limit is sent as a GET instead. The parser
 * refuses such a request before it knows its method, so its 431 carries the error envelope as a body,
 * which a HEAD answer may not have (a known limit, docs/api.md); every other method and size is fuzzed.
 */
function headFitsParser(request) {
  if (request.method !== 'HEAD') return request;
  // Percent-encoding at most triples a path's bytes: an upper bound, with no encoder to trip over.
  let size = Buffer.byteLength(request.path) * 3;
  for (const [name, value] of Object.entries(request.headers))
    size += name.length + Buffer.byteLength(String(value));
  return size > PARSER_MAX_HEAD_BYTES ? { ...request, method: 'GET' } : request;
}

/**
 * Requests `{method, path, headers, body}` (path with its query; body a string or undefined) against
 * the operations of `document`, authenticated with `key` most of the time, with path ids from `ids`
 * some of the time.
 */
export function fuzzRequests(document, { key, ids = [] }) {
  const operations = Object.entries(document.paths).flatMap(([template, item]) =>
    Object.entries(item).map(([method, operation]) => ({
      template,
      method: method.toUpperCase(),
      operation,
    })),
  );
  const forOperation = ({ template, method, operation }) =>
    fc
      .tuple(
        fc.oneof(
          { weight: 20, arbitrary: fc.constant(method) },
          { weight: 1, arbitrary: fc.constantFrom(...METHODS) },
        ),
        pathFor(template, ids),
        queryFor(
          (operation.parameters ?? []).map((parameter) => resolve(parameter, document)),
          document,
        ),
        bodyFor(operation, document),
      )
      .chain(([chosen, path, query, body]) =>
        headersFor(chosen, body !== undefined, key).map((headers) =>
          headFitsParser({ method: chosen, path: `${path}${query}`, headers, body }),
        ),
      );
  const elsewhere = fc
    .tuple(fc.constantFrom(...METHODS), fc.constantFrom(...ODD_PATHS), headersFor('GET', false, key))
    .map(([method, path, headers]) => ({ method, path, headers, body: undefined }));
  return fc.oneof(
    { weight: 30, arbitrary: fc.oneof(...operations.map(forOperation)) },
    { weight: 1, arbitrary: elsewhere },
  );
}

/** What is wrong with the answer to `request`, or null: a 5xx, or a failure outside the error envelope. */
export function problemWith(request, status, text) {
  if (status >= 500) return `answered ${status}`;
  if (status < 400 || request.method === 'HEAD') return null;
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    return `answered ${status} with a body that is not JSON`;
  }
  const envelope =
    body !== null &&
    typeof body === 'object' &&
    body.success === false &&
    typeof body.error?.code === 'string' &&
    typeof body.error.message === 'string' &&
    typeof body.metadata?.request_id === 'string';
  return envelope ? null : `answered ${status} outside the error envelope`;
}

/** A request as one line for a report: huge parts shortened. */
export function describeRequest(request) {
  const short = (text) => (text.length > 160 ? `${text.slice(0, 160)}… (${text.length} characters)` : text);
  const body = request.body === undefined ? '' : ` body ${short(JSON.stringify(request.body))}`;
  return `${request.method} ${short(request.path)} headers ${short(JSON.stringify(request.headers))}${body}`;
}
