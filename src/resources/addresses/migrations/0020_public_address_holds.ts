import type { Kysely } from 'kysely';

// Migrations take Kysely<any>: they describe the schema as it was at their time, not as it is now.
// biome-ignore lint/suspicious/noExplicitAny: see above
type AnyDb = Kysely<any>;

/**
 * Public addresses of a region held by neither an instance nor a VPN gateway: with NIMBUS_PUBLIC_UPLINK,
 * each VPC's router port on the public link (`router:<account id>`), and the upstream router
 * (`gateway`) when NIMBUS_PUBLIC_GATEWAY names an address the pool would otherwise hand out
 * (resources/addresses/address-holds.ts). One holder per address, one address per holder.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('public_address_holds')
    .addColumn('region', 'text', (c) => c.notNull())
    .addColumn('ip', 'text', (c) => c.notNull())
    .addColumn('holder', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('public_address_holds_pk', ['region', 'ip'])
    .addUniqueConstraint('public_address_holds_holder', ['region', 'holder'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('public_address_holds').execute();
}
