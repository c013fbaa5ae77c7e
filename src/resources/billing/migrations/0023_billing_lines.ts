import { type Kysely, sql } from 'kysely';
import { isPostgres } from '../../../platform/store/dialect.js';

// Migrations take Kysely<any>: they describe the schema as it was at their time, not as it is now.
// biome-ignore lint/suspicious/noExplicitAny: see above
type AnyDb = Kysely<any>;

/**
 * Usage lines read as ranges (issue 33, item 2): a page of a month's usage by resource, and its total,
 * without grouping the month on every request.
 *
 * `meter_month_totals` gets a row for an interval from the moment it opens, not only once it closes:
 * `open_start_s` is the start (epoch second) of the resource's interval still open at that price in that
 * month, null when none is (resources/billing/meter-store.ts switchMeter sets it when the interval opens
 * and clears it when it closes, in the same statement that adds the closed seconds). A month's lines are
 * then its rows — the closed seconds plus, for a marked row, the open interval's so far — and the
 * intervals still open that began before the month, which are of other resources (a resource has one
 * interval at a time). Nothing needs merging any more, so:
 *
 * - `meter_month_totals_lines` holds a month of an account in line order (resource type, resource id,
 *   meter, first interval): a page is a range of it;
 * - `meter_month_totals_prices` holds it by resource type and price, with the seconds: the lines per
 *   type and the window's seconds per price (the exact total) are one pass over it, grouped in index
 *   order;
 * - `meter_segments_open_lines` holds an account's open intervals by resource type and id, with their
 *   start: those begun before a month are the month's other lines, in the same order.
 *
 * One exception keeps a create to the one statement it had: the first interval of a resource made in
 * the same transaction marks no row (it has none anywhere yet), and says so in `meter_segments.month_marked`
 * (0). Such an interval is a line of its own, like those begun before the month, until it closes.
 *
 * On PostgreSQL the ids are ordered byte by byte (`collate "C"`), as lines are everywhere else.
 * Existing open intervals get their mark (and their row, when they have no closed seconds yet) here.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema.alterTable('meter_month_totals').addColumn('open_start_s', 'bigint').execute();
  await db.schema
    .alterTable('meter_segments')
    .addColumn('month_marked', 'integer', (c) => c.notNull().defaultTo(1))
    .execute();
  const byteOrder = isPostgres(db) ? sql.raw(' collate "C"') : sql.raw('');
  await sql`create index meter_month_totals_lines on meter_month_totals
    (month_s, account_id, resource_type, resource_id${byteOrder}, meter, first_seq)`.execute(db);
  await sql`create index meter_month_totals_prices on meter_month_totals
    (month_s, account_id, resource_type, unit, unit_price_micros, size_gb, seconds, open_start_s)`.execute(
    db,
  );
  await sql`create index meter_segments_open_lines on meter_segments
    (account_id, resource_type, resource_id${byteOrder}, start_s, month_marked) where end_s is null`.execute(
    db,
  );

  // Every interval open now marks the row of the month it began in.
  const open = await db.selectFrom('meter_segments').selectAll().where('end_s', 'is', null).execute();
  const least = isPostgres(db) ? 'least' : 'min';
  for (let from = 0; from < open.length; from += 500) {
    const rows = open.slice(from, from + 500).map((row) => ({
      month_s: monthStart(Number(row.start_s)),
      account_id: row.account_id,
      resource_id: row.resource_id,
      price_key: `${row.meter}|${row.instance_type ?? ''}|${row.size_gb ?? ''}|${row.unit_price_micros}`,
      resource_type: row.resource_type,
      resource_name: row.resource_name,
      meter: row.meter,
      instance_type: row.instance_type,
      size_gb: row.size_gb,
      unit: row.unit,
      unit_price_micros: row.unit_price_micros,
      seconds: 0,
      first_seq: row.seq,
      open_start_s: row.start_s,
    }));
    await db
      .insertInto('meter_month_totals')
      .values(rows)
      .onConflict((oc) =>
        oc.columns(['month_s', 'account_id', 'resource_id', 'price_key']).doUpdateSet({
          first_seq: sql`${sql.raw(least)}(meter_month_totals.first_seq, excluded.first_seq)`,
          resource_name: sql`excluded.resource_name`,
          open_start_s: sql`excluded.open_start_s`,
        }),
      )
      .execute();
  }
}

export async function down(db: AnyDb): Promise<void> {
  // The indexes first: SQLite refuses to drop a column an index still names.
  await db.schema.dropIndex('meter_segments_open_lines').execute();
  await db.schema.dropIndex('meter_month_totals_prices').execute();
  await db.schema.dropIndex('meter_month_totals_lines').execute();
  await db.schema.alterTable('meter_segments').dropColumn('month_marked').execute();
  // Rows that only stood for an open interval have no closed seconds.
  await db.deleteFrom('meter_month_totals').where('seconds', '=', 0).execute();
  await db.schema.alterTable('meter_month_totals').dropColumn('open_start_s').execute();
}

/** The epoch second at which the UTC month holding `second` starts. */
function monthStart(second: number): number {
  const at = new Date(second * 1000);
  return Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1) / 1000;
}
