/**
 * The store half of the one list helper: counts the filtered rows and fetches one page of them, ordered by
 * the requested column with the id as tie-breaker so pages never overlap or skip rows.
 */
import { type SelectQueryBuilder, sql } from 'kysely';
import { offsetOf, type Page, type PageRequest, pagination } from '../domain/pagination.js';

export async function fetchPage<DB, TB extends keyof DB, O>(
  query: SelectQueryBuilder<DB, TB, O>,
  request: PageRequest,
  idColumn = 'id',
): Promise<Page<O>> {
  const countRow = await query
    .clearSelect()
    .select((eb) => eb.fn.countAll<number>().as('total'))
    .executeTakeFirst();
  const total = Number((countRow as { total?: number } | undefined)?.total ?? 0);
  const items = await query
    .orderBy(sql.ref(request.sort), request.order)
    .orderBy(sql.ref(idColumn), request.order)
    .limit(request.limit)
    .offset(offsetOf(request))
    .execute();
  return { items, pagination: pagination(request.page, request.limit, total) };
}
