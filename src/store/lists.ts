/**
 * The store half of the one list helper: counts the filtered rows (unless the caller knows the total,
 * e.g. from maintained counters) and fetches one page of them, ordered by the requested column with the
 * id as tie-breaker so pages never overlap or skip rows.
 *
 * Deep pages: a page is read from whichever end of the ordering is nearer (the order flipped, the page
 * reversed back), so no page skips more than half the rows. With `load`, the page query selects ids only
 * (served from an index that ends in the id) and `load` fetches the rows for those ids, so skipped rows
 * are never read from the table.
 */
import { type SelectQueryBuilder, sql } from 'kysely';
import { offsetOf, type Page, type PageRequest, pagination } from '../domain/pagination.js';

export interface PageOptions<O> {
  idColumn?: string;
  /** The number of rows the query matches, when the caller knows it without counting. */
  total?: number;
  /** Loads full rows by id, in any order; the page query then selects only the id column. */
  load?: (ids: string[]) => Promise<O[]>;
}

export async function fetchPage<DB, TB extends keyof DB, O>(
  query: SelectQueryBuilder<DB, TB, O>,
  request: PageRequest,
  options: PageOptions<O> = {},
): Promise<Page<O>> {
  const idColumn = options.idColumn ?? 'id';
  const total = options.total ?? (await countRows(query));
  const offset = offsetOf(request);
  const wanted = Math.max(0, Math.min(request.limit, total - offset));
  if (wanted === 0) return { items: [], pagination: pagination(request.page, request.limit, total) };

  const fromEnd = total - offset - wanted;
  const reversed = fromEnd < offset;
  const flip = (order: 'asc' | 'desc') => (order === 'asc' ? 'desc' : 'asc');
  const order = reversed ? flip(request.order) : request.order;
  const ordered = query
    .orderBy(sql.ref(request.sort), order)
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

async function countRows<DB, TB extends keyof DB, O>(query: SelectQueryBuilder<DB, TB, O>): Promise<number> {
  const row = await query
    .clearSelect()
    .select((eb) => eb.fn.countAll<number>().as('total'))
    .executeTakeFirst();
  return Number((row as { total?: number } | undefined)?.total ?? 0);
}
