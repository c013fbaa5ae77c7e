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
 * What a numbered page promises while rows are being written (events ordering): the count and the page
 * are two statements, and on PostgreSQL (READ COMMITTED) each sees what had committed when it began, so
 * a commit can land between them (SQLite's group commit too: the page may wait for a batch the count did
 * not). The count therefore never cuts a page read from the front: it reads `limit` rows, so a page is
 * always a contiguous run of the list as its own statement saw it, never one with a counted row missing
 * (a count of 1 taken before `instance.started` committed, then `limit 1` newest first, showed
 * `instance.started` without the `instance.created` that preceded it). `total_items` is then made to
 * agree with the page: at least the rows up to the page's end, and exactly that when a page read from
 * the front came back short. A deep page read from the far end is placed by the count, so a commit in
 * between moves it as a commit between two requests moves any offset page; it too is contiguous.
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
    // From the front, `limit` and not `wanted`: the count may predate rows this read sees (see above).
    .limit(reversed ? wanted : request.limit)
    .offset(reversed ? fromEnd : offset);

  let items: O[];
  /** Rows the page statement returned (with `load`, a row deleted before it was loaded is not shown). */
  let read: number;
  if (options.load) {
    const ids = (
      await ordered
        .clearSelect()
        .select(sql<string>`${sql.ref(idColumn)}`.as('page_id'))
        .execute()
    ).map((row) => (row as unknown as { page_id: string }).page_id);
    read = ids.length;
    const rows = await options.load(ids);
    const byId = new Map(rows.map((row) => [(row as Record<string, unknown>)[idColumn] as string, row]));
    items = ids.flatMap((id) => byId.get(id) ?? []);
  } else {
    items = await ordered.execute();
    read = items.length;
  }
  if (reversed) items.reverse();
  return {
    items,
    pagination: pagination(
      request.page,
      request.limit,
      pageTotal(total, offset, read, request.limit, reversed),
    ),
  };
}

/**
 * `total_items` as the page itself shows it: the count, unless the page proves it stale. A page read from
 * the front that came back short reached the end of the list, so the list held exactly the rows up to
 * it; one that came back full shows the list holds at least that many.
 */
function pageTotal(counted: number, offset: number, shown: number, limit: number, reversed: boolean): number {
  // Nothing at all where the count saw rows: they were deleted since, and how many is not known.
  if (reversed || shown === 0) return counted;
  return shown < limit ? offset + shown : Math.max(counted, offset + shown);
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
