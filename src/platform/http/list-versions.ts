/**
 * Cursor pagination for the /v2 scope (docs/design.md, "Versions and cursors"). The route plugins are written once,
 * with /v1's numbered pages (schemas.ts ListQuery / ListEnvelope); registered under /v2 with this plugin's
 * hooks, every list route among them becomes a cursor list, with no change to the route file:
 *
 * 1. onRoute: a route whose query has `page` is a list. Its query schema loses `page` and gains `cursor`;
 *    its 200 schema's `pagination` becomes `{limit, next_cursor, prev_cursor}`.
 * 2. preHandler (after authentication and validation): the cursor is opened (CursorSigner: a MAC, so a
 *    forged or altered cursor is refused) and checked against the request's sort, order and the digest of
 *    its route, path parameters and filters; then `request.query` gets `keyset` (platform/domain/pagination.ts),
 *    which the handler passes down with the other page fields, and the store reads a keyset page.
 * 3. preSerialization: the store's keyset pagination (positions of the first and last rows) is sealed
 *    into next/prev cursors, and the `Link` header (RFC 8288, relative URLs) names the same pages.
 *
 * Every refusal is 400 invalid_request naming the field `cursor`.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { type CursorContent, CursorRefused, type CursorSigner, filtersDigest } from '../domain/cursors.js';
import type { KeysetPagination, KeysetRequest, SortOrder } from '../domain/pagination.js';
import { InvalidRequest } from '../errors.js';
import { CursorPaginationSchema, CursorParameter } from './schemas.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Set by cursorLists() on the /v2 list routes. */
    cursorList?: boolean;
    /** A route with `page` that keeps numbered pages on /v2 (its answer is worked out whole each time). */
    numberedPages?: boolean;
  }
}

/** The sort, order and row selection a request's cursors are bound to. */
interface Binding {
  sort: string;
  order: SortOrder;
  filters: string;
}

const bindings = new WeakMap<FastifyRequest, Binding>();

/** Registers the three hooks on a version scope; call before that scope registers its routes. */
export function cursorLists(scope: FastifyInstance, cursors: CursorSigner): void {
  scope.addHook('onRoute', toCursorList);
  scope.addHook('preHandler', (request, _reply, done) => {
    if (!request.routeOptions.config.cursorList) return done();
    try {
      openCursor(request, cursors);
    } catch (error) {
      return done(error as Error);
    }
    done();
  });
  scope.addHook('preSerialization', (request, reply, payload, done) => {
    const binding = bindings.get(request);
    const body = payload as { pagination?: KeysetPagination } | null;
    if (binding === undefined || body?.pagination?.kind !== 'keyset') return done(null, payload);
    done(null, { ...body, pagination: sealPagination(request, reply, cursors, binding, body.pagination) });
  });
}

/** onRoute: a numbered-page list route becomes a cursor list (new schema objects; the shared ones stay). */
function toCursorList(route: RouteOptions): void {
  const query = route.schema?.querystring as JsonObjectSchema | undefined;
  if (query?.properties?.page === undefined || route.config?.numberedPages) return;
  const { page: _page, ...others } = query.properties;
  const ok = (route.schema?.response as Record<string, JsonObjectSchema> | undefined)?.[200];
  route.schema = {
    ...route.schema,
    querystring: {
      ...query,
      properties: { cursor: CursorParameter, ...others },
      required: (query.required ?? []).filter((name) => name !== 'page'),
    },
    ...(ok?.properties
      ? {
          response: {
            ...(route.schema?.response as object),
            200: { ...ok, properties: { ...ok.properties, pagination: CursorPaginationSchema } },
          },
        }
      : {}),
  };
  route.config = { ...route.config, cursorList: true };
}

interface JsonObjectSchema {
  properties?: Record<string, unknown>;
  required?: string[];
}

function openCursor(request: FastifyRequest, cursors: CursorSigner): void {
  const { cursor, limit, sort, order, ...filters } = request.query as Record<string, unknown> & {
    cursor?: string;
    limit: number;
    sort: string;
    order: SortOrder;
  };
  const binding: Binding = {
    sort,
    order,
    filters: filtersDigest({ route: request.routeOptions.url, params: request.params, filters }),
  };
  let keyset: KeysetRequest = { after: null, direction: 'next' };
  if (cursor !== undefined) {
    const content = opened(cursors, cursor);
    const changed = (['sort', 'order', 'filters'] as const).filter((part) => content[part] !== binding[part]);
    if (changed.length > 0) {
      throw new InvalidRequest(
        `This cursor belongs to a list with another ${changed.join(' and ')}: ` +
          'keep the sort, order and filters of the first page, or start again without a cursor',
        { field: 'cursor', changed },
      );
    }
    keyset = { after: content.after, direction: content.direction };
  }
  bindings.set(request, binding);
  request.query = { ...filters, limit, sort, order, page: 1, keyset };
}

function opened(cursors: CursorSigner, cursor: string): CursorContent {
  try {
    return cursors.open(cursor);
  } catch (error) {
    if (!(error instanceof CursorRefused)) throw error;
    throw new InvalidRequest(
      error.reason === 'forged'
        ? 'The cursor has been altered or was made by another installation; use the cursors as answered'
        : 'The cursor is not valid: pass a next_cursor or prev_cursor exactly as answered',
      { field: 'cursor' },
    );
  }
}

function sealPagination(
  request: FastifyRequest,
  reply: FastifyReply,
  cursors: CursorSigner,
  binding: Binding,
  page: KeysetPagination,
) {
  const seal = (direction: 'next' | 'prev') => {
    const at = direction === 'next' ? page.last : page.first;
    const more = direction === 'next' ? page.has_next : page.has_prev;
    return more && at !== null ? cursors.seal({ ...binding, direction, after: at }) : null;
  };
  const next = seal('next');
  const prev = seal('prev');
  const links = [
    ...(next ? [`<${withCursor(request.url, next)}>; rel="next"`] : []),
    ...(prev ? [`<${withCursor(request.url, prev)}>; rel="prev"`] : []),
  ];
  if (links.length > 0) reply.header('link', links.join(', '));
  return { limit: page.limit, next_cursor: next, prev_cursor: prev };
}

/** The request's own URL (path and query as sent) with `cursor` replaced. */
function withCursor(url: string, cursor: string): string {
  const mark = url.indexOf('?');
  const path = mark < 0 ? url : url.slice(0, mark);
  const query = new URLSearchParams(mark < 0 ? '' : url.slice(mark + 1));
  query.set('cursor', cursor);
  return `${path}?${query.toString()}`;
}
