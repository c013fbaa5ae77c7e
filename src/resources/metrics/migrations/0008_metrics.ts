import type { Kysely } from 'kysely';
import { isPostgres } from '../../../platform/store/dialect.js';

// Migrations take Kysely<any>: they describe the schema as it was at their time, not as it is now.
// biome-ignore lint/suspicious/noExplicitAny: see above
type AnyDb = Kysely<any>;

/**
 * Instance metrics as compact blocks (resources/metrics/blocks.ts): one row per instance per resolution per
 * block window — an hour of 10-second samples (`raw`), a day of 5-minute rollups (`rollup`). `sealed`
 * marks a raw block whose hour is over and whose rollups are written; the collector looks for unsealed
 * past hours through the second index, and retention deletes through the third.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('metric_blocks')
    .addColumn('instance_id', 'text', (c) => c.notNull())
    .addColumn('resolution', 'text', (c) => c.notNull())
    .addColumn('block_start', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('sealed', 'integer', (c) => c.notNull())
    .addColumn('points', 'integer', (c) => c.notNull())
    .addColumn('data', isPostgres(db) ? 'bytea' : 'blob', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('metric_blocks_pk', ['instance_id', 'resolution', 'block_start'])
    .execute();
  await db.schema
    .createIndex('metric_blocks_unsealed')
    .on('metric_blocks')
    .columns(['resolution', 'sealed', 'block_start'])
    .execute();
  await db.schema
    .createIndex('metric_blocks_age')
    .on('metric_blocks')
    .columns(['resolution', 'block_start'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('metric_blocks').execute();
}
