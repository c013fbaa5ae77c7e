import { type Kysely, sql } from 'kysely';

// Migrations take Kysely<any>: they describe the schema as it was at their time, not as it is now.
// biome-ignore lint/suspicious/noExplicitAny: see above
type AnyDb = Kysely<any>;

/**
 * Alerts (issue 21): policies, their incidents, and the notifications of each incident transition.
 *
 * - `alert_policies`: a metric threshold or a state, targets and channels as JSON text.
 * - `alert_incidents`: one row per firing, resolved later in place. The partial unique index holds the
 *   rule "one open incident per policy and instance" whatever writes it.
 * - `alert_notifications`: one row per channel target per incident transition (firing, resolved), the
 *   durable record of a notification; e-mail and chat ones are sent by a job of the job runner, webhook
 *   ones are a delivery of the webhook pipeline (`delivery_id`).
 * - `alert_counters`: `generation`, bumped by every policy write, so the evaluator rereads policies only
 *   when they changed.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('alert_policies')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('description', 'text')
    .addColumn('metric', 'text')
    .addColumn('compare', 'text')
    .addColumn('threshold', 'double precision')
    .addColumn('time_window', 'text')
    .addColumn('state', 'text')
    .addColumn('target_instance_ids', 'text', (c) => c.notNull())
    .addColumn('target_tags', 'text', (c) => c.notNull())
    .addColumn('channels', 'text', (c) => c.notNull())
    .addColumn('enabled', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  for (const [name, columns] of [
    ['alert_policies_account_created', ['account_id', 'created_at', 'id']],
    ['alert_policies_account_name', ['account_id', 'name', 'id']],
  ] as const) {
    await db.schema
      .createIndex(name)
      .on('alert_policies')
      .columns([...columns])
      .execute();
  }

  await db.schema
    .createTable('alert_incidents')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('policy_id', 'text', (c) => c.notNull().references('alert_policies.id').onDelete('cascade'))
    .addColumn('instance_id', 'text', (c) => c.notNull())
    .addColumn('instance_name', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('value', 'double precision')
    .addColumn('threshold', 'double precision')
    .addColumn('resolved_value', 'double precision')
    .addColumn('resolution', 'text')
    .addColumn('started_at', 'text', (c) => c.notNull())
    .addColumn('resolved_at', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  for (const [name, columns] of [
    ['alert_incidents_account_started', ['account_id', 'started_at', 'id']],
    ['alert_incidents_account_status', ['account_id', 'status', 'started_at', 'id']],
    ['alert_incidents_policy_started', ['policy_id', 'started_at', 'id']],
  ] as const) {
    await db.schema
      .createIndex(name)
      .on('alert_incidents')
      .columns([...columns])
      .execute();
  }
  // Partial index: both engines take `WHERE` on CREATE INDEX.
  await db.schema
    .createIndex('alert_incidents_one_open')
    .on('alert_incidents')
    .columns(['policy_id', 'instance_id'])
    .unique()
    .where(sql.ref('status'), '=', 'firing')
    .execute();

  await db.schema
    .createTable('alert_notifications')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('incident_id', 'text', (c) => c.notNull().references('alert_incidents.id').onDelete('cascade'))
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('transition', 'text', (c) => c.notNull())
    .addColumn('event_id', 'text', (c) => c.notNull())
    .addColumn('channel', 'text', (c) => c.notNull())
    .addColumn('target', 'text', (c) => c.notNull())
    .addColumn('format', 'text')
    .addColumn('delivery_id', 'text')
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull())
    .addColumn('next_attempt_at', 'text')
    .addColumn('last_error', 'text')
    .addColumn('sent_at', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('alert_notifications_incident')
    .on('alert_notifications')
    .columns(['incident_id', 'created_at', 'id'])
    .execute();

  await db.schema
    .createTable('alert_counters')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('value', 'bigint', (c) => c.notNull())
    .execute();
  await db.insertInto('alert_counters').values({ name: 'generation', value: 0 }).execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('alert_counters').execute();
  await db.schema.dropTable('alert_notifications').execute();
  await db.schema.dropTable('alert_incidents').execute();
  await db.schema.dropTable('alert_policies').execute();
}
