/**
 * The OpenAPI document names each shared part once, under `components`, and points at it with `$ref`
 * everywhere else (docs/api.md, "The OpenAPI document"). A header description or an error answer is then
 * read, and changed, in one place, and the /v1 and /v2 operations share the same definitions:
 *
 * - schemas: every schema with a name for a title (`Volume`, `NewVolume`, `Metadata`…). Resource views
 *   also carry an `$id`, and @fastify/swagger lists those itself; request bodies and nested shapes have
 *   only the title (an `$id` on a body would be registered twice, once per API version, by the validator).
 * - headers: the response headers of responses.ts, by their name; where an answer may leave out a header
 *   that others always carry, that variant is `<name>-Optional`.
 * - responses: the error answers every operation of a kind gives (`NotFound`), named after the status;
 *   where a kind of operation answers with other headers, the variant says which (`NotFoundReplayable`
 *   on guarded POSTs, which may replay a saved answer; `TooManyRequestsPublic` on keyless operations).
 * - parameters: the path parameters, the list parameters every list shares (page, limit, order, cursor)
 *   and `Idempotency-Key`.
 * - what is left inline in an operation (its success answer, its request body, a filter of its own) when
 *   another operation has the same: an operation of /v1 and its /v2 twin always do, so /v2 writes out
 *   nothing /v1 already says. Such a part is named after the first operation that has it
 *   (`getVolumesById`, `postVolumes`, `getVolumes.status`); see shareOperationParts.
 */
import { STATUS_CODES } from 'node:http';
import { ERROR_STATUSES } from '../error-catalogue.js';
import {
  ERROR_DESCRIPTIONS,
  type ErrorStatus,
  HEADER_COMPONENTS,
  type HeaderName,
  type OperationKind,
  responseHeaders,
} from './responses.js';

/** A type rather than an interface, so that it is also a plain JSON object. */
export type Reference = { $ref: string };

type Json = Record<string, unknown>;

/** The content of every error answer: the envelope of schemas.ts, listed as a schema component. */
export const ERROR_CONTENT = {
  'application/json': { schema: { $ref: '#/components/schemas/ErrorEnvelope' } },
};

/** Query parameters every list has, shared wherever an operation has them as most operations do. */
const SHARED_QUERY_PARAMETERS = new Set(['page', 'limit', 'order', 'cursor']);

/** A schema's title that names it in `components.schemas` (`API key actor` only labels a choice). */
const SCHEMA_NAME = /^[A-Z][A-Za-z0-9]*$/;

/** The operation whose answers carry the headers an answer of its status usually carries. */
const GUARDED_READ: OperationKind = { method: 'get', public: false };

/** Headers that some answer always carries: elsewhere, the variant that may be absent is `-Optional`. */
const SOMETIMES_REQUIRED = new Set(
  [GUARDED_READ, { method: 'post', public: false }, { method: 'get', public: true }]
    .flatMap((kind) => [200, ...ERROR_STATUSES].flatMap((status) => responseHeaders(kind, status)))
    .filter(([, required]) => required)
    .map(([name]) => name),
);

/** JSON text with sorted keys: two values are the same part when their texts are equal. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, item: unknown) =>
    item !== null && typeof item === 'object' && !Array.isArray(item)
      ? Object.fromEntries(Object.entries(item).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : item,
  );
}

function isObject(value: unknown): value is Json {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function sortedByName<T>(entries: Map<string, T>): Record<string, T> {
  return Object.fromEntries([...entries].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** What OpenAPI allows as the name of a component. */
const COMPONENT_NAME = /^[A-Za-z0-9._-]+$/;

/** One section of `components`: each name holds one value, however many places point at it. */
class Section {
  readonly entries = new Map<string, unknown>();

  constructor(readonly section: string) {}

  /** A new `$ref` to `name`, which holds `value`; a name asked to hold two different values is a bug. */
  share(name: string, value: unknown): Reference {
    if (!COMPONENT_NAME.test(name))
      throw new Error(`components.${this.section}: ${name} is not a valid name`);
    const held = this.entries.get(name);
    if (held === undefined) this.entries.set(name, value);
    else if (canonical(held) !== canonical(value)) {
      throw new Error(`components.${this.section}.${name} would describe two different things`);
    }
    return this.reference(name);
  }

  reference(name: string): Reference {
    return { $ref: `#/components/${this.section}/${name}` };
  }
}

/** `404` → `NotFound`: the status's reason phrase (RFC 9110, as Node names it). */
function reasonName(status: number): string {
  return (STATUS_CODES[status] ?? `Status${status}`).replace(/[^A-Za-z]/g, '');
}

function isErrorStatus(status: number): status is ErrorStatus {
  return (ERROR_STATUSES as readonly number[]).includes(status);
}

/** The answer a route's `errorResponses()` declares, or completeDocument adds, before its headers. */
export function errorResponse(status: ErrorStatus): Json {
  // Copies, here and below: /docs/yaml would write one object met twice as a YAML anchor and alias.
  return { description: ERROR_DESCRIPTIONS[status], content: structuredClone(ERROR_CONTENT) };
}

/** The parts of an operation that shareOperationParts may replace with references. */
export interface OperationParts {
  operationId?: string;
  parameters?: unknown[];
  requestBody?: unknown;
  responses?: Record<string, unknown>;
}

/** Collects the shared parts while openapi.ts completes the operations, then lists them in `components`. */
export class SharedComponents {
  private readonly schemas = new Section('schemas');
  private readonly headers = new Section('headers');
  private readonly responses = new Section('responses');
  private readonly parameters = new Section('parameters');
  private readonly requestBodies = new Section('requestBodies');

  /** The headers an answer of `status` carries on an operation of this kind, as references. */
  private headersOf(kind: OperationKind, status: number): Record<string, Reference> {
    return Object.fromEntries(
      responseHeaders(kind, status).map(([name, required]) => [name, this.header(name, required)]),
    );
  }

  private header(name: HeaderName, required: boolean): Reference {
    const component = required || !SOMETIMES_REQUIRED.has(name) ? name : `${name}-Optional`;
    return this.headers.share(component, { ...structuredClone(HEADER_COMPONENTS[name]), required });
  }

  /**
   * The answer with its headers. An error answer with the envelope and the status's description is the
   * shared one: a reference to it.
   */
  response(kind: OperationKind, status: number, response: Json): Json | Reference {
    const complete = {
      ...response,
      headers: { ...(response.headers as Json), ...this.headersOf(kind, status) },
    };
    if (!isErrorStatus(status) || canonical(response) !== canonical(errorResponse(status))) return complete;
    const usual =
      canonical(responseHeaders(kind, status)) === canonical(responseHeaders(GUARDED_READ, status));
    const variant = usual ? '' : kind.public ? 'Public' : 'Replayable';
    return this.responses.share(`${reasonName(status)}${variant}`, complete);
  }

  /** A parameter every operation that takes it takes alike (Idempotency-Key): always a reference. */
  parameter(name: string, parameter: Json): Reference {
    return this.parameters.share(name, parameter);
  }

  /**
   * Path parameters and the list parameters become references where they are the variant most operations
   * use (a list whose `order` defaults to `asc` keeps its own).
   */
  shareParameters(operations: { parameters?: unknown[] }[]): void {
    const isShared = (parameter: Json) =>
      parameter.in === 'path' ||
      (parameter.in === 'query' && SHARED_QUERY_PARAMETERS.has(String(parameter.name)));
    const variants = new Map<string, Map<string, { parameter: Json; uses: number }>>();
    for (const operation of operations) {
      for (const parameter of operation.parameters ?? []) {
        if (!isObject(parameter) || !isShared(parameter)) continue;
        const name = String(parameter.name);
        const ofName = variants.get(name) ?? new Map<string, { parameter: Json; uses: number }>();
        variants.set(name, ofName);
        const text = canonical(parameter);
        const seen = ofName.get(text) ?? { parameter, uses: 0 };
        seen.uses += 1;
        ofName.set(text, seen);
      }
    }
    const common = new Map<string, string>();
    for (const [name, ofName] of variants) {
      // The first variant met wins a tie, so the choice is the same for the same document.
      const [text] = [...ofName].reduce((best, next) => (next[1].uses > best[1].uses ? next : best));
      common.set(name, text);
      this.parameters.share(name, ofName.get(text)!.parameter);
    }
    for (const operation of operations) {
      if (operation.parameters === undefined) continue;
      operation.parameters = operation.parameters.map((parameter) =>
        isObject(parameter) &&
        isShared(parameter) &&
        common.get(String(parameter.name)) === canonical(parameter)
          ? this.parameters.reference(String(parameter.name))
          : parameter,
      );
    }
  }

  /**
   * Every answer, request body and parameter still written inline that more than one operation has, alike,
   * becomes a component, named after the first operation (in document order) that has it: an answer
   * `<operationId>`, or `<operationId>.<status>` when it is not the operation's only success answer; a
   * body `<operationId>`; a parameter `<operationId>.<name>`. A /v2 operation then points at what its /v1
   * twin points at, and the actions of a resource that answer alike share one answer. What one operation
   * alone has (a list's page, which /v2 pages by cursor) stays where it is. Run it last: it compares the
   * parts as the steps above left them, with their named schemas and shared parameters already references.
   */
  shareOperationParts(operations: OperationParts[]): void {
    const uses = new Map<string, number>();
    const keyOf = (section: Section, part: unknown) =>
      isObject(part) && !('$ref' in part) ? `${section.section} ${canonical(part)}` : null;
    const count = (section: Section, part: unknown) => {
      const key = keyOf(section, part);
      if (key !== null) uses.set(key, (uses.get(key) ?? 0) + 1);
    };
    for (const operation of operations) {
      for (const response of Object.values(operation.responses ?? {})) count(this.responses, response);
      count(this.requestBodies, operation.requestBody);
      for (const parameter of operation.parameters ?? []) count(this.parameters, parameter);
    }
    const names = new Map<string, string>();
    const shared = (section: Section, part: unknown, name: string): unknown => {
      const key = keyOf(section, part);
      if (key === null || (uses.get(key) ?? 0) < 2) return part;
      if (!names.has(key)) names.set(key, name);
      return section.share(names.get(key)!, part);
    };
    for (const operation of operations) {
      const id = operation.operationId;
      if (id === undefined) continue;
      const responses = operation.responses ?? {};
      const successes = Object.keys(responses).filter((status) => Number(status) < 400);
      for (const [status, response] of Object.entries(responses)) {
        const sole = successes.length === 1 && successes[0] === status;
        responses[status] = shared(this.responses, response, sole ? id : `${id}.${status}`);
      }
      if (operation.requestBody !== undefined) {
        operation.requestBody = shared(this.requestBodies, operation.requestBody, id);
      }
      operation.parameters = operation.parameters?.map((parameter) =>
        shared(this.parameters, parameter, `${id}.${String((parameter as Json).name)}`),
      );
    }
  }

  /**
   * Every schema with a name for a title, wherever it appears (request and response bodies, parameters,
   * inside other components), becomes a reference to `components.schemas.<title>`.
   */
  shareNamedSchemas(document: { paths?: object; components?: Json }): void {
    const existing = (document.components?.schemas ?? {}) as Json;
    for (const [name, schema] of Object.entries(existing)) {
      this.schemas.entries.set(name, isObject(schema) ? this.withNamedChildren(schema) : schema);
    }
    for (const item of Object.values(document.paths ?? {}) as Json[]) {
      for (const operation of Object.values(item) as Json[]) {
        for (const parameter of (operation.parameters as Json[] | undefined) ?? []) {
          if (isObject(parameter.schema)) parameter.schema = this.named(parameter.schema);
        }
        this.nameMediaSchemas(operation.requestBody);
        for (const response of Object.values((operation.responses ?? {}) as Json))
          this.nameMediaSchemas(response);
      }
    }
  }

  private nameMediaSchemas(holder: unknown): void {
    if (!isObject(holder) || !isObject(holder.content)) return;
    for (const media of Object.values(holder.content)) {
      if (isObject(media) && isObject(media.schema)) media.schema = this.named(media.schema);
    }
  }

  /** The schema, or a reference when it is named; named schemas inside it are references either way. */
  private named(schema: Json): Json | Reference {
    const inside = this.withNamedChildren(schema);
    const title = schema.title;
    if (typeof title !== 'string' || !SCHEMA_NAME.test(title) || '$ref' in schema) return inside;
    return this.schemas.share(title, inside);
  }

  private withNamedChildren(schema: Json): Json {
    const copy: Json = { ...schema };
    for (const [keyword, value] of Object.entries(schema)) {
      if (SCHEMA_MAPS.has(keyword) && isObject(value)) {
        copy[keyword] = Object.fromEntries(
          Object.entries(value).map(([key, child]) => [key, isObject(child) ? this.named(child) : child]),
        );
      } else if (SUBSCHEMAS.has(keyword)) {
        if (Array.isArray(value))
          copy[keyword] = value.map((child) => (isObject(child) ? this.named(child) : child));
        else if (isObject(value)) copy[keyword] = this.named(value);
      }
    }
    return copy;
  }

  /** Lists what was shared under `components`, each section in name order. */
  writeInto(components: Json): void {
    components.schemas = sortedByName(this.schemas.entries);
    components.parameters = sortedByName(this.parameters.entries);
    components.headers = sortedByName(this.headers.entries);
    components.responses = sortedByName(this.responses.entries);
    if (this.requestBodies.entries.size > 0)
      components.requestBodies = sortedByName(this.requestBodies.entries);
  }
}

/** Keywords whose value maps names to schemas (their keys are data, not keywords). */
const SCHEMA_MAPS = new Set(['properties', 'patternProperties', 'dependentSchemas', '$defs', 'definitions']);

/** Keywords whose value is a schema or a list of schemas. */
const SUBSCHEMAS = new Set([
  'items',
  'prefixItems',
  'additionalProperties',
  'unevaluatedProperties',
  'unevaluatedItems',
  'contains',
  'propertyNames',
  'not',
  'if',
  'then',
  'else',
  'allOf',
  'anyOf',
  'oneOf',
]);
