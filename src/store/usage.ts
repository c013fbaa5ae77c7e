/**
 * Per-account usage counters (account_usage): the instances, volumes and snapshots stores apply each
 * write's `usageDelta` here, in the writer's transaction, so a quota check reads one row instead of
 * counting or summing the account's rows. A missing row is zero.
 */
import { sql } from 'kysely';
import type { CountedQuota, Usage } from '../domain/usage.js';
import { isPostgres } from './dialect.js';
import type { Executor } from './schema.js';

export async function adjustUsage(db: Executor, accountId: string, delta: Usage): Promise<void> {
  const changes = Object.entries(delta).filter(([, change]) => change);
  if (changes.length === 0) return;
  // Every counter the write moves, in one statement.
  await db
    .insertInto('account_usage')
    .values(changes.map(([name, change]) => ({ account_id: accountId, name, used: change as number })))
    .onConflict((oc) =>
      oc
        .columns(['account_id', 'name'])
        .doUpdateSet({ used: sql<number>`account_usage.used + excluded.used` }),
    )
    .execute();
}

/** Several of the account's counters in one read (0 for a counter never written). */
export async function usagesOf(
  db: Executor,
  accountId: string,
  names: readonly CountedQuota[],
): Promise<Map<CountedQuota, number>> {
  const rows = await db
    .selectFrom('account_usage')
    .select(['name', 'used'])
    .where('account_id', '=', accountId)
    .where('name', 'in', names)
    .execute();
  const found = new Map(rows.map((row) => [row.name, Number(row.used)]));
  return new Map(names.map((name) => [name, found.get(name) ?? 0]));
}

export async function usageOf(db: Executor, accountId: string, name: CountedQuota): Promise<number> {
  const row = await db
    .selectFrom('account_usage')
    .select('used')
    .where('account_id', '=', accountId)
    .where('name', '=', name)
    .executeTakeFirst();
  return Number(row?.used ?? 0);
}

/**
 * Holds the account's counters until the transaction ends (creating missing ones at zero so they can be
 * held too); their values before. On SQLite the one writer already holds everything.
 */
export async function lockUsage(
  db: Executor,
  accountId: string,
  names: readonly CountedQuota[],
): Promise<Map<string, number>> {
  await db
    .insertInto('account_usage')
    .values(names.map((name) => ({ account_id: accountId, name, used: 0 })))
    .onConflict((oc) => oc.columns(['account_id', 'name']).doNothing())
    .execute();
  let query = db.selectFrom('account_usage').select(['name', 'used']).where('account_id', '=', accountId);
  if (isPostgres(db)) query = query.forUpdate();
  const rows = await query.execute();
  return new Map(rows.map((row) => [row.name, Number(row.used)]));
}

/** Overwrites a counter with a full count (`admin recount`). */
export async function setUsage(
  db: Executor,
  accountId: string,
  name: CountedQuota,
  used: number,
): Promise<void> {
  await db
    .insertInto('account_usage')
    .values({ account_id: accountId, name, used })
    .onConflict((oc) => oc.columns(['account_id', 'name']).doUpdateSet({ used }))
    .execute();
}
