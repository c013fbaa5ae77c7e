/**
 * What an operation can answer, for the route schemas and the OpenAPI document.
 *
 * A route declares its success answer (`described`) and the errors its own service can raise
 * (`errorResponses(404, 409)`). The answers the shared plugins give on every route of a kind (401,
 * 403 and 429 from the guard, 409 and 422 from idempotency, 413 from the body parser, 400, 408, 431, 500
 * and 503 from anywhere) and the headers they set are added to the document by openapi.ts from
 * `pipelineErrors` and `responseHeaders`, so a new resource inherits them without a line.
 */
import { CloneType, type TSchema, Type } from '@sinclair/typebox';
import { describeStatus, ERROR_STATUSES, type ErrorStatus } from '../error-catalogue.js';
import { ErrorEnvelope } from './schemas.js';

export type { ErrorStatus };

/** What each error status means in the document: its codes and their meanings, from the catalogue. */
export const ERROR_DESCRIPTIONS = Object.fromEntries(
  ERROR_STATUSES.map((status) => [status, describeStatus(status)]),
) as Record<ErrorStatus, string>;

function errorEnvelope(status: ErrorStatus) {
  return Type.Ref(ErrorEnvelope, { description: ERROR_DESCRIPTIONS[status] });
}

/** The error envelope under each of `statuses`, for a route's `response` schema. */
export function errorResponses<S extends ErrorStatus>(...statuses: S[]) {
  return Object.fromEntries(statuses.map((status) => [status, errorEnvelope(status)])) as Record<
    S,
    ReturnType<typeof errorEnvelope>
  >;
}

/**
 * A success schema with the sentence the document shows for its answer (otherwise "Default Response"). The
 * sentence describes the answer, not the schema, so the same envelope stays one schema however many
 * answers carry it.
 */
export function described<T extends TSchema>(schema: T, description: string): T {
  return CloneType(schema, { 'x-response-description': description });
}

/** An example request body shown in the document; it must satisfy the schema (spectral checks it). */
export function withExample<T extends TSchema>(schema: T, example: unknown): T {
  return CloneType(schema, { examples: [example] });
}

export interface OperationKind {
  method: string;
  /** No API key needed (health checks): no guard, so no 401, 403, 429 or rate-limit headers. */
  public: boolean;
}

const BODY_METHODS = new Set(['post', 'put', 'patch', 'delete']);

/**
 * Errors the shared plugins can answer on an operation of this kind, whatever the route does:
 * 400 from the transport (plain HTTP) and request parsing, 408 and 431 from Node's HTTP parser, and 429
 * when such a malformed request finds the client's address out of budget (early-errors.ts), 500 and 503
 * anywhere; behind the guard 401 and 403; where a body is parsed 413; on guarded POSTs 409 and 422 from
 * Idempotency-Key.
 */
export function pipelineErrors(kind: OperationKind): ErrorStatus[] {
  const method = kind.method.toLowerCase();
  const statuses: ErrorStatus[] = [400, 408, 429, 431, 500, 503];
  if (!kind.public) statuses.push(401, 403);
  if (BODY_METHODS.has(method)) statuses.push(413);
  if (!kind.public && method === 'post') statuses.push(409, 422);
  return statuses;
}

/** Response header components, by the name the document gives them. */
export const HEADER_COMPONENTS = {
  'X-Request-Id': {
    description: 'The id of this request (`req_…`), also in `metadata.request_id`; quote it to the operator',
    schema: { type: 'string', pattern: '^req_' },
  },
  'X-RateLimit-Limit': {
    description: "Requests per hour the account's plan (or its override) allows",
    schema: { type: 'integer', minimum: 0 },
  },
  'X-RateLimit-Remaining': {
    description: 'Requests left in the current hour window',
    schema: { type: 'integer', minimum: 0 },
  },
  'X-RateLimit-Reset': {
    description: 'End of the current hour window, in Unix seconds',
    schema: { type: 'integer', minimum: 0 },
  },
  'Retry-After': {
    description: 'Seconds to wait before retrying (the same as `error.retry_after`)',
    schema: { type: 'integer', minimum: 0 },
  },
  'Idempotent-Replayed': {
    description:
      'Present, and `true`, when this is the saved answer to an earlier request with the same Idempotency-Key',
    schema: { type: 'string', enum: ['true'] },
  },
} as const;

export type HeaderName = keyof typeof HEADER_COMPONENTS;

export const RATE_LIMIT_HEADERS: readonly HeaderName[] = [
  'X-RateLimit-Limit',
  'X-RateLimit-Remaining',
  'X-RateLimit-Reset',
];

/**
 * Statuses that can be answered before the guard has counted the request (plain HTTP, a malformed URL or
 * request, a server shutting down, counters that cannot be reached). Those answers are counted on the
 * client address's budget instead, and carry its headers, unless the counters cannot be reached: the
 * document cannot promise the headers on them.
 */
const EARLY_STATUSES = new Set([400, 408, 431, 500, 503]);

/** The headers a response of this operation carries, and whether each is always there. */
export function responseHeaders(kind: OperationKind, status: number): [HeaderName, boolean][] {
  const headers: [HeaderName, boolean][] = [['X-Request-Id', true]];
  // Every answer reports a budget: a public operation's is its client address's, reported without being
  // spent by the health checks, and left out only when the counters cannot be asked (Redis down).
  const always = !kind.public && !EARLY_STATUSES.has(status);
  for (const name of RATE_LIMIT_HEADERS) headers.push([name, always]);
  if (status === 429) headers.push(['Retry-After', true]);
  // Saved answers are replayed whatever their status, except 5xx, which are never saved.
  if (!kind.public && kind.method.toLowerCase() === 'post' && status < 500) {
    headers.push(['Idempotent-Replayed', false]);
  }
  return headers;
}

/** The request header every guarded POST accepts (plugins/idempotency.ts). */
export const IDEMPOTENCY_KEY_PARAMETER = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description:
    'Makes the request safe to retry: for 24 hours the same key with the same request returns the saved ' +
    'answer (with `Idempotent-Replayed: true`) instead of running again',
  schema: { type: 'string', minLength: 1, maxLength: 255 },
} as const;
