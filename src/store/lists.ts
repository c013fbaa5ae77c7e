/**
 * The store half of the one list helper: counts the filtered rows (unless the caller knows the total,
 * e.g. from maintained counters) and fetches one page of them, ordered by the requested column with the
 * id as tie-breaker so pages never overlap or skip rows.
 *
 * Deep pages: a page is read from whichever end of the ordering is nearer (the order flipped, the page
 * reversed back), so no page skips more than half the rows. With `load`, the page query selects ids only
 * (served from an index that ends in the id) and `load` fetches the rows for those ids, so skipped rows
 * are never read from the table.
 *
 * Keyset pages (`request.keyset`, the /v2 cursors): the rows strictly beyond a (sort value, id) position,
 * `sort >= v and (sort > v or id > id0)` (mirrored when walking back), which both stores serve as a range
 * scan of the same indexes; `limit + 1` rows are read so the page knows whether more follow, and nothing
 * is counted. A nullable sort column (PageOptions.nullableSorts) orders its nulls as the smallest values,
 * in both stores and both kinds of page: first ascending, last descending.
 */
import { type SelectQueryBuilder, sql } from 'kysely';
import {
  type KeysetPosition,
  type KeysetRequest,
  keysetPagination,
  offsetOf,
  type Page,
  type PageRequest,
  pagination,
  type SortOrder,
} from '../domain/pagination.js';

export interface PageOptions<O> {
  idColumn?: string;
  /** The number of rows the query matches, when the caller knows it without counting. */
  total?: number;
  /** Loads full rows by id, in any order; the page query then selects only the id column. */
  load?: (ids: string[]) => Promise<O[]>;
  /** Sort columns that may hold null; the others are left without a NULLS clause (it can cost an index). */
  nullableSorts?: readonly string[];
}

export async function fetchPage<DB, TB extends keyof DB, O>(
  query: SelectQueryBuilder<DB, TB, O>,
  request: PageRequest,
  options: PageOptions<O> = {},
): Promise<Page<O>> {
  const idColumn = options.idColumn ?? 'id';
  if (request.keyset) return fetchKeysetPage(query, { ...request, keyset: request.keyset }, options);
  const nullable = options.nullableSorts?.includes(request.sort) ?? false;
  const total = options.total ?? (await countRows(query));
  const offset = offsetOf(request);
  const wanted = Math.max(0, Math.min(request.limit, total - offset));
  if (wanted === 0) return { items: [], pagination: pagination(request.page, request.limit, total) };

  const fromEnd = total - offset - wanted;
  const reversed = fromEnd < offset;
  const flip = (order: 'asc' | 'desc') => (order === 'asc' ? 'desc' : 'asc');
  const order = reversed ? flip(request.order) : request.order;
  const ordered = query
    .orderBy(sortTerm(request.sort, order, nullable))
    .orderBy(sql.ref(idColumn), order)
    .limit(wanted)
    .offset(reversed ? fromEnd : offset);

  let items: O[];
  if (options.load) {
    const ids = (
      await ordered
        .clearSelect()
        .select(sql<string>`${sql.ref(idColumn)}`.as('page_id'))
        .execute()
    ).map((row) => (row as unknown as { page_id: string }).page_id);
    const rows = await options.load(ids);
    const byId = new Map(rows.map((row) => [(row as Record<string, unknown>)[idColumn] as string, row]));
    items = ids.flatMap((id) => byId.get(id) ?? []);
  } else {
    items = await ordered.execute();
  }
  if (reversed) items.reverse();
  return { items, pagination: pagination(request.page, request.limit, total) };
}

/** ORDER BY term of the sort column; a nullable one places its nulls as the smallest values. */
function sortTerm(sort: string, order: SortOrder, nullable: boolean) {
  const nulls = order === 'asc' ? sql`nulls first` : sql`nulls last`;
  return nullable
    ? sql`${sql.ref(sort)} ${sql.raw(order)} ${nulls}`
    : sql`${sql.ref(sort)} ${sql.raw(order)}`;
}

/**
 * The rows strictly beyond `after` in a walk by (sort, id): ascending walks go to greater values, and
 * nulls (the smallest values) come first.
 */
function beyond(
  sort: string,
  idColumn: string,
  after: KeysetPosition,
  ascending: boolean,
  nullable: boolean,
) {
  const column = sql.ref(sort);
  const id = sql.ref(idColumn);
  if (after.value === null) {
    return ascending
      ? sql<boolean>`((${column} is null and ${id} > ${after.id}) or ${column} is not null)`
      : sql<boolean>`(${column} is null and ${id} < ${after.id})`;
  }
  // The first term is a plain range on the index (sort, id); the second drops the rows tied with `after`
  // at or before its id.
  const range = ascending
    ? sql<boolean>`(${column} >= ${after.value} and (${column} > ${after.value} or ${id} > ${after.id}))`
    : sql<boolean>`(${column} <= ${after.value} and (${column} < ${after.value} or ${id} < ${after.id}))`;
  return !ascending && nullable ? sql<boolean>`(${range} or ${column} is null)` : range;
}

async function fetchKeysetPage<DB, TB extends keyof DB, O>(
  query: SelectQueryBuilder<DB, TB, O>,
  request: PageRequest & { keyset: KeysetRequest },
  options: PageOptions<O>,
): Promise<Page<O>> {
  const idColumn = options.idColumn ?? 'id';
  const nullable = options.nullableSorts?.includes(request.sort) ?? false;
  const { after, direction } = request.keyset;
  // Walking back (prev) reads the rows before `after` nearest first, i.e. in the opposite order.
  const ascending = (request.order === 'asc') === (direction === 'next');
  const walk: SortOrder = ascending ? 'asc' : 'desc';
  let bounded = query;
  if (after !== null) bounded = bounded.where(beyond(request.sort, idColumn, after, ascending, nullable));
  const ordered = bounded
    .orderBy(sortTerm(request.sort, walk, nullable))
    .orderBy(sql.ref(idColumn), walk)
    .limit(request.limit + 1);
  const positionColumns = [
    sql<string>`${sql.ref(idColumn)}`.as('page_id'),
    sql<string | number | null>`${sql.ref(request.sort)}`.as('page_sort'),
  ] as const;

  type Positioned = { page_id: string; page_sort: string | number | null };
  let rows: { row: O; position: KeysetPosition }[];
  if (options.load) {
    const found = (await ordered.clearSelect().select(positionColumns).execute()) as unknown as Positioned[];
    const page = found.slice(0, request.limit);
    const loaded = await options.load(page.map((row) => row.page_id));
    const byId = new Map(loaded.map((row) => [(row as Record<string, unknown>)[idColumn] as string, row]));
    rows = page.flatMap((row) => {
      const loadedRow = byId.get(row.page_id);
      return loadedRow === undefined ? [] : [{ row: loadedRow, position: positionOf(row) }];
    });
    return keysetResult(rows, request, found.length > request.limit);
  }
  const found = (await ordered.select(positionColumns).execute()) as unknown as (Positioned &
    Record<string, unknown>)[];
  rows = found.slice(0, request.limit).map(({ page_id, page_sort, ...row }) => ({
    row: row as O,
    position: positionOf({ page_id, page_sort }),
  }));
  return keysetResult(rows, request, found.length > request.limit);
}

function positionOf(row: { page_id: string; page_sort: string | number | null }): KeysetPosition {
  // PostgreSQL hands bigint columns back as strings; either form compares the same in SQL.
  return { value: row.page_sort, id: row.page_id };
}

function keysetResult<O>(
  rows: { row: O; position: KeysetPosition }[],
  request: PageRequest & { keyset: KeysetRequest },
  more: boolean,
): Page<O> {
  if (request.keyset.direction === 'prev') rows.reverse();
  return {
    items: rows.map(({ row }) => row),
    pagination: keysetPagination(
      request,
      rows.map(({ position }) => position),
      more,
    ),
  };
}

async function countRows<DB, TB extends keyof DB, O>(query: SelectQueryBuilder<DB, TB, O>): Promise<number> {
  const row = await query
    .clearSelect()
    .select((eb) => eb.fn.countAll<number>().as('total'))
    .executeTakeFirst();
  return Number((row as { total?: number } | undefined)?.total ?? 0);
}
