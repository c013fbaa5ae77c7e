import { type Kysely, sql } from 'kysely';
import { newId } from '../../../platform/domain/ids.js';
import { isPostgres } from '../../../platform/store/dialect.js';

// Migrations take Kysely<any>: they describe the schema as it was at their time, not as it is now.
// biome-ignore lint/suspicious/noExplicitAny: see above
type AnyDb = Kysely<any>;

/**
 * Public IPs as a resource of their own (issue 32): an address is a `public_ips` row that an instance
 * may hold, and `instances.public_ip` becomes the current assignment (null: none). Every instance's
 * address becomes a row with `auto_delete` set, as if it had been made with the instance today.
 * `released_addresses` keeps a released address out of its pool until `reusable_at` (24 h).
 *
 * SQLite cannot drop a NOT NULL, only rebuild the table: the rebuild takes the table's own statement from
 * sqlite_master with the one column changed, so every column added since 0002 comes along; it runs with
 * foreign keys off (`migrateToLatest`), as 0018 does.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('public_ips')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('region', 'text', (c) => c.notNull())
    .addColumn('address', 'text', (c) => c.notNull())
    .addColumn('instance_id', 'text')
    .addColumn('auto_delete', 'integer', (c) => c.notNull())
    .addColumn('tags', 'text', (c) => c.notNull())
    .addColumn('assigned_at', 'text')
    .addColumn('version', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addUniqueConstraint('public_ips_address', ['region', 'address'])
    // An instance holds at most one; NULLs (unassigned) are distinct on both engines.
    .addUniqueConstraint('public_ips_instance', ['instance_id'])
    .execute();
  for (const [name, columns] of [
    ['public_ips_account_created', ['account_id', 'created_at', 'id']],
    ['public_ips_account_name', ['account_id', 'name', 'id']],
  ] as const) {
    await db.schema
      .createIndex(name)
      .on('public_ips')
      .columns([...columns])
      .execute();
  }
  await db.schema
    .createTable('released_addresses')
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('ip', 'bigint', (c) => c.notNull())
    .addColumn('reusable_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('released_addresses_pk', ['scope', 'ip'])
    .execute();
  await db.schema
    .createIndex('released_addresses_due')
    .on('released_addresses')
    .columns(['scope', 'reusable_at'])
    .execute();

  if (isPostgres(db)) {
    await sql`alter table instances alter column public_ip drop not null`.execute(db);
  } else {
    await rebuildInstances(db, 'nullable');
  }
  await sql`update instances set public_ip = null where public_ip = ''`.execute(db);
  await backfill(db);
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('released_addresses').execute();
  await db.schema.dropTable('public_ips').execute();
  await sql`update instances set public_ip = '' where public_ip is null`.execute(db);
  if (isPostgres(db)) {
    await sql`alter table instances alter column public_ip set not null`.execute(db);
  } else {
    await rebuildInstances(db, 'not null');
  }
}

/** A row per instance address, named after its instance, assigned to it and released with it. */
async function backfill(db: AnyDb): Promise<void> {
  const now = new Date();
  const at = now.toISOString();
  let after = '';
  for (;;) {
    const rows: { id: string; account_id: string; name: string; region: string; public_ip: string }[] =
      await db
        .selectFrom('instances')
        .select(['id', 'account_id', 'name', 'region', 'public_ip'])
        .where('public_ip', 'is not', null)
        .where('id', '>', after)
        .orderBy('id')
        .limit(500)
        .execute();
    const last = rows.at(-1);
    if (last === undefined) return;
    await db
      .insertInto('public_ips')
      .values(
        rows.map((row) => ({
          id: newId('publicIp', now),
          account_id: row.account_id,
          name: `${row.name}-ip`.slice(0, 64),
          region: row.region,
          address: row.public_ip,
          instance_id: row.id,
          auto_delete: 1,
          tags: '{}',
          assigned_at: at,
          version: 1,
          created_at: at,
          updated_at: at,
        })),
      )
      .execute();
    after = last.id;
  }
}

async function rebuildInstances(db: AnyDb, publicIp: 'nullable' | 'not null'): Promise<void> {
  const enforced = await sql<{ foreign_keys: number }>`pragma foreign_keys`.execute(db);
  if (enforced.rows[0]?.foreign_keys !== 0) {
    throw new Error('0021_public_ips rebuilds instances: run it with foreign keys off (migrateToLatest)');
  }
  const objects = await sql<{ type: string; name: string; sql: string | null }>`
    select type, name, sql from sqlite_master where tbl_name = 'instances'`.execute(db);
  const table = objects.rows.find((row) => row.type === 'table')?.sql;
  if (!table) throw new Error('0021_public_ips: no instances table');
  const column = /"public_ip" text( not null)?/i;
  if (!column.test(table)) throw new Error('0021_public_ips: instances.public_ip not as 0002 made it');
  const rebuilt = table
    .replace(/create table "?instances"?/i, 'create table "instances_rebuilt"')
    .replace(column, publicIp === 'nullable' ? '"public_ip" text' : '"public_ip" text not null');
  await sql.raw(rebuilt).execute(db);
  await sql`insert into instances_rebuilt select * from instances`.execute(db);
  await db.schema.dropTable('instances').execute();
  await db.schema.alterTable('instances_rebuilt').renameTo('instances').execute();
  // The indexes went with the old table; the constraints' own (sqlite_autoindex_…) have no statement.
  for (const index of objects.rows) {
    if (index.type === 'index' && index.sql) await sql.raw(index.sql).execute(db);
  }
}
