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
import { epochSecond, meterKey, monthOf, monthSpans, RESOURCE_TYPES } from './rules.js';

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

const open = compiledOnce<Database, Meter & { at: string; second: number; marked: number }, { seq: number }>(
  (db, p) =>
    db
      .insertInto('meter_segments')
      .values({
        ...metered(p),
        region: p.region,
        started_at: p.at,
        start_s: p.second,
        month_marked: p.marked,
      })
      .returning('seq'),
);

/**
 * Ends the resource's open interval at `at` and opens one for `next` (none when the resource stops
 * paying). Called only when the price changes, inside the transaction that changes it. `isNew`: the
 * resource is being created in this transaction, so it has no interval to end (one statement fewer).
 * The month totals follow in one more statement: the closed interval's seconds, month by month, its mark
 * cleared, and the opened one's mark on the row of its month (see `TotalsRow`) — but for a new resource's.
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
  const rows: TotalsRow[] = [];
  if (!isNew) {
    const closed = await closeOpen.execute(db, { resourceId, at: atText, second });
    for (const interval of closed) rows.push(...closedRows(interval, second));
  }
  if (next !== null && isNew) {
    // A new resource has no row in the totals to share: its first interval marks none, so a create
    // writes one statement (the interval is a line by itself until it closes; migration 0023), and
    // nothing reads its answer: written behind.
    await open.write(db, { ...next, at: atText, second, marked: 0 });
  } else if (next !== null) {
    const opened = await open.executeTakeFirst(db, { ...next, at: atText, second, marked: 1 });
    if (opened === undefined) throw new Error(`No interval was opened for ${resourceId}`);
    rows.push(openedRow(next, Number(opened.seq), second));
  }
  if (rows.length > 0) await addToTotals(db, rows);
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

/**
 * What one write adds to a row of `meter_month_totals` (a month of a resource at one price): closed
 * seconds, and `open_start_s`, which the row holds afterwards — the start of the interval open at that
 * price when it began that month (set when it opens), null otherwise (cleared when it closes). A month's
 * lines are thus its rows, with no open interval to merge in but those begun in earlier months
 * (migration 0023).
 */
type TotalsRow = Metered & {
  month_s: number;
  price_key: string;
  seconds: number;
  first_seq: number;
  open_start_s: number | null;
};
const TOTALS_COLUMNS = [...METERED, 'month_s', 'price_key', 'seconds', 'first_seq', 'open_start_s'] as const;

/**
 * A closed interval's seconds in each month it lies in, and the month it began in whenever it marked a
 * row there (the mark cleared, even when it lasted under a second).
 */
function closedRows(interval: Selectable<MeterSegmentsTable>, endS: number): TotalsRow[] {
  const startS = Number(interval.start_s);
  const base = {
    ...metered(interval),
    unit_price_micros: Number(interval.unit_price_micros),
    price_key: priceKey({ ...interval, unit_price_micros: Number(interval.unit_price_micros) }),
    first_seq: Number(interval.seq),
    open_start_s: null,
  };
  const months = monthSpans(startS, endS);
  const startMonth = monthOf(new Date(startS * 1000)).start.getTime() / 1000;
  if (Number(interval.month_marked) === 1 && months[0]?.monthS !== startMonth)
    months.unshift({ monthS: startMonth, seconds: 0 });
  return months.map(({ monthS, seconds }) => ({ ...base, month_s: monthS, seconds }));
}

/** The row of the month an interval opens in, marked with its start. */
function openedRow(meter: Meter, seq: number, startS: number): TotalsRow {
  return {
    ...metered(meter),
    month_s: monthOf(new Date(startS * 1000)).start.getTime() / 1000,
    price_key: priceKey(meter),
    seconds: 0,
    first_seq: seq,
    open_start_s: startS,
  };
}

/** The upsert of `addToTotals`, per number of rows (a switch within one month: two). */
const totalsUpsert = compiledPerShape<Database, Record<string, unknown>, never>((shape) => (db, p) => {
  const least = isPostgres(db) ? 'least' : 'min';
  return db
    .insertInto('meter_month_totals')
    .values(
      Array.from(
        { length: Number(shape) },
        (_, i) =>
          Object.fromEntries(TOTALS_COLUMNS.map((column) => [column, p[`${column}${i}`]])) as TotalsRow,
      ),
    )
    .onConflict((oc) =>
      oc.columns(['month_s', 'account_id', 'resource_id', 'price_key']).doUpdateSet({
        seconds: sql`meter_month_totals.seconds + excluded.seconds`,
        first_seq: sql`${sql.raw(least)}(meter_month_totals.first_seq, excluded.first_seq)`,
        resource_name: sql`excluded.resource_name`,
        open_start_s: sql`excluded.open_start_s`,
      }),
    );
});

/**
 * Adds rows to the totals in one statement. Rows of the same month and price (a switch back to a price
 * within the second that left it) are put together first: one statement may not update a row twice.
 */
async function addToTotals(db: Executor, rows: TotalsRow[]): Promise<void> {
  const byKey = new Map<string, TotalsRow>();
  for (const row of rows) {
    const key = `${row.month_s}|${row.price_key}`;
    const earlier = byKey.get(key);
    if (earlier === undefined) {
      byKey.set(key, { ...row });
      continue;
    }
    // The later write's name and mark, as two statements in a row would leave them.
    earlier.seconds += row.seconds;
    earlier.first_seq = Math.min(earlier.first_seq, row.first_seq);
    earlier.resource_name = row.resource_name;
    earlier.open_start_s = row.open_start_s;
  }
  const values: Record<string, unknown> = {};
  [...byKey.values()].forEach((row, i) => {
    for (const column of TOTALS_COLUMNS) values[`${column}${i}`] = row[column];
  });
  await totalsUpsert(String(byKey.size)).write(db, values);
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
 * one page at a time. A window of one month — the default, and a draft's — is read as ranges of the
 * totals (monthLinesPage). Over several months, with the grouping, the ordering and the sums done by the database: the month totals
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
  if (months.length === 1) return monthLinesPage(db, accountId, window, page);
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

/** The resource types in line order (groupUsage): a month's lines are read one type after another. */
const TYPES_IN_LINE_ORDER = RESOURCE_TYPES;

/**
 * One month's usage lines by resource, a page at a time, without grouping the month (migration 0023):
 * its lines are the month's rows of the totals — closed seconds, plus the open interval's so far on a
 * marked row — and the account's intervals still open that marked no row of the month: begun before it,
 * or a new resource's first (other resources: one interval at a time per resource). Within a resource type both are read in line order from their
 * indexes (resource id, then meter — whose names sort in line order within a type — then first interval),
 * merged by the database, and only the page is read past its offset. The count and the exact total come
 * from one pass over the month's rows in price order, and the earlier open intervals grouped by price.
 */
async function monthLinesPage(
  db: Executor,
  accountId: string,
  window: Window,
  page: { offset: number; limit: number },
): Promise<UsageLinesPage> {
  const monthS = window.start;
  const openEnd = Math.min(window.now, window.end);
  if (openEnd <= monthS) return { pieces: [], lineCount: 0, byPrice: [] };
  const openSeconds = sql<number>`seconds + case when open_start_s < ${openEnd} then ${openEnd} - open_start_s else 0 end`;
  const isLine = sql<boolean>`(seconds > 0 or open_start_s < ${openEnd})`;
  // The open intervals that are lines of their own: begun before the month, or a new resource's first
  // (no row marked), begun before the window's end; and their seconds in the window.
  const unmarked = sql<boolean>`(start_s < ${monthS} or (month_marked = 0 and start_s < ${openEnd}))`;
  const greatest = isPostgres(db) ? 'greatest' : 'max';
  const ownSeconds = sql<number>`${openEnd} - ${sql.raw(greatest)}(start_s, ${monthS})`;
  const [rowGroups, earlierGroups] = await Promise.all([
    db
      .selectFrom('meter_month_totals')
      .where('month_s', '=', monthS)
      .where('account_id', '=', accountId)
      .where(isLine)
      .select(['resource_type', 'unit', 'unit_price_micros', 'size_gb'])
      .select([
        sql<number | string>`count(*)`.as('n'),
        sql<number | string>`sum(${openSeconds})`.as('seconds'),
      ])
      .groupBy(['resource_type', 'unit', 'unit_price_micros', 'size_gb'])
      .execute(),
    db
      .selectFrom('meter_segments')
      .where('account_id', '=', accountId)
      .where('end_s', 'is', null)
      .where(unmarked)
      .select(['resource_type', 'unit', 'unit_price_micros', 'size_gb'])
      .select([
        sql<number | string>`count(*)`.as('n'),
        sql<number | string>`sum(${ownSeconds})`.as('seconds'),
      ])
      .groupBy(['resource_type', 'unit', 'unit_price_micros', 'size_gb'])
      .execute(),
  ]);
  const linesOfType = new Map<string, number>();
  const byPrice = new Map<string, UsageLinesPage['byPrice'][number]>();
  const count = (group: {
    resource_type: string;
    unit: string;
    unit_price_micros: number;
    size_gb: number | null;
    n: number | string;
    seconds: number;
  }) => {
    linesOfType.set(group.resource_type, (linesOfType.get(group.resource_type) ?? 0) + Number(group.n));
    const size = group.size_gb === null ? null : Number(group.size_gb);
    const key = `${group.unit}|${group.unit_price_micros}|${size}`;
    const price = byPrice.get(key);
    if (price) price.seconds += group.seconds;
    else
      byPrice.set(key, {
        unit: group.unit as BillingUnit,
        unit_price_micros: Number(group.unit_price_micros),
        size_gb: size,
        seconds: group.seconds,
      });
  };
  for (const group of [...rowGroups, ...earlierGroups]) count({ ...group, seconds: Number(group.seconds) });

  // The page, type after type: `skip` lines of the types before it go first.
  const pieces: UsagePiece[] = [];
  let skip = page.offset;
  const byteOrder = sql.raw(isPostgres(db) ? ' collate "C"' : '');
  for (const type of TYPES_IN_LINE_ORDER) {
    const lines = linesOfType.get(type) ?? 0;
    if (pieces.length >= page.limit) break;
    if (skip >= lines) {
      skip -= lines;
      continue;
    }
    const want = page.limit - pieces.length;
    const rows = await sql<PieceRow & { first_seq: number }>`
      select resource_id${byteOrder} as resource_id, meter, first_seq, resource_type, resource_name,
        instance_type, size_gb, unit, unit_price_micros, ${openSeconds} as seconds
      from meter_month_totals
      where month_s = ${monthS} and account_id = ${accountId} and resource_type = ${type} and ${isLine}
      union all
      select resource_id${byteOrder}, meter, seq, resource_type, resource_name,
        instance_type, size_gb, unit, unit_price_micros, ${ownSeconds}
      from meter_segments
      where account_id = ${accountId} and resource_type = ${type} and end_s is null and ${unmarked}
      order by resource_id, meter, first_seq
      limit ${want} offset ${skip}`.execute(db);
    for (const row of rows.rows) {
      const { account_id: _account, ...usage } = piece({ ...row, account_id: accountId });
      pieces.push(usage);
    }
    skip = 0;
  }
  let lineCount = 0;
  for (const lines of linesOfType.values()) lineCount += lines;
  return { pieces, lineCount, byPrice: [...byPrice.values()] };
}
