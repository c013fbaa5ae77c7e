import type { Kysely } from 'kysely';

// Migrations take Kysely<any>: they describe the schema as it was at their time, not as it is now.
// biome-ignore lint/suspicious/noExplicitAny: see above
type AnyDb = Kysely<any>;

/**
 * A deleted alert policy whose incidents were firing stays, marked `deleted_at`, until the resolved
 * messages of those incidents are sent (resources/alerts/service.ts): its incidents and notifications go with
 * its row, so deleting the row at once would drop them unsent. The index finds the few marked ones.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema.alterTable('alert_policies').addColumn('deleted_at', 'text').execute();
  await db.schema
    .createIndex('alert_policies_deleted')
    .on('alert_policies')
    .column('deleted_at')
    .where('deleted_at', 'is not', null)
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropIndex('alert_policies_deleted').execute();
  await db.schema.alterTable('alert_policies').dropColumn('deleted_at').execute();
}
