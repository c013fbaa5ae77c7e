import type { Kysely } from 'kysely';

// Migrations take Kysely<any>: they describe the schema as it was at their time, not as it is now.
// biome-ignore lint/suspicious/noExplicitAny: see above
type AnyDb = Kysely<any>;

/**
 * Deletion protection (issue 35) on public IPs: the record's `protection` as JSON text, off for every
 * existing row (a default both engines fill in for the rows already there).
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .alterTable('public_ips')
    .addColumn('protection', 'text', (c) => c.notNull().defaultTo('{"delete":false}'))
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.alterTable('public_ips').dropColumn('protection').execute();
}
