import { type Kysely, sql } from 'kysely';
import { isPostgres } from '../../../platform/store/dialect.js';

// Migrations take Kysely<any>: they describe the schema as it was at their time, not as it is now.
// biome-ignore lint/suspicious/noExplicitAny: see above
type AnyDb = Kysely<any>;

/**
 * Data transfer (issue 31, item 7): bytes to and from public addresses, billed as `data_transfer`.
 *
 * `transfer_counters` holds, per instance, the last driver reading billing counted (the base of
 * resources/billing/transfer.ts). `transfer_day_totals` holds the bytes counted per account, UTC day and
 * instance. A collection round adds to both in one transaction (resources/billing/transfer-store.ts), so
 * a crash before the commit counts nothing of the round — the next reading carries the bytes — and one
 * after it never counts them again. Byte counts stay well under 2^53 (8 PiB per instance and day).
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('transfer_counters')
    .addColumn('resource_id', 'text', (c) => c.primaryKey())
    .addColumn('bytes_out', 'bigint', (c) => c.notNull())
    .addColumn('bytes_in', 'bigint', (c) => c.notNull())
    .addColumn('epoch', 'text')
    .addColumn('read_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema
    .createTable('transfer_day_totals')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('day_s', 'bigint', (c) => c.notNull())
    .addColumn('resource_id', 'text', (c) => c.notNull())
    .addColumn('resource_name', 'text', (c) => c.notNull())
    .addColumn('region', 'text', (c) => c.notNull())
    .addColumn('bytes_out', 'bigint', (c) => c.notNull())
    .addColumn('bytes_in', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('transfer_day_totals_pk', ['account_id', 'day_s', 'resource_id'])
    // SQLite: rows in key order, so an account's month is one range of the table.
    .$call((table) => (isPostgres(db) ? table : table.modifyEnd(sql`without rowid`)))
    .execute();
  // A period closing reads every account's days of the month.
  await db.schema
    .createIndex('transfer_day_totals_day')
    .on('transfer_day_totals')
    .columns(['day_s'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('transfer_day_totals').execute();
  await db.schema.dropTable('transfer_counters').execute();
}
