/**
 * The committed OpenAPI document as a contract on every answer the suites receive: sendRequest
 * (server.ts) passes each reply here, and a reply the document does not describe fails the test that
 * asked for it.
 *
 * An answer of a documented operation (matched by method and path, as the router does) must have a
 * status the operation lists, a body its schema accepts, a JSON content type, and every header the
 * document marks required. An answer of anything else (an unknown path, a method the path does not
 * have) must be the error envelope. Only Swagger UI (/docs) and the document itself are outside.
 * Responses, headers and schemas are followed through their `$ref`s to the shared `components`.
 */
import { readFileSync } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import formatsPlugin from 'ajv-formats';
import { pointerOf, resolved } from './openapi-document.js';

const DOCUMENT_FILE = path.resolve(
  path.dirname(fileURLToPath(import.meta.url)),
  '..',
  '..',
  'openapi',
  'v1.json',
);

/**
 * Served by this server but not part of the API the document describes: the API reference, the document
 * itself, and the web console (`/` redirects to it).
 */
const OUTSIDE_THE_DOCUMENT = [/^\/docs(?:\/|$)/, /^\/v1\/openapi\.json\/?$/, /^\/$/, /^\/console(?:\/|$)/];

interface HeaderObject {
  required?: boolean;
  schema?: object;
}

interface ResponseObject {
  headers?: Record<string, HeaderObject>;
  content?: Record<string, { schema?: object }>;
}

/** A response as found through its reference, and where it lives (its schema is compiled from there). */
interface DocumentedResponse {
  response: ResponseObject;
  pointer: string;
}

interface Operation {
  template: string;
  method: string;
  pattern: RegExp;
  params: number;
  responses: Record<string, DocumentedResponse>;
}

export interface CheckedReply {
  status: number;
  headers: IncomingHttpHeaders;
  body: unknown;
  text: string;
}

const DOCUMENT_ID = 'nimbus-openapi';

function load() {
  const document = JSON.parse(readFileSync(DOCUMENT_FILE, 'utf8')) as {
    paths: Record<string, Record<string, { responses: Record<string, unknown> }>>;
  };
  // The document is not itself a JSON Schema (parameters say `required: true`), so Ajv is told not to
  // check it as one; only the schemas inside it are compiled, by JSON Pointer.
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false });
  (formatsPlugin as unknown as { default: (ajv: Ajv2020) => void }).default(ajv);
  ajv.addSchema(document, DOCUMENT_ID);
  const operations: Operation[] = [];
  for (const [template, item] of Object.entries(document.paths)) {
    const source = template
      .split('/')
      // A segment may hold a parameter and text after it (`{id}.pdf`).
      .map((segment) =>
        segment
          .split(/(\{[^}]+\})/)
          .map((part) => (/^\{.+\}$/.test(part) ? '([^/]+)' : part.replace(/[.*+?^$()|[\]\\{}]/g, '\\$&')))
          .join(''),
      )
      .join('/');
    for (const [method, operation] of Object.entries(item)) {
      const responses = Object.entries(operation.responses).map(([status, listed]) => {
        const at = pointerOf('paths', template, method, 'responses', status);
        const { value, pointer } = resolved<ResponseObject>(document, listed, at);
        const headers = Object.fromEntries(
          Object.entries(value.headers ?? {}).map(([name, header]) => [
            name,
            resolved<HeaderObject>(document, header, `${pointer}/headers/${name}`).value,
          ]),
        );
        return [status, { response: { ...value, headers }, pointer }] as const;
      });
      operations.push({
        template,
        method: method.toUpperCase(),
        // The server ignores a trailing slash (ignoreTrailingSlash), so the document's paths do too.
        pattern: new RegExp(`^${source}/?$`),
        params: (template.match(/\{/g) ?? []).length,
        responses: Object.fromEntries(responses),
      });
    }
  }
  // A static segment wins over a parameter, as in the router (/v1/events/types before /v1/events/{id}).
  // Among as many parameters, more fixed text is more specific (/invoices/{id}.pdf before /invoices/{id}).
  operations.sort((a, b) => a.params - b.params || b.template.length - a.template.length);
  // Keyed by where the response lives: operations sharing an error response share its validator.
  const validators = new Map<string, ValidateFunction>();
  const schemaValidator = (operation: Operation, status: string) => {
    const { pointer } = operation.responses[status]!;
    let validate = validators.get(pointer);
    if (!validate) {
      validate = ajv.compile({ $ref: `${DOCUMENT_ID}${pointer}/content/application~1json/schema` });
      validators.set(pointer, validate);
    }
    return validate;
  };
  // Header schemas repeat on every response: compile each shape once.
  const headerValidators = new Map<string, ValidateFunction>();
  const headerValidator = (schema: object) => {
    const key = JSON.stringify(schema);
    let validate = headerValidators.get(key);
    if (!validate) {
      validate = ajv.compile({ type: 'object', properties: { value: schema } });
      headerValidators.set(key, validate);
    }
    return validate;
  };
  return { operations, schemaValidator, headerValidator };
}

let loaded: ReturnType<typeof load> | undefined;

function findOperation(method: string, pathname: string): Operation | 'unknown' | 'wrong-method' {
  loaded ??= load();
  const onPath = loaded.operations.filter((operation) => operation.pattern.test(pathname));
  if (onPath.length === 0) return 'unknown';
  // Fastify answers HEAD for every GET route, with the GET route's status and headers and no body.
  const wanted = method === 'HEAD' ? 'GET' : method;
  // The most specific path that has the method: a static segment before a parameter.
  return onPath.find((operation) => operation.method === wanted) ?? 'wrong-method';
}

/** What the header value means as JSON: integers for integer schemas, the text otherwise. */
function headerValue(schema: object, text: string): unknown {
  const type = (schema as { type?: unknown }).type;
  return (type === 'integer' || type === 'number') && /^-?\d+(\.\d+)?$/.test(text) ? Number(text) : text;
}

function envelopeProblems(reply: CheckedReply): string[] {
  const body = reply.body as {
    success?: unknown;
    error?: { code?: unknown; message?: unknown };
    metadata?: { request_id?: unknown; timestamp?: unknown };
  } | null;
  const problems: string[] = [];
  if (reply.status < 400) problems.push(`status ${reply.status} is not an error status`);
  if (
    body === null ||
    typeof body !== 'object' ||
    body.success !== false ||
    typeof body.error?.code !== 'string' ||
    typeof body.error.message !== 'string' ||
    typeof body.metadata?.request_id !== 'string' ||
    typeof body.metadata.timestamp !== 'string'
  ) {
    problems.push('the body is not the error envelope');
  }
  return problems;
}

/** Every way `reply` departs from the document; empty when it conforms. */
export function contractProblems(method: string, pathname: string, reply: CheckedReply): string[] {
  if (OUTSIDE_THE_DOCUMENT.some((pattern) => pattern.test(pathname))) return [];
  const operation = findOperation(method.toUpperCase(), pathname);
  if (operation === 'unknown' || operation === 'wrong-method') {
    // Neither is an operation of the document, but both are answers of the API: in the error envelope.
    return method.toUpperCase() === 'HEAD' ? [] : envelopeProblems(reply);
  }
  const { schemaValidator, headerValidator } = loaded!;
  const status = String(reply.status);
  const response = operation.responses[status]?.response;
  const where = `${operation.method} ${operation.template}`;
  if (!response) {
    return [
      `${where} answered ${status}, which the document does not list (it lists ${Object.keys(operation.responses).join(', ')})`,
    ];
  }
  const problems: string[] = [];
  for (const [name, header] of Object.entries(response.headers ?? {})) {
    const value = reply.headers[name.toLowerCase()];
    if (value === undefined) {
      if (header.required) problems.push(`the required header ${name} is missing`);
      continue;
    }
    if (header.schema) {
      const validate = headerValidator(header.schema);
      const text = Array.isArray(value) ? value.join(', ') : value;
      if (!validate({ value: headerValue(header.schema, text) })) {
        problems.push(
          `header ${name}: ${JSON.stringify(text)} does not match ${JSON.stringify(header.schema)}`,
        );
      }
    }
  }
  const documentedJson = response.content?.['application/json'] !== undefined;
  if (method.toUpperCase() === 'HEAD') return problems;
  if (documentedJson) {
    if (!/^application\/json\b/.test(String(reply.headers['content-type'] ?? ''))) {
      problems.push(`content-type is ${String(reply.headers['content-type'])}, not application/json`);
    }
    const validate = schemaValidator(operation, status);
    if (typeof reply.body === 'string' || reply.body === undefined) problems.push('the body is not JSON');
    else if (!validate(reply.body)) {
      problems.push(
        ...(validate.errors ?? [])
          .slice(0, 5)
          .map((error) => `body${error.instancePath}: ${error.message ?? 'is invalid'}`),
      );
    }
  } else if (response.content && Object.keys(response.content).length > 0) {
    // A download (PDF, CSV): the content type must be one the document names.
    const type = String(reply.headers['content-type'] ?? '')
      .split(';')[0]
      ?.trim();
    if (!type || !(type in response.content)) {
      problems.push(`content-type is ${type}, not one of ${Object.keys(response.content).join(', ')}`);
    }
  } else if (reply.text.length > 0) {
    problems.push('the document declares no body, but one was sent');
  }
  return problems.map((problem) => `${where} ${status}: ${problem}`);
}

/** Throws when `reply` departs from the document, naming the request, the departures and the body. */
export function assertMatchesContract(method: string, url: URL, reply: CheckedReply): void {
  const problems = contractProblems(method, url.pathname, reply);
  if (problems.length === 0) return;
  const body = reply.text.length > 600 ? `${reply.text.slice(0, 600)}…` : reply.text;
  throw new Error(
    `The answer to ${method} ${url.pathname}${url.search.length > 200 ? `${url.search.slice(0, 200)}…` : url.search} ` +
      `departs from openapi/v1.json:\n  - ${problems.join('\n  - ')}\n  body: ${body}`,
  );
}
