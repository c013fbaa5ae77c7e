/**
 * Metered intervals (`meter_segments`): the durable history billing reads. The lifecycle core switches a
 * resource's meter in the transaction of the state change that changes its price (services/lifecycle.ts),
 * so the history holds exactly the committed changes and nothing a crash or a restart could lose.
 *
 * Usage sums whole seconds in SQL (per resource and price, or per account too when a period closes); the
 * money is worked out from those sums in domain/billing.ts, exactly, with bigint.
 */
import { type RawBuilder, sql } from 'kysely';
import type { BilledResourceType, BillingUnit, Meter, MeterName, UsagePiece } from '../domain/billing.js';
import { epochSecond } from '../domain/billing.js';
import { isPostgres } from './dialect.js';
import type { Executor } from './schema.js';

/**
 * Ends the resource's open interval at `at` and opens one for `next` (none when the resource stops
 * paying). Called only when the price changes, inside the transaction that changes it.
 */
export async function switchMeter(
  db: Executor,
  resourceId: string,
  next: Meter | null,
  at: Date,
): Promise<void> {
  const atText = at.toISOString();
  const second = epochSecond(at.getTime());
  await db
    .updateTable('meter_segments')
    .set({ ended_at: atText, end_s: second })
    .where('resource_id', '=', resourceId)
    .where('end_s', 'is', null)
    .execute();
  if (next === null) return;
  await db
    .insertInto('meter_segments')
    .values({
      account_id: next.account_id,
      resource_id: next.resource_id,
      resource_type: next.resource_type,
      resource_name: next.resource_name,
      meter: next.meter,
      region: next.region,
      instance_type: next.instance_type,
      size_gb: next.size_gb,
      unit: next.unit,
      unit_price_micros: next.unit_price_micros,
      started_at: atText,
      start_s: second,
    })
    .execute();
}

/** A window of epoch seconds: [start, end), and `now` ending the intervals still open. */
export interface Window {
  start: number;
  end: number;
  now: number;
}

/** The seconds of an interval inside the window (≥ 0), as SQL for either engine. */
function secondsInside(db: Executor, window: Window): RawBuilder<number> {
  const [least, greatest] = isPostgres(db) ? ['least', 'greatest'] : ['min', 'max'];
  const openEnd = Math.min(window.now, window.end);
  return sql<number>`${sql.raw(greatest)}(0, ${sql.raw(least)}(coalesce(end_s, ${openEnd}), ${window.end}) - ${sql.raw(greatest)}(start_s, ${window.start}))`;
}

interface PieceRow {
  account_id: string;
  resource_id: string;
  resource_type: string;
  resource_name: string;
  meter: string;
  instance_type: string | null;
  size_gb: number | null;
  unit: string;
  unit_price_micros: number;
  seconds: number | string;
}

const piece = (row: PieceRow): UsagePiece & { account_id: string } => ({
  account_id: row.account_id,
  resource_id: row.resource_id,
  resource_type: row.resource_type as BilledResourceType,
  resource_name: row.resource_name,
  meter: row.meter as MeterName,
  instance_type: row.instance_type,
  size_gb: row.size_gb === null ? null : Number(row.size_gb),
  unit: row.unit as BillingUnit,
  unit_price_micros: Number(row.unit_price_micros),
  seconds: Number(row.seconds),
});

function overlapping(db: Executor, window: Window) {
  return db
    .selectFrom('meter_segments')
    .where('start_s', '<', Math.min(window.end, window.now))
    .where((eb) => eb.or([eb('end_s', 'is', null), eb('end_s', '>', window.start)]));
}

/** Seconds per resource and price of an account within the window (accounts: every account). */
async function summed(
  db: Executor,
  window: Window,
  accountId: string | null,
): Promise<(UsagePiece & { account_id: string })[]> {
  let query = overlapping(db, window);
  if (accountId !== null) query = query.where('account_id', '=', accountId);
  const rows = await query
    .select([
      'account_id',
      'resource_id',
      'resource_type',
      'meter',
      'instance_type',
      'size_gb',
      'unit',
      'unit_price_micros',
      sql<string>`max(resource_name)`.as('resource_name'),
      sql<number>`sum(${secondsInside(db, window)})`.as('seconds'),
      sql<number>`min(seq)`.as('first_seq'),
    ])
    .groupBy([
      'account_id',
      'resource_id',
      'resource_type',
      'meter',
      'instance_type',
      'size_gb',
      'unit',
      'unit_price_micros',
    ])
    .orderBy('account_id')
    .orderBy(sql`min(seq)`)
    .execute();
  return rows.map((row) => piece(row as PieceRow));
}

/** An account's usage in the window, one piece per resource and price, in the order they began. */
export function usagePieces(db: Executor, accountId: string, window: Window): Promise<UsagePiece[]> {
  return summed(db, window, accountId);
}

/** Every account's usage in the window (a period closing), ordered by account. */
export function usagePiecesOfAll(
  db: Executor,
  window: Window,
): Promise<(UsagePiece & { account_id: string })[]> {
  return summed(db, window, null);
}

/** An account's intervals in the window, each cut to it, for grouping by day. */
export async function intervalsWithin(
  db: Executor,
  accountId: string,
  window: Window,
): Promise<(Omit<UsagePiece, 'seconds'> & { startS: number; endS: number })[]> {
  const rows = await overlapping(db, window)
    .where('account_id', '=', accountId)
    .select([
      'account_id',
      'resource_id',
      'resource_type',
      'resource_name',
      'meter',
      'instance_type',
      'size_gb',
      'unit',
      'unit_price_micros',
      'start_s',
      'end_s',
    ])
    .orderBy('seq')
    .execute();
  const openEnd = Math.min(window.now, window.end);
  return rows.map((row) => {
    const { seconds: _none, ...rest } = piece({ ...row, seconds: 0 } as PieceRow);
    return {
      ...rest,
      startS: Math.max(Number(row.start_s), window.start),
      endS: Math.min(row.end_s === null ? openEnd : Number(row.end_s), window.end),
    };
  });
}

/** The first second any interval began (where closing periods starts); null when nothing was ever metered. */
export async function firstMeteredSecond(db: Executor): Promise<number | null> {
  const row = await db
    .selectFrom('meter_segments')
    .select(sql<number | null>`min(start_s)`.as('first'))
    .executeTakeFirst();
  return row?.first === null || row?.first === undefined ? null : Number(row.first);
}
