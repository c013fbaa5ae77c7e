import type { Kysely } from 'kysely';

// Migrations take Kysely<any>: they describe the schema as it was at their time, not as it is now.
// biome-ignore lint/suspicious/noExplicitAny: see above
type AnyDb = Kysely<any>;

/**
 * The alert notifier's claim (resources/alerts/notifier.ts): one job sends every due e-mail and chat
 * notification, read by status and due time, so those reads stay an index range however many
 * notifications the history holds.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createIndex('alert_notifications_due')
    .on('alert_notifications')
    .columns(['status', 'next_attempt_at'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropIndex('alert_notifications_due').execute();
}
