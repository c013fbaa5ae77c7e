import type { Kysely } from 'kysely';

// Migrations take Kysely<any>: they describe the schema as it was at their time, not as it is now.
// biome-ignore lint/suspicious/noExplicitAny: see above
type AnyDb = Kysely<any>;

/**
 * Instances by region and name, across accounts: the DNS server answers `<name>.<region>.<domain>` only
 * when one instance of the region has that name (resources/dns/store.ts), and asks on every such query.
 * The other instance indexes all begin with the account.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema.createIndex('instances_region_name').on('instances').columns(['region', 'name']).execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropIndex('instances_region_name').execute();
}
