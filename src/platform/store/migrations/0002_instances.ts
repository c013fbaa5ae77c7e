import type { Kysely } from 'kysely';

// Migrations take Kysely<any>: they describe the schema as it was at their time, not as it is now.
// biome-ignore lint/suspicious/noExplicitAny: see above
type AnyDb = Kysely<any>;

export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('ssh_keys')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('public_key', 'text', (c) => c.notNull())
    .addColumn('fingerprint', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addUniqueConstraint('ssh_keys_account_name', ['account_id', 'name'])
    .addUniqueConstraint('ssh_keys_account_fingerprint', ['account_id', 'fingerprint'])
    .execute();
  await db.schema
    .createIndex('ssh_keys_account_created')
    .on('ssh_keys')
    .columns(['account_id', 'created_at', 'id'])
    .execute();

  await db.schema
    .createTable('instances')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('operation', 'text')
    .addColumn('operation_at', 'text')
    .addColumn('instance_type', 'text', (c) => c.notNull())
    .addColumn('region', 'text', (c) => c.notNull())
    .addColumn('image', 'text', (c) => c.notNull())
    .addColumn('ssh_key_ids', 'text', (c) => c.notNull())
    .addColumn('public_ip', 'text', (c) => c.notNull())
    .addColumn('private_ip', 'text', (c) => c.notNull())
    .addColumn('tags', 'text', (c) => c.notNull())
    .addColumn('user_data', 'text')
    .addColumn('encryption_key_id', 'text')
    .addColumn('firewall_preset', 'text', (c) => c.notNull())
    .addColumn('monitoring', 'integer', (c) => c.notNull())
    .addColumn('backup_schedule', 'text')
    .addColumn('root_volume_id', 'text', (c) => c.notNull())
    .addColumn('version', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addUniqueConstraint('instances_public_ip', ['region', 'public_ip'])
    .addUniqueConstraint('instances_private_ip', ['account_id', 'region', 'private_ip'])
    .execute();
  // One index per supported sort, each ending in id (the tie-breaker) so a page is read from the index
  // alone; the status index also serves the status filter.
  for (const [name, columns] of [
    ['instances_account_created', ['account_id', 'created_at', 'id']],
    ['instances_account_name', ['account_id', 'name', 'id']],
    ['instances_account_status', ['account_id', 'status', 'created_at', 'id']],
    ['instances_account_type', ['account_id', 'instance_type', 'id']],
  ] as const) {
    await db.schema
      .createIndex(name)
      .on('instances')
      .columns([...columns])
      .execute();
  }

  await db.schema
    .createTable('instance_tags')
    .addColumn('instance_id', 'text', (c) => c.notNull().references('instances.id').onDelete('cascade'))
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('value', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('instance_tags_pk', ['instance_id', 'key'])
    .execute();
  await db.schema
    .createIndex('instance_tags_lookup')
    .on('instance_tags')
    .columns(['account_id', 'key', 'value', 'instance_id'])
    .execute();

  await db.schema
    .createTable('instance_counts')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('region', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('count', 'integer', (c) => c.notNull())
    .addPrimaryKeyConstraint('instance_counts_pk', ['account_id', 'region', 'status'])
    .execute();

  await db.schema
    .createTable('region_gpu_usage')
    .addColumn('region', 'text', (c) => c.primaryKey())
    .addColumn('gpus', 'integer', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('volumes')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('region', 'text', (c) => c.notNull())
    .addColumn('size_gb', 'integer', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('instance_id', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('volumes_account_created')
    .on('volumes')
    .columns(['account_id', 'created_at', 'id'])
    .execute();
  await db.schema.createIndex('volumes_instance').on('volumes').column('instance_id').execute();

  await db.schema
    .createTable('jobs')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('key', 'text', (c) => c.notNull().unique())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('subject_id', 'text', (c) => c.notNull())
    .addColumn('run_at', 'text', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull())
    .addColumn('version', 'integer', (c) => c.notNull())
    .addColumn('lease_owner', 'text')
    .addColumn('lease_until', 'text')
    .addColumn('last_error', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('jobs_run_at').on('jobs').column('run_at').execute();

  // sim_machines was created here until the simulator took its table over (drivers/simulator/machines.ts,
  // which creates it if missing); stores made before keep theirs.

  await db.schema
    .createIndex('events_account_resource')
    .on('events')
    .columns(['account_id', 'resource_id', 'seq'])
    .execute();
  await db.schema
    .createIndex('events_account_type')
    .on('events')
    .columns(['account_id', 'type', 'seq'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropIndex('events_account_type').execute();
  await db.schema.dropIndex('events_account_resource').execute();
  for (const table of [
    'jobs',
    'volumes',
    'region_gpu_usage',
    'instance_counts',
    'instance_tags',
    'instances',
    'ssh_keys',
  ]) {
    await db.schema.dropTable(table).execute();
  }
}
