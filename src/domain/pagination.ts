/** Page arithmetic shared by every list endpoint (DESIGN.md §4 "Lists"). */

export const DEFAULT_PAGE_SIZE = 20;
export const MAX_PAGE_SIZE = 100;

export type SortOrder = 'asc' | 'desc';

export interface PageRequest<S extends string = string> {
  page: number;
  limit: number;
  sort: S;
  order: SortOrder;
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
  pagination: Pagination;
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

/** Pages an in-memory collection (the catalogue) exactly as the store pages rows. */
export function pageArray<T>(
  all: readonly T[],
  request: PageRequest<Extract<keyof T, string>>,
  filter: (item: T) => boolean = () => true,
): Page<T> {
  const matching = all.filter(filter);
  const direction = request.order === 'asc' ? 1 : -1;
  const sorted = [...matching].sort((a, b) => {
    const left = a[request.sort];
    const right = b[request.sort];
    if (left === right) return 0;
    return (left < right ? -1 : 1) * direction;
  });
  const start = offsetOf(request);
  return {
    items: sorted.slice(start, start + request.limit),
    pagination: pagination(request.page, request.limit, matching.length),
  };
}
