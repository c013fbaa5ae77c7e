import type { Kysely } from 'kysely';

// Migrations take Kysely<any>: they describe the schema as it was at their time, not as it is now.
// biome-ignore lint/suspicious/noExplicitAny: see above
type AnyDb = Kysely<any>;

/**
 * VPNs (WireGuard gateways) and their peers. A gateway's public address is unique in its region (instances
 * hold the others; allocation reads both, see resources/addresses/public-ip-store.ts); a peer's tunnel address and public key
 * are unique within its VPN, so two adds can never share either.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('vpns')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('region', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('endpoint_ip', 'text', (c) => c.notNull())
    .addColumn('endpoint_port', 'integer', (c) => c.notNull())
    .addColumn('server_public_key', 'text', (c) => c.notNull())
    .addColumn('server_private_key_sealed', 'text', (c) => c.notNull())
    .addColumn('tunnel_cidr', 'text', (c) => c.notNull())
    .addColumn('allowed_cidrs', 'text', (c) => c.notNull())
    .addColumn('version', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addUniqueConstraint('vpns_endpoint_ip', ['region', 'endpoint_ip'])
    .execute();
  for (const [name, columns] of [
    ['vpns_account_created', ['account_id', 'created_at', 'id']],
    ['vpns_account_name', ['account_id', 'name', 'id']],
  ] as const) {
    await db.schema
      .createIndex(name)
      .on('vpns')
      .columns([...columns])
      .execute();
  }

  await db.schema
    .createTable('vpn_peers')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('vpn_id', 'text', (c) => c.notNull().references('vpns.id').onDelete('cascade'))
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('public_key', 'text', (c) => c.notNull())
    .addColumn('address', 'text', (c) => c.notNull())
    .addColumn('key_generated', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addUniqueConstraint('vpn_peers_address', ['vpn_id', 'address'])
    .addUniqueConstraint('vpn_peers_public_key', ['vpn_id', 'public_key'])
    .execute();
  await db.schema
    .createIndex('vpn_peers_vpn_created')
    .on('vpn_peers')
    .columns(['vpn_id', 'created_at', 'id'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('vpn_peers').execute();
  await db.schema.dropTable('vpns').execute();
}
