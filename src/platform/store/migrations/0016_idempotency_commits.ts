import type { Kysely } from 'kysely';

// Migrations take Kysely<any>: they describe the schema as it was at their time, not as it is now.
// biome-ignore lint/suspicious/noExplicitAny: see above
type AnyDb = Kysely<any>;

/**
 * What an idempotent create made, written in the create's own transaction (platform/idempotency/context.ts):
 * `resource_kind` and `resource_id` of the record it committed, under the new state `committed`, so a
 * retry after a crash between the COMMIT and the answer replays the resource instead of making another.
 * `claimed_by` names the request that holds the key, so only that request marks or completes it (a
 * request whose lease lapsed and whose key was taken over cannot). Rows written before have nulls.
 */
export async function up(db: AnyDb): Promise<void> {
  for (const column of ['claimed_by', 'resource_kind', 'resource_id']) {
    await db.schema.alterTable('idempotency_keys').addColumn(column, 'text').execute();
  }
}

export async function down(db: AnyDb): Promise<void> {
  for (const column of ['claimed_by', 'resource_kind', 'resource_id']) {
    await db.schema.alterTable('idempotency_keys').dropColumn(column).execute();
  }
}
