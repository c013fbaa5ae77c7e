/**
 * Page arithmetic shared by every list endpoint (docs/design.md, "Lists and pages"). Two kinds of page:
 * - numbered pages (`/v1`): `page` and `limit`, answered with counts;
 * - keyset pages (`/v2`, `keyset` set): the rows strictly after (or before) a position, i.e. the sort
 *   value and id of the last row the client saw, answered with the positions of the page's first and last
 *   rows (src/platform/http/list-versions.ts turns those into signed cursors). No rows are skipped or counted, so
 *   a page costs the same at any depth.
 */

export const DEFAULT_PAGE_SIZE = 20;
export const MAX_PAGE_SIZE = 100;

export type SortOrder = 'asc' | 'desc';

export interface PageRequest<S extends string = string> {
  page: number;
  limit: number;
  sort: S;
  order: SortOrder;
  /** A keyset page instead of a numbered one: `page` is then ignored. */
  keyset?: KeysetRequest | undefined;
}

/** A sort column's value as stored: text (names, timestamps), a number, or null (never used yet). */
export type SortValue = string | number | null;

/** Where a keyset page starts: the sort value and id of the row just outside it. */
export interface KeysetPosition {
  value: SortValue;
  id: string;
}

/** `next`: the rows after `after` in the requested order; `prev`: the rows before it. */
export type KeysetDirection = 'next' | 'prev';

export interface KeysetRequest {
  /** null: from the start of the ordering (the first page). */
  after: KeysetPosition | null;
  direction: KeysetDirection;
}

/** A keyset page's place in the ordering: its first and last rows, and whether rows lie beyond them. */
export interface KeysetPagination {
  kind: 'keyset';
  limit: number;
  first: KeysetPosition | null;
  last: KeysetPosition | null;
  has_next: boolean;
  has_prev: boolean;
}

export interface Pagination {
  page: number;
  limit: number;
  total_items: number;
  total_pages: number;
  has_next: boolean;
  has_prev: boolean;
}

export interface Page<T> {
  items: T[];
  pagination: Pagination | KeysetPagination;
}

/**
 * The keyset pagination of a page read `limit + 1` rows deep in the walk's direction: `more` says the
 * extra row was there. `positions` are the page's rows in the requested order.
 */
export function keysetPagination(
  request: { limit: number; keyset: KeysetRequest },
  positions: readonly KeysetPosition[],
  more: boolean,
): KeysetPagination {
  const { after, direction } = request.keyset;
  // Walking forward, rows lie behind the page when it started after a position; walking back, the page
  // ends just before the position it started from, so rows lie ahead of it.
  return {
    kind: 'keyset',
    limit: request.limit,
    first: positions[0] ?? null,
    last: positions.at(-1) ?? null,
    has_next: direction === 'next' ? more : after !== null,
    has_prev: direction === 'prev' ? more : after !== null,
  };
}

export function pagination(page: number, limit: number, totalItems: number): Pagination {
  const totalPages = Math.ceil(totalItems / limit);
  return {
    page,
    limit,
    total_items: totalItems,
    total_pages: totalPages,
    has_next: page < totalPages,
    has_prev: page > 1,
  };
}

export function offsetOf(request: { page: number; limit: number }): number {
  return (request.page - 1) * request.limit;
}

/**
 * Pages an in-memory collection (the catalogue) exactly as the store pages rows. For keyset pages an
 * item's id is its place in `all` (the catalogue is fixed for a given build), and ties in the sort keep
 * that order, as the store's id tie-breaker does.
 */
export function pageArray<T>(
  all: readonly T[],
  request: PageRequest<Extract<keyof T, string>>,
  filter: (item: T) => boolean = () => true,
): Page<T> {
  const matching = all.map((item, index) => ({ item, id: String(index) })).filter(({ item }) => filter(item));
  const direction = request.order === 'asc' ? 1 : -1;
  const sorted = [...matching].sort((a, b) => {
    const left = a.item[request.sort];
    const right = b.item[request.sort];
    if (left === right) return 0;
    return (left < right ? -1 : 1) * direction;
  });
  if (request.keyset) {
    const keyset = request.keyset;
    const at = keyset.after === null ? -1 : sorted.findIndex((entry) => entry.id === keyset.after?.id);
    const beyond =
      keyset.direction === 'next' || at < 0 ? sorted.slice(at + 1) : sorted.slice(0, at).reverse();
    const taken = beyond.slice(0, request.limit);
    if (keyset.direction === 'prev' && at >= 0) taken.reverse();
    const positions = taken.map(({ item, id }) => ({ value: sortValueOf(item[request.sort]), id }));
    const effective = at < 0 ? { after: null, direction: 'next' as const } : keyset;
    return {
      items: taken.map(({ item }) => item),
      pagination: keysetPagination(
        { limit: request.limit, keyset: effective },
        positions,
        beyond.length > request.limit,
      ),
    };
  }
  const start = offsetOf(request);
  return {
    items: sorted.slice(start, start + request.limit).map(({ item }) => item),
    pagination: pagination(request.page, request.limit, matching.length),
  };
}

function sortValueOf(value: unknown): SortValue {
  return typeof value === 'string' || typeof value === 'number' ? value : null;
}
