/**
 * JSON Schemas shared by the routes: the envelopes (docs/design.md, "Envelope and errors"), and the one
 * list-query schema every list endpoint is built from. Route schemas drive validation, response
 * serialisation (fields not in a schema never leave the server) and the generated OpenAPI document.
 */
import { type TSchema, type TUnsafe, Type } from '@sinclair/typebox';
import type { RouteOptions } from 'fastify';
import { MAX_CURSOR_LENGTH } from '../domain/cursors.js';
import { MAX_TAGS, RESOURCE_NAME_PATTERN, TAG_VALUE_MAX_LENGTH } from '../domain/labels.js';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from '../domain/pagination.js';
import { MAX_NAME_LENGTH, PRINTABLE_NAME_PATTERN, PRINTABLE_NAME_RULE } from '../domain/validation.js';
import { ERROR_CODES } from '../error-catalogue.js';

/** A string enum as a plain JSON Schema `enum`, so validation errors can list `allowed_values`. */
export function StringEnum<T extends string>(
  values: readonly T[],
  options: Record<string, unknown> = {},
): TUnsafe<T> {
  return Type.Unsafe<T>({ type: 'string', enum: [...values], ...options });
}

/** A name a person gives something (an API key, an account, a company): platform/domain/validation.ts's rule. */
export function PrintableName(options: { description?: string } = {}) {
  return Type.String({
    minLength: 1,
    maxLength: MAX_NAME_LENGTH,
    pattern: PRINTABLE_NAME_PATTERN,
    description: options.description ?? `${PRINTABLE_NAME_RULE} (docs/api.md, Names)`,
  });
}

/** A resource's name (instances, volumes, snapshots, VPNs, firewall rules). */
export const ResourceName = Type.String({
  pattern: RESOURCE_NAME_PATTERN,
  description: '1–64 characters: letters, digits, . _ -',
});

/** A resource's tags; their keys are checked by checkTagKeys (platform/domain/labels.ts). */
export const Tags = Type.Record(Type.String(), Type.String({ maxLength: TAG_VALUE_MAX_LENGTH }), {
  maxProperties: MAX_TAGS,
  description: `Up to ${MAX_TAGS} tags; keys 1–128 characters of letters, digits, . _ / -; values up to ${TAG_VALUE_MAX_LENGTH} characters`,
});

/** The schema, or null. */
export const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(schema: T) =>
  Type.Union([schema, Type.Null()]);

export const Timestamp = Type.String({ format: 'date-time', description: 'ISO 8601 UTC' });

const Metadata = Type.Object(
  {
    request_id: Type.String(),
    timestamp: Timestamp,
  },
  { title: 'Metadata' },
);

export const PaginationSchema = Type.Object(
  {
    page: Type.Integer(),
    limit: Type.Integer(),
    total_items: Type.Integer(),
    total_pages: Type.Integer(),
    has_next: Type.Boolean(),
    has_prev: Type.Boolean(),
  },
  { title: 'Pagination' },
);

/** The pagination of a /v2 list (list-versions.ts): cursors instead of page numbers and counts. */
export const CursorPaginationSchema = Type.Object(
  {
    limit: Type.Integer(),
    next_cursor: Type.Union([Type.String(), Type.Null()], {
      description: 'Pass as `cursor` for the page after this one; null on the last page',
    }),
    prev_cursor: Type.Union([Type.String(), Type.Null()], {
      description: 'Pass as `cursor` for the page before this one; null on the first page',
    }),
  },
  { title: 'CursorPagination' },
);

/** The `cursor` query parameter of a /v2 list. */
export const CursorParameter = Type.String({
  minLength: 1,
  maxLength: MAX_CURSOR_LENGTH,
  description:
    'An opaque `next_cursor` or `prev_cursor` from the previous answer, with the same sort, order and filters ' +
    '(400 otherwise). Leave out for the first page.',
});

/** `{success, data, metadata}`; around a named resource it is named too (`VolumeEnvelope`), so the document lists it once. */
export function Envelope<T extends TSchema>(data: T) {
  const name = typeof data.title === 'string' ? { title: `${data.title}Envelope` } : {};
  return Type.Object({ success: Type.Literal(true), data, metadata: Metadata }, name);
}

export function ListEnvelope<T extends TSchema>(item: T) {
  return Type.Object({
    success: Type.Literal(true),
    data: Type.Array(item),
    pagination: PaginationSchema,
    metadata: Metadata,
  });
}

/**
 * The catalogue's codes, listed rather than an `enum`: a client generated from this document must still
 * accept a code added later.
 */
const ERROR_CODE_DESCRIPTION =
  'Machine-readable error code (docs/api.md, Envelope and errors): ' +
  ERROR_CODES.map((code) => `\`${code}\``).join(', ');

export const ErrorEnvelope = Type.Object(
  {
    success: Type.Literal(false),
    error: Type.Object({
      code: Type.String({ description: ERROR_CODE_DESCRIPTION }),
      message: Type.String(),
      details: Type.Optional(Type.Object({}, { additionalProperties: true })),
      retry_after: Type.Optional(Type.Integer({ description: 'Seconds to wait (rate_limit_exceeded only)' })),
    }),
    metadata: Metadata,
  },
  { $id: 'ErrorEnvelope', title: 'ErrorEnvelope' },
);

/** Response schemas of a route: its success body plus the shared error envelope. */
export function responses<S extends Record<number, TSchema>>(success: S) {
  const error = Type.Ref(ErrorEnvelope);
  return { ...success, '4xx': error, '5xx': error };
}

export const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });

/**
 * The query string of a list endpoint: page, limit, sort, order and the endpoint's own filters.
 * Unknown parameters are rejected, so a typo in a filter name is an error, not a silently unfiltered list.
 */
export function ListQuery<S extends string, F extends Record<string, TSchema> = Record<never, never>>(
  sortFields: readonly S[],
  defaults: { sort: NoInfer<S>; order?: 'asc' | 'desc' },
  filters: F = {} as F,
) {
  return Type.Object(
    {
      page: Type.Integer({ minimum: 1, default: 1 }),
      limit: Type.Integer({ minimum: 1, maximum: MAX_PAGE_SIZE, default: DEFAULT_PAGE_SIZE }),
      sort: StringEnum(sortFields, { default: defaults.sort }),
      order: StringEnum(['asc', 'desc'] as const, { default: defaults.order ?? 'desc' }),
      ...filters,
    },
    { additionalProperties: false },
  );
}

/** The query string of a route that takes no parameters: any parameter is unknown, so refused. */
export const NoQuery = Type.Object({}, { additionalProperties: false });

/**
 * onRoute hook: every route refuses query parameters it does not know (docs/api.md), whether or not it
 * declares a query schema; a typo is an error rather than something silently ignored. Swagger UI's pages
 * under /docs are left alone: they are not the API.
 */
export function rejectUnknownQuery(route: RouteOptions): void {
  if (route.url.startsWith('/docs')) return;
  route.schema ??= {};
  const query = route.schema.querystring as Record<string, unknown> | undefined;
  if (query === undefined) route.schema.querystring = NoQuery;
  else if (query.type === 'object' && query.additionalProperties === undefined) {
    route.schema.querystring = { ...query, additionalProperties: false };
  }
}
