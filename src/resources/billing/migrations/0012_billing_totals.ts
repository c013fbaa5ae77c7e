import { type Kysely, sql } from 'kysely';
import { isPostgres } from '../../../platform/store/dialect.js';

// Migrations take Kysely<any>: they describe the schema as it was at their time, not as it is now.
// biome-ignore lint/suspicious/noExplicitAny: see above
type AnyDb = Kysely<any>;

/**
 * Billing totals (issue 16): what reading usage costs must not grow with how often resources changed.
 *
 * `meter_month_totals` holds, per account, calendar month (UTC), resource and price, the seconds of the
 * intervals already closed that fall in that month. The interval's write that closes it adds them, in its
 * own transaction (resources/billing/meter-store.ts), so the totals always hold exactly the closed intervals. A
 * month's usage is then its totals plus the intervals still open — one row per resource and price, and
 * one per live resource — instead of every interval of the month (a month of an account whose 10,000
 * instances start and stop twice a day is 600,000 intervals).
 *
 * `price_key` names the price (meter, instance type, GB, micro-USD): the columns it stands for may be
 * null, which a primary key cannot hold. `first_seq` is the first interval's `seq`, so lines keep the
 * order in which they first appeared. On SQLite the table is WITHOUT ROWID: its rows are stored in key
 * order, so one account's month is read as one range, without a lookup per row.
 *
 * The partial index finds an account's open intervals (and every account's, when a period closes).
 * Existing closed intervals are added up here once.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('meter_month_totals')
    .addColumn('month_s', 'bigint', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('resource_id', 'text', (c) => c.notNull())
    .addColumn('price_key', 'text', (c) => c.notNull())
    .addColumn('resource_type', 'text', (c) => c.notNull())
    .addColumn('resource_name', 'text', (c) => c.notNull())
    .addColumn('meter', 'text', (c) => c.notNull())
    .addColumn('instance_type', 'text')
    .addColumn('size_gb', 'integer')
    .addColumn('unit', 'text', (c) => c.notNull())
    .addColumn('unit_price_micros', 'integer', (c) => c.notNull())
    .addColumn('seconds', 'bigint', (c) => c.notNull())
    .addColumn('first_seq', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('meter_month_totals_pk', ['month_s', 'account_id', 'resource_id', 'price_key'])
    // SQLite: the rows themselves in key order, so a month of an account is one range of the table.
    .$call((table) => (isPostgres(db) ? table : table.modifyEnd(sql`without rowid`)))
    .execute();
  await db.schema
    .createIndex('meter_segments_open')
    .on('meter_segments')
    .columns(['account_id', 'start_s'])
    .where(sql.ref('end_s'), 'is', null)
    .execute();

  // The intervals closed before this migration, added up per month.
  const closed = await db
    .selectFrom('meter_segments')
    .selectAll()
    .where('end_s', 'is not', null)
    .orderBy('seq')
    .execute();
  const totals = new Map<string, Record<string, unknown>>();
  for (const row of closed) {
    const start = Number(row.start_s);
    const end = Number(row.end_s);
    const priceKey = `${row.meter}|${row.instance_type ?? ''}|${row.size_gb ?? ''}|${row.unit_price_micros}`;
    for (let month = monthStart(start); month < end; month = nextMonth(month)) {
      const seconds = Math.min(end, nextMonth(month)) - Math.max(start, month);
      if (seconds <= 0) continue;
      const key = `${month}|${row.account_id}|${row.resource_id}|${priceKey}`;
      const total = totals.get(key);
      if (total) {
        total.seconds = Number(total.seconds) + seconds;
        total.resource_name = row.resource_name;
        continue;
      }
      totals.set(key, {
        month_s: month,
        account_id: row.account_id,
        resource_id: row.resource_id,
        price_key: priceKey,
        resource_type: row.resource_type,
        resource_name: row.resource_name,
        meter: row.meter,
        instance_type: row.instance_type,
        size_gb: row.size_gb,
        unit: row.unit,
        unit_price_micros: row.unit_price_micros,
        seconds,
        first_seq: row.seq,
      });
    }
  }
  const rows = [...totals.values()];
  for (let from = 0; from < rows.length; from += 500) {
    await db
      .insertInto('meter_month_totals')
      .values(rows.slice(from, from + 500))
      .execute();
  }
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropIndex('meter_segments_open').execute();
  await db.schema.dropTable('meter_month_totals').execute();
}

/** The epoch second at which the UTC month holding `second` starts. */
function monthStart(second: number): number {
  const at = new Date(second * 1000);
  return Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1) / 1000;
}

function nextMonth(month: number): number {
  const at = new Date(month * 1000);
  return Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1) / 1000;
}
