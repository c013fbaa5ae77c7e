import type { Kysely } from 'kysely';

// Migrations take Kysely<any>: they describe the schema as it was at their time, not as it is now.
// biome-ignore lint/suspicious/noExplicitAny: see above
type AnyDb = Kysely<any>;

/**
 * Who each event was written for (platform/events/actor.ts): `actor_type` (`api_key`, `operator`, `system`) and,
 * for a key, its id and the client's address. Events written before were the system's as far as anyone
 * can tell now; a constant default gives them that without rewriting the table (SQLite keeps it in the
 * schema, PostgreSQL 11+ in the catalogue). The index serves `GET /v1/events?actor_id=`, the audit
 * question "what did this key do"; only keys' events have an id to find.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .alterTable('events')
    .addColumn('actor_type', 'text', (c) => c.notNull().defaultTo('system'))
    .execute();
  await db.schema.alterTable('events').addColumn('actor_id', 'text').execute();
  await db.schema.alterTable('events').addColumn('actor_ip', 'text').execute();
  await db.schema
    .createIndex('events_account_actor')
    .on('events')
    .columns(['account_id', 'actor_id', 'seq'])
    .where('actor_id', 'is not', null)
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropIndex('events_account_actor').execute();
  for (const column of ['actor_ip', 'actor_id', 'actor_type']) {
    await db.schema.alterTable('events').dropColumn(column).execute();
  }
}
