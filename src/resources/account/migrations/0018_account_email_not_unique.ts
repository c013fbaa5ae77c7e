import { type Kysely, sql } from 'kysely';
import { isPostgres } from '../../../platform/store/dialect.js';

// Migrations take Kysely<any>: they describe the schema as it was at their time, not as it is now.
// biome-ignore lint/suspicious/noExplicitAny: see above
type AnyDb = Kysely<any>;

/**
 * An account's e-mail is a contact address, not an identity (its API keys are): two accounts may share
 * one, so that `PATCH /v1/account` cannot tell whether another account uses an address (issue 29 item 7).
 *
 * SQLite cannot drop a UNIQUE constraint, only rebuild the table; dropping the old one with foreign keys
 * enforced would delete every row that references it (ON DELETE CASCADE), so this runs only with them
 * off: `migrateToLatest` (platform/store/db.ts) turns them off around the migrations and checks them afterwards.
 */
export async function up(db: AnyDb): Promise<void> {
  if (isPostgres(db)) {
    await sql`alter table accounts drop constraint if exists accounts_email_key`.execute(db);
    return;
  }
  await rebuildAccounts(db, false);
}

export async function down(db: AnyDb): Promise<void> {
  if (isPostgres(db)) {
    await sql`alter table accounts add constraint accounts_email_key unique (email)`.execute(db);
    return;
  }
  await rebuildAccounts(db, true);
}

async function rebuildAccounts(db: AnyDb, uniqueEmail: boolean): Promise<void> {
  const enforced = await sql<{ foreign_keys: number }>`pragma foreign_keys`.execute(db);
  if (enforced.rows[0]?.foreign_keys !== 0) {
    throw new Error(
      '0018_account_email_not_unique rebuilds accounts: run it with foreign keys off (migrateToLatest)',
    );
  }
  await db.schema
    .createTable('accounts_rebuilt')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('email', 'text', (c) => (uniqueEmail ? c.notNull().unique() : c.notNull()))
    .addColumn('company', 'text')
    .addColumn('billing_email', 'text')
    .addColumn('plan', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('rate_limit_per_hour', 'integer')
    .addColumn('rate_limit_burst', 'integer')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  const columns = sql.raw(
    'id, name, email, company, billing_email, plan, status, rate_limit_per_hour, rate_limit_burst, created_at, updated_at',
  );
  await sql`insert into accounts_rebuilt (${columns}) select ${columns} from accounts`.execute(db);
  await db.schema.dropTable('accounts').execute();
  await db.schema.alterTable('accounts_rebuilt').renameTo('accounts').execute();
}
