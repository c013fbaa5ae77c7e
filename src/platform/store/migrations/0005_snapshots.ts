import type { Kysely } from 'kysely';

// Migrations take Kysely<any>: they describe the schema as it was at their time, not as it is now.
// biome-ignore lint/suspicious/noExplicitAny: see above
type AnyDb = Kysely<any>;

/**
 * Snapshots and backup schedules. Snapshots keep their source's id after the source is gone (no foreign
 * key). Schedules are one row per volume or instance that has one, with the next slot indexed, so the
 * scheduler reads only what is due. Volumes gain their own backup schedule and the restore in progress
 * (the snapshot being written into them, and when that was asked for).
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('snapshots')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('source_volume_id', 'text', (c) => c.notNull())
    .addColumn('source_instance_id', 'text')
    .addColumn('size_gb', 'integer', (c) => c.notNull())
    .addColumn('region', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('error', 'text')
    .addColumn('tags', 'text', (c) => c.notNull().defaultTo('{}'))
    .addColumn('version', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('completed_at', 'text')
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  for (const [name, columns] of [
    ['snapshots_account_created', ['account_id', 'created_at', 'id']],
    ['snapshots_account_name', ['account_id', 'name', 'id']],
    ['snapshots_account_size', ['account_id', 'size_gb', 'id']],
    // Retention reads a source's scheduled snapshots, newest first.
    ['snapshots_source', ['source_volume_id', 'kind', 'created_at']],
  ] as const) {
    await db.schema
      .createIndex(name)
      .on('snapshots')
      .columns([...columns])
      .execute();
  }

  await db.schema
    .createTable('backup_schedules')
    .addColumn('source_id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('source_kind', 'text', (c) => c.notNull())
    .addColumn('frequency', 'text', (c) => c.notNull())
    .addColumn('retention', 'integer', (c) => c.notNull())
    .addColumn('next_due_at', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('backup_schedules_due')
    .on('backup_schedules')
    .columns(['next_due_at', 'source_id'])
    .execute();

  for (const column of ['backup_schedule', 'restore_snapshot_id', 'restore_started_at']) {
    await db.schema.alterTable('volumes').addColumn(column, 'text').execute();
  }
  // A snapshot's delete asks whether a restore from it is under way.
  await db.schema.createIndex('volumes_restore').on('volumes').column('restore_snapshot_id').execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropIndex('volumes_restore').execute();
  for (const column of ['restore_started_at', 'restore_snapshot_id', 'backup_schedule']) {
    await db.schema.alterTable('volumes').dropColumn(column).execute();
  }
  await db.schema.dropTable('backup_schedules').execute();
  await db.schema.dropTable('snapshots').execute();
}
