import type { Plan, QuotaName } from '../../platform/domain/plans.js';
import { compiledOnce } from '../../platform/store/compiled-query.js';
import { isPostgres } from '../../platform/store/dialect.js';
import type {
  AccountRow,
  AccountUpdate,
  Database,
  Executor,
  NewAccountRow,
} from '../../platform/store/schema.js';

export async function insertAccount(db: Executor, row: NewAccountRow): Promise<void> {
  await db.insertInto('accounts').values(row).execute();
}

// Every authenticated GET /v1/account and every create's quota check run this lookup: compiled once
// (platform/store/compiled-query.ts), since building it with Kysely cost more than SQLite takes to run it.
const accountById = compiledOnce<Database, { id: string }, AccountRow>((db, p) =>
  db.selectFrom('accounts').selectAll().where('id', '=', p.id),
);

export function findAccount(db: Executor, id: string): Promise<AccountRow | undefined> {
  return accountById.executeTakeFirst(db, { id });
}

/** The ids of the accounts whose contact address is `email` (addresses are not unique). */
export async function accountIdsByEmail(db: Executor, email: string): Promise<string[]> {
  const rows = await db
    .selectFrom('accounts')
    .select('id')
    .where('email', '=', email)
    .orderBy('id')
    .execute();
  return rows.map((row) => row.id);
}

export function listAccounts(db: Executor): Promise<AccountRow[]> {
  return db.selectFrom('accounts').selectAll().orderBy('created_at').orderBy('id').execute();
}

export async function updateAccount(
  db: Executor,
  id: string,
  changes: AccountUpdate,
): Promise<AccountRow | undefined> {
  return db.updateTable('accounts').set(changes).where('id', '=', id).returningAll().executeTakeFirst();
}

/**
 * Serialises writers that check a per-account limit counted from rows (API keys, firewall rules, VPNs,
 * webhooks, alert policies) inside a transaction. PostgreSQL locks the account row; SQLite already runs
 * one write transaction at a time. FOR NO KEY UPDATE, not FOR UPDATE: it excludes the other holders all
 * the same, but not the key-share locks that inserting a row referencing the account takes, so the
 * account's instance, volume and snapshot creates (which hold no account lock) do not wait for it.
 */
export async function lockAccount(db: Executor, id: string): Promise<void> {
  if (isPostgres(db)) {
    await db.selectFrom('accounts').select('id').where('id', '=', id).forNoKeyUpdate().execute();
  }
}

export async function setQuotaOverride(
  db: Executor,
  accountId: string,
  name: QuotaName,
  limit: number,
): Promise<void> {
  await db
    .insertInto('account_quotas')
    .values({ account_id: accountId, name, limit })
    .onConflict((oc) => oc.columns(['account_id', 'name']).doUpdateSet({ limit }))
    .execute();
}

/**
 * An account's plan and its quota overrides, in one read (every create checks its limits); undefined
 * when there is no such account. Compiled once (platform/store/compiled-query.ts).
 */
const planAndOverrides = compiledOnce<
  Database,
  { accountId: string },
  { plan: Plan; name: string | null; limit: number | null }
>((db, p) =>
  db
    .selectFrom('accounts')
    .leftJoin('account_quotas', 'account_quotas.account_id', 'accounts.id')
    .select(['accounts.plan', 'account_quotas.name', 'account_quotas.limit'])
    .where('accounts.id', '=', p.accountId),
);

export async function quotaSettings(
  db: Executor,
  accountId: string,
): Promise<{ plan: Plan; overrides: Map<string, number> } | undefined> {
  const rows = await planAndOverrides.execute(db, { accountId });
  const first = rows[0];
  if (first === undefined) return undefined;
  const overrides = new Map<string, number>();
  for (const row of rows) if (row.name !== null && row.limit !== null) overrides.set(row.name, row.limit);
  return { plan: first.plan, overrides };
}
