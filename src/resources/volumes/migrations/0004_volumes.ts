import { type Kysely, sql } from 'kysely';

// Migrations take Kysely<any>: they describe the schema as it was at their time, not as it is now.
// biome-ignore lint/suspicious/noExplicitAny: see above
type AnyDb = Kysely<any>;

/**
 * Volumes become a resource: the columns the lifecycle core and the API need, a tag table for filters,
 * and one index per sort. The root volumes 0002 made stay valid: version 1, no tags, attached as
 * /dev/vda since their instance was created.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .alterTable('volumes')
    .addColumn('version', 'integer', (c) => c.notNull().defaultTo(1))
    .execute();
  await db.schema
    .alterTable('volumes')
    .addColumn('tags', 'text', (c) => c.notNull().defaultTo('{}'))
    .execute();
  for (const column of ['device_name', 'attached_at', 'filesystem', 'pending_action']) {
    await db.schema.alterTable('volumes').addColumn(column, 'text').execute();
  }
  await db
    .updateTable('volumes')
    .set({ device_name: '/dev/vda', attached_at: sql`created_at` })
    .where('kind', '=', 'root')
    .execute();

  await db.schema
    .createTable('volume_tags')
    .addColumn('volume_id', 'text', (c) => c.notNull().references('volumes.id').onDelete('cascade'))
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('value', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('volume_tags_pk', ['volume_id', 'key'])
    .execute();
  await db.schema
    .createIndex('volume_tags_lookup')
    .on('volume_tags')
    .columns(['account_id', 'key', 'value', 'volume_id'])
    .execute();

  for (const [name, columns] of [
    ['volumes_account_name', ['account_id', 'name', 'id']],
    ['volumes_account_size', ['account_id', 'size_gb', 'id']],
    ['volumes_account_status', ['account_id', 'status', 'created_at', 'id']],
  ] as const) {
    await db.schema
      .createIndex(name)
      .on('volumes')
      .columns([...columns])
      .execute();
  }
}

export async function down(db: AnyDb): Promise<void> {
  for (const name of ['volumes_account_status', 'volumes_account_size', 'volumes_account_name']) {
    await db.schema.dropIndex(name).execute();
  }
  await db.schema.dropTable('volume_tags').execute();
  for (const column of ['pending_action', 'filesystem', 'attached_at', 'device_name', 'tags', 'version']) {
    await db.schema.alterTable('volumes').dropColumn(column).execute();
  }
}
