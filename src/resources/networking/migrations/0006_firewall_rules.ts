import type { Kysely } from 'kysely';

// Migrations take Kysely<any>: they describe the schema as it was at their time, not as it is now.
// biome-ignore lint/suspicious/noExplicitAny: see above
type AnyDb = Kysely<any>;

/**
 * Firewall rules: a plain resource (no lifecycle). Address lists and targets are JSON text; a rule's
 * targets are matched against instances in the service, so no tag table is needed. One index per sort
 * of the list, and one for the rules of a region (what an instance's firewall reads).
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('firewall_rules')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('description', 'text', (c) => c.notNull())
    .addColumn('direction', 'text', (c) => c.notNull())
    .addColumn('action', 'text', (c) => c.notNull())
    .addColumn('protocol', 'text', (c) => c.notNull())
    .addColumn('ports', 'text')
    .addColumn('sources', 'text', (c) => c.notNull())
    .addColumn('destinations', 'text', (c) => c.notNull())
    .addColumn('priority', 'integer', (c) => c.notNull())
    .addColumn('target_instance_ids', 'text', (c) => c.notNull())
    .addColumn('target_tags', 'text', (c) => c.notNull())
    .addColumn('region', 'text', (c) => c.notNull())
    .addColumn('enabled', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  for (const [name, columns] of [
    ['firewall_rules_account_created', ['account_id', 'created_at', 'id']],
    ['firewall_rules_account_priority', ['account_id', 'priority', 'id']],
    ['firewall_rules_account_name', ['account_id', 'name', 'id']],
    ['firewall_rules_account_region', ['account_id', 'region', 'id']],
  ] as const) {
    await db.schema
      .createIndex(name)
      .on('firewall_rules')
      .columns([...columns])
      .execute();
  }
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('firewall_rules').execute();
}
