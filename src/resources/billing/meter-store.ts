/**
 * Metered intervals (`meter_segments`): the durable history billing reads. The lifecycle core switches a
 * resource's meter in the transaction of the state change that changes its price (platform/lifecycle/
 * lifecycle.ts, through `BILLING_METERING`, which the composition root gives it), so the history holds
 * exactly the committed changes and nothing a crash or a restart could lose.
 *
 * Usage sums whole seconds in SQL (per resource and price, or per account too when a period closes); the
 * money is worked out from those sums in resources/billing/rules.ts, exactly, with bigint.
 *
 * Totals. Closing an interval also adds its seconds, month by month, to `meter_month_totals` (same
 * transaction). A window made of whole months — the current one up to now included, which is what usage
 * shows by default, what a draft shows and what a period close reads — is then read from those totals
 * and the intervals still open: one row per resource and price plus one per live resource, however many
 * times each changed. Other windows add up the intervals themselves.
 */
import { type RawBuilder, type Selectable, sql } from 'kysely';
import type { Metering } from '../../platform/lifecycle/metering.js';
import { compiledOnce, compiledPerShape } from '../../platform/store/compiled-query.js';
import { isPostgres } from '../../platform/store/dialect.js';
import type { Database, Executor, MeterSegmentsTable } from '../../platform/store/schema.js';
import type { BilledResourceType, BillingUnit, Meter, MeterName, UsagePiece } from './rules.js';
import { epochSecond, meterKey, monthOf, monthSpans } from './rules.js';

/**
 * The columns that tell usage pieces apart: a resource at one price. Its name is not among them (a
 * renamed resource is one piece), but stands beside them in both tables.
 */
const PIECE_KEY = [
  'account_id',
  'resource_id',
  'resource_type',
  'meter',
  'instance_type',
  'size_gb',
  'unit',
  'unit_price_micros',
] as const;
const METERED = [...PIECE_KEY, 'resource_name'] as const;
type Metered = Pick<Selectable<MeterSegmentsTable>, (typeof METERED)[number]>;

/** The metered columns of `from`: its values, or a compiled query's stand-ins for them. */
function metered<T extends Metered>(from: T): Metered {
  return Object.fromEntries(METERED.map((column) => [column, from[column]])) as Metered;
}

const closeOpen = compiledOnce<
  Database,
  { resourceId: string; at: string; second: number },
  Selectable<MeterSegmentsTable>
>((db, p) =>
  db
    .updateTable('meter_segments')
    .set({ ended_at: p.at, end_s: p.second })
    .where('resource_id', '=', p.resourceId)
    .where('end_s', 'is', null)
    .returningAll(),
);

const open = compiledOnce<Database, Meter & { at: string; second: number }, never>((db, p) =>
  db.insertInto('meter_segments').values({
    ...metered(p),
    region: p.region,
    started_at: p.at,
    start_s: p.second,
  }),
);

/**
 * Ends the resource's open interval at `at` and opens one for `next` (none when the resource stops
 * paying). Called only when the price changes, inside the transaction that changes it. `isNew`: the
 * resource is being created in this transaction, so it has no interval to end (one statement fewer).
 */
export async function switchMeter(
  db: Executor,
  resourceId: string,
  next: Meter | null,
  at: Date,
  isNew = false,
): Promise<void> {
  const atText = at.toISOString();
  const second = epochSecond(at.getTime());
  if (!isNew) {
    const closed = await closeOpen.execute(db, { resourceId, at: atText, second });
    for (const interval of closed) await addToTotals(db, interval, second);
  }
  if (next === null) return;
  await open.write(db, { ...next, at: atText, second });
}

/**
 * The meter store as the lifecycle core uses it (platform/lifecycle/metering.ts), given to it by the
 * composition root: the core compares what records pay by `meterKey` and switches intervals here.
 */
export const BILLING_METERING: Metering = { key: meterKey, switchMeter };

/** What names a price of a resource in the totals (the columns it stands for may be null). */
export const priceKey = (m: {
  meter: string;
  instance_type: string | null;
  size_gb: number | null;
  unit_price_micros: number;
}) => `${m.meter}|${m.instance_type ?? ''}|${m.size_gb ?? ''}|${m.unit_price_micros}`;

/** The upsert of `addToTotals`, per number of months the interval spans (nearly always one). */
type TotalsValues = Metered & { price_key: string; first_seq: number } & Record<string, unknown>;
const totalsUpsert = compiledPerShape<Database, TotalsValues, never>((shape) => (db, p) => {
  const least = isPostgres(db) ? 'least' : 'min';
  return db
    .insertInto('meter_month_totals')
    .values(
      Array.from({ length: Number(shape) }, (_, i) => ({
        ...metered(p),
        month_s: p[`month_s${i}`] as number,
        price_key: p.price_key,
        seconds: p[`seconds${i}`] as number,
        first_seq: p.first_seq,
      })),
    )
    .onConflict((oc) =>
      oc.columns(['month_s', 'account_id', 'resource_id', 'price_key']).doUpdateSet({
        seconds: sql`meter_month_totals.seconds + excluded.seconds`,
        first_seq: sql`${sql.raw(least)}(meter_month_totals.first_seq, excluded.first_seq)`,
        resource_name: sql`excluded.resource_name`,
      }),
    );
});

/** Adds a closed interval's seconds to the totals of each month it lies in (one statement). */
async function addToTotals(
  db: Executor,
  interval: Selectable<MeterSegmentsTable>,
  endS: number,
): Promise<void> {
  const months = monthSpans(Number(interval.start_s), endS);
  if (months.length === 0) return;
  const values: TotalsValues = {
    ...metered(interval),
    price_key: priceKey({ ...interval, unit_price_micros: Number(interval.unit_price_micros) }),
    first_seq: interval.seq,
  };
  months.forEach(({ monthS, seconds }, i) => {
    values[`month_s${i}`] = monthS;
    values[`seconds${i}`] = seconds;
  });
  await totalsUpsert(String(months.length)).write(db, values);
}

/** A window of epoch seconds: [start, end), and `now` ending the intervals still open. */
export interface Window {
  start: number;
  end: number;
  now: number;
}

/**
 * Whether the totals answer for the window: it starts at a month's start and ends at one, or at now or
 * later (every closed interval then ended inside the window's months, and counts whole).
 */
function wholeMonths(window: Window): boolean {
  const isMonthStart = (second: number) => {
    const at = new Date(second * 1000);
    return Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1) === second * 1000;
  };
  return isMonthStart(window.start) && (window.end >= window.now || isMonthStart(window.end));
}

/** The seconds of an interval inside the window (≥ 0), as SQL for either engine. */
function secondsInside(db: Executor, window: Window): RawBuilder<number> {
  const [least, greatest] = isPostgres(db) ? ['least', 'greatest'] : ['min', 'max'];
  const openEnd = Math.min(window.now, window.end);
  return sql<number>`${sql.raw(greatest)}(0, ${sql.raw(least)}(coalesce(end_s, ${openEnd}), ${window.end}) - ${sql.raw(greatest)}(start_s, ${window.start}))`;
}

type PieceRow = Metered & { seconds: number | string };

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
      ...PIECE_KEY,
      sql<string>`max(resource_name)`.as('resource_name'),
      sql<number>`sum(${secondsInside(db, window)})`.as('seconds'),
      sql<number>`min(seq)`.as('first_seq'),
    ])
    .groupBy([...PIECE_KEY])
    .orderBy('account_id')
    .orderBy(sql`min(seq)`)
    .execute();
  return rows.map((row) => piece(row));
}

/** The starts (epoch seconds) of the months the window's seconds fall in. */
function monthsWithin(window: Window): number[] {
  const months: number[] = [];
  for (
    let month = window.start;
    month < window.end;
    month = monthOf(new Date(month * 1000)).end.getTime() / 1000
  ) {
    months.push(month);
  }
  return months;
}

/**
 * The window's seconds per resource and price from the totals and the open intervals (see wholeMonths),
 * ordered by account and then by the first interval of each. The totals are read row by row (a month
 * of an account is one range of the key) and added up here, not grouped in SQL.
 */
async function fromTotals(
  db: Executor,
  window: Window,
  accountId: string | null,
): Promise<(UsagePiece & { account_id: string })[]> {
  // The months by name (equality on the key's first column, then the account on its second: one range
  // of the key per month; a range of months would read every account's rows of them).
  const months = monthsWithin(window);
  // A window shorter than a second holds no month: `in ()` is a syntax error on PostgreSQL, so the
  // condition is one that matches no row.
  let totals = db
    .selectFrom('meter_month_totals')
    .where(months.length > 0 ? sql<boolean>`month_s in (${sql.join(months)})` : sql<boolean>`false`);
  if (accountId !== null) totals = totals.where('account_id', '=', accountId);
  const closed = await totals.select([...METERED, 'price_key', 'seconds', 'first_seq']).execute();
  const openEnd = Math.min(window.now, window.end);
  let open = db.selectFrom('meter_segments').where('end_s', 'is', null).where('start_s', '<', openEnd);
  if (accountId !== null) open = open.where('account_id', '=', accountId);
  const running = await open.select([...METERED, 'seq', 'start_s']).execute();

  type Ordered = UsagePiece & { account_id: string; first: number };
  const byKey = new Map<string, Ordered>();
  const add = (row: Metered, key: string, seconds: number, first: number, latestName: boolean) => {
    const total = byKey.get(key);
    if (total) {
      total.seconds += seconds;
      if (first < total.first) total.first = first;
      if (latestName) total.resource_name = row.resource_name;
      return;
    }
    const found = piece({ ...row, seconds }) as Ordered;
    found.first = first;
    byKey.set(key, found);
  };
  for (const row of closed) {
    const key = `${row.account_id}|${row.resource_id}|${row.price_key}`;
    add(row, key, Number(row.seconds), Number(row.first_seq), false);
  }
  for (const row of running) {
    const seconds = openEnd - Math.max(Number(row.start_s), window.start);
    const key = `${row.account_id}|${row.resource_id}|${priceKey({ ...row, unit_price_micros: Number(row.unit_price_micros) })}`;
    // The open interval has the resource's latest name.
    add(row, key, seconds, Number(row.seq), true);
  }
  const pieces = [...byKey.values()];
  pieces.sort((a, b) =>
    a.account_id === b.account_id ? a.first - b.first : a.account_id < b.account_id ? -1 : 1,
  );
  return pieces;
}

/** An account's usage in the window, one piece per resource and price, in the order they began. */
export function usagePieces(db: Executor, accountId: string, window: Window): Promise<UsagePiece[]> {
  return wholeMonths(window) ? fromTotals(db, window, accountId) : summed(db, window, accountId);
}

/** Every account's usage in the window (a period closing), ordered by account. */
export function usagePiecesOfAll(
  db: Executor,
  window: Window,
): Promise<(UsagePiece & { account_id: string })[]> {
  return wholeMonths(window) ? fromTotals(db, window, null) : summed(db, window, null);
}

/** The same pieces from the intervals alone, whatever the window (tests compare the two ways). */
export function usagePiecesFromIntervals(
  db: Executor,
  accountId: string | null,
  window: Window,
): Promise<(UsagePiece & { account_id: string })[]> {
  return summed(db, window, accountId);
}

/** What grouping by day needs of an interval: its price and its ends, cut to the window. */
export interface PricedSpan {
  resource_type: BilledResourceType;
  meter: MeterName;
  unit: BillingUnit;
  unit_price_micros: number;
  size_gb: number | null;
  startS: number;
  endS: number;
}

/** An account's intervals in the window, each cut to it, for grouping by day (only what that needs). */
export async function intervalsWithin(
  db: Executor,
  accountId: string,
  window: Window,
): Promise<PricedSpan[]> {
  const rows = await overlapping(db, window)
    .where('account_id', '=', accountId)
    .select(['resource_type', 'meter', 'unit', 'unit_price_micros', 'size_gb', 'start_s', 'end_s'])
    .execute();
  const openEnd = Math.min(window.now, window.end);
  return rows.map((row) => ({
    resource_type: row.resource_type as BilledResourceType,
    meter: row.meter as MeterName,
    unit: row.unit as BillingUnit,
    unit_price_micros: Number(row.unit_price_micros),
    size_gb: row.size_gb === null ? null : Number(row.size_gb),
    startS: Math.max(Number(row.start_s), window.start),
    endS: Math.min(row.end_s === null ? openEnd : Number(row.end_s), window.end),
  }));
}

/** The first second any interval began (where closing periods starts); null when nothing was ever metered. */
export async function firstMeteredSecond(db: Executor): Promise<number | null> {
  const row = await db
    .selectFrom('meter_segments')
    .select(sql<number | null>`min(start_s)`.as('first'))
    .executeTakeFirst();
  return row?.first === null || row?.first === undefined ? null : Number(row.first);
}

/** One page of an account's usage lines by resource, and what the whole window adds up to. */
export interface UsageLinesPage {
  /** The page's lines, one piece each (a resource at one price), in the order lines are shown. */
  pieces: UsagePiece[];
  /** Lines in the whole window (pieces with seconds). */
  lineCount: number;
  /** The whole window's seconds per price (a handful of rows): the exact total is worked out from these. */
  byPrice: { unit: BillingUnit; unit_price_micros: number; size_gb: number | null; seconds: number }[];
}

/**
 * An account's usage by resource for a window of whole months (see wholeMonths; null for other windows),
 * one page at a time, with the grouping, the ordering and the sums done by the database: the month totals
 * and the open intervals are merged per resource and price in SQL, which answers only the page's lines
 * and the seconds per price, instead of every line of a large account (tens of thousands) as objects.
 * The order is the one groupUsage gives lines grouped by resource: resource type, resource id, meter, then
 * when each price began.
 */
export async function usageLinesPage(
  db: Executor,
  accountId: string,
  window: Window,
  page: { offset: number; limit: number },
): Promise<UsageLinesPage | null> {
  if (!wholeMonths(window)) return null;
  const months = monthsWithin(window);
  // A window shorter than a second holds no month (and `in ()` is a syntax error on PostgreSQL): the
  // general path answers it.
  if (months.length === 0) return null;
  const greatest = isPostgres(db) ? 'greatest' : 'max';
  const openEnd = Math.min(window.now, window.end);
  // Every total and open interval of the window, with its seconds in it (`live`: the open one, whose name
  // is the resource's latest).
  const rows = sql`
    select resource_id, resource_type, meter, instance_type, size_gb, unit, unit_price_micros, resource_name,
      0 as live, seconds, first_seq
    from meter_month_totals where month_s in (${sql.join(months)}) and account_id = ${accountId}
    union all
    select resource_id, resource_type, meter, instance_type, size_gb, unit, unit_price_micros, resource_name,
      1, ${openEnd} - ${sql.raw(greatest)}(start_s, ${window.start}), seq
    from meter_segments where end_s is null and start_s < ${openEnd} and account_id = ${accountId}`;
  const lineColumns = sql`resource_id, resource_type, meter, instance_type, size_gb, unit, unit_price_micros`;
  const [lines, prices] = await Promise.all([
    sql<PieceRow & { first_seq_min: number }>`
      select ${lineColumns},
        coalesce(max(case when live = 1 then resource_name end), max(resource_name)) as resource_name,
        sum(seconds) as seconds, min(first_seq) as first_seq_min
      from (${rows}) as r
      group by ${lineColumns}
      having sum(seconds) > 0
      order by case resource_type when 'instance' then 0 when 'volume' then 1 when 'snapshot' then 2 else 3 end,
        resource_id${sql.raw(isPostgres(db) ? ' collate "C"' : '')},
        case meter when 'instance_compute' then 0 when 'instance_storage' then 1 when 'volume_storage' then 2
          when 'snapshot_storage' then 3 else 4 end,
        first_seq_min
      limit ${page.limit} offset ${page.offset}`.execute(db),
    sql<{
      unit: string;
      unit_price_micros: number;
      size_gb: number | null;
      seconds: number | string;
      n: number | string;
    }>`
      select unit, unit_price_micros, size_gb, sum(seconds) as seconds, count(*) as n
      from (select ${lineColumns}, sum(seconds) as seconds from (${rows}) as r
        group by ${lineColumns} having sum(seconds) > 0) as l
      group by unit, unit_price_micros, size_gb`.execute(db),
  ]);
  let lineCount = 0;
  for (const price of prices.rows) lineCount += Number(price.n);
  return {
    pieces: lines.rows.map((row) => {
      const { account_id: _account, ...usage } = piece({ ...row, account_id: accountId });
      return usage;
    }),
    lineCount,
    byPrice: prices.rows.map((price) => ({
      unit: price.unit as BillingUnit,
      unit_price_micros: Number(price.unit_price_micros),
      size_gb: price.size_gb === null ? null : Number(price.size_gb),
      seconds: Number(price.seconds),
    })),
  };
}
