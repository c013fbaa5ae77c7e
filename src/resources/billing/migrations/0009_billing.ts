import type { Kysely } from 'kysely';
import { isPostgres } from '../../../platform/store/dialect.js';

// Migrations take Kysely<any>: they describe the schema as it was at their time, not as it is now.
// biome-ignore lint/suspicious/noExplicitAny: see above
type AnyDb = Kysely<any>;

/**
 * Billing (issue 16).
 *
 * `meter_segments` is the durable history metering reads: one row per interval in which a resource paid
 * one price, written by the lifecycle core in the transaction of the state change that opens or closes it
 * (platform/lifecycle/lifecycle.ts). An open interval has no end yet. `start_s`/`end_s` are the ends in whole epoch
 * seconds (what is billed), beside the ISO times the rest of the schema uses.
 *
 * `invoices` hold one invoice per account and month; `number` is given when it opens and never reused
 * (`billing_counters`). Exact amounts are text: they count 1/2,628,000 micro-dollars (resources/billing/rules.ts)
 * and a large account's month passes what a 64-bit column holds.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('meter_segments')
    // SQLite's INTEGER PRIMARY KEY is the rowid, which counts up by itself; PostgreSQL needs a sequence.
    .addColumn('seq', isPostgres(db) ? 'bigserial' : 'integer', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('resource_id', 'text', (c) => c.notNull())
    .addColumn('resource_type', 'text', (c) => c.notNull())
    .addColumn('resource_name', 'text', (c) => c.notNull())
    .addColumn('meter', 'text', (c) => c.notNull())
    .addColumn('region', 'text', (c) => c.notNull())
    .addColumn('instance_type', 'text')
    .addColumn('size_gb', 'integer')
    .addColumn('unit', 'text', (c) => c.notNull())
    .addColumn('unit_price_micros', 'integer', (c) => c.notNull())
    .addColumn('started_at', 'text', (c) => c.notNull())
    .addColumn('start_s', 'bigint', (c) => c.notNull())
    .addColumn('ended_at', 'text')
    .addColumn('end_s', 'bigint')
    .execute();
  await db.schema
    .createIndex('meter_segments_account_start')
    .on('meter_segments')
    .columns(['account_id', 'start_s'])
    .execute();
  await db.schema
    .createIndex('meter_segments_resource_end')
    .on('meter_segments')
    .columns(['resource_id', 'end_s'])
    .execute();
  await db.schema.createIndex('meter_segments_start').on('meter_segments').columns(['start_s']).execute();

  await db.schema
    .createTable('invoices')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('number', 'integer', (c) => c.unique())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('period_start', 'text', (c) => c.notNull())
    .addColumn('period_end', 'text', (c) => c.notNull())
    .addColumn('subtotal', 'text', (c) => c.notNull())
    .addColumn('total_cents', 'bigint', (c) => c.notNull())
    .addColumn('issued_at', 'text')
    .addColumn('due_at', 'text')
    .addColumn('past_due_at', 'text')
    .addColumn('paid_at', 'text')
    .addColumn('voided_at', 'text')
    .addColumn('version', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addUniqueConstraint('invoices_account_period', ['account_id', 'period_start'])
    .execute();
  await db.schema
    .createIndex('invoices_account_created')
    .on('invoices')
    .columns(['account_id', 'period_start', 'id'])
    .execute();
  await db.schema.createIndex('invoices_status_due').on('invoices').columns(['status', 'due_at']).execute();

  await db.schema
    .createTable('invoice_lines')
    .addColumn('invoice_id', 'text', (c) => c.notNull().references('invoices.id').onDelete('cascade'))
    .addColumn('position', 'integer', (c) => c.notNull())
    .addColumn('resource_id', 'text')
    .addColumn('resource_type', 'text', (c) => c.notNull())
    .addColumn('meter', 'text', (c) => c.notNull())
    .addColumn('description', 'text', (c) => c.notNull())
    .addColumn('instance_type', 'text')
    .addColumn('unit', 'text', (c) => c.notNull())
    .addColumn('quantity_numerator', 'text', (c) => c.notNull())
    .addColumn('unit_price_micros', 'integer')
    .addColumn('amount', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('invoice_lines_pk', ['invoice_id', 'position'])
    .execute();

  await db.schema
    .createTable('billing_counters')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('value', 'bigint', (c) => c.notNull())
    .execute();
  await db
    .insertInto('billing_counters')
    .values([
      { name: 'invoice_number', value: 0 },
      // Periods are closed through this epoch second (0: none yet).
      { name: 'closed_through_s', value: 0 },
    ])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('billing_counters').execute();
  await db.schema.dropTable('invoice_lines').execute();
  await db.schema.dropTable('invoices').execute();
  await db.schema.dropTable('meter_segments').execute();
}
