/**
 * Per-account usage counters (account_usage): the lifecycle core applies each write's `usageDelta` here
 * (from what the kind declares a record takes, `ResourceKind.usage`), in the writer's transaction, so a
 * quota check reads one row instead of counting or summing the account's rows. A missing row is zero.
 */
import { sql } from 'kysely';
import { compiledPerShape } from '../store/compiled-query.js';
import { isPostgres } from '../store/dialect.js';
import type { Database, Executor } from '../store/schema.js';
import type { CountedQuota, Usage } from './usage.js';

/**
 * Counter rows in the order of their key (account, name): every writer that moves several counters of
 * an account takes their rows in that order, as `lockUsage` (the recount) does, so two writers never
 * hold one each while waiting for the other's.
 */
function byName<T extends [string, unknown]>(changes: T[]): T[] {
  return changes.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/** Moves the account's counters by `delta` now, every counter it moves in one statement (none guarded). */
export async function adjustUsage(db: Executor, accountId: string, delta: Usage): Promise<void> {
  const changes = byName(Object.entries(delta).filter(([, change]) => change));
  if (changes.length === 0) return;
  await upsertCounters(db, accountId, changes as [CountedQuota, number][], []);
}

/** The read of `usagesOf`, per number of counters read (compiled once each: a create reads its quotas). */
const countersRead = compiledPerShape<Database, Record<string, string>, { name: string; used: number }>(
  (shape) => (db, p) =>
    db
      .selectFrom('account_usage')
      .select(['name', 'used'])
      .where('account_id', '=', p.accountId as string)
      .where(
        'name',
        'in',
        Array.from({ length: Number(shape) }, (_, i) => p[`name${i}`] as string),
      ),
);

/** Several of the account's counters in one read (0 for a counter never written). */
export async function usagesOf(
  db: Executor,
  accountId: string,
  names: readonly CountedQuota[],
): Promise<Map<CountedQuota, number>> {
  const values: Record<string, string> = { accountId };
  names.forEach((name, i) => {
    values[`name${i}`] = name;
  });
  const rows = await countersRead(String(names.length)).execute(db, values);
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
    .values([...names].sort().map((name) => ({ account_id: accountId, name, used: 0 })))
    .onConflict((oc) => oc.columns(['account_id', 'name']).doNothing())
    .execute();
  const postgres = isPostgres(db);
  let query = db
    .selectFrom('account_usage')
    .select(['name', 'used'])
    .where('account_id', '=', accountId)
    .where('name', 'in', names)
    // Held in the order writers take them (byName: by code point, whatever the database's collation).
    .orderBy(postgres ? sql`name collate "C"` : sql`name`);
  if (postgres) query = query.forUpdate();
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

/**
 * A create's counter changes, held back until its transaction's end (PostgreSQL: the counter rows are
 * the one thing every create of an account writes, so whoever writes them holds them until COMMIT;
 * written last, they are held for one statement and the commit instead of the whole transaction).
 * The create's context (platform/lifecycle/write-context.ts) adds its writes' deltas here instead of
 * writing them; `applyHeldUsage` writes the sums. The transaction must not commit in between: the
 * rule that a write's usage moves in the write's own transaction still holds, only later in it.
 */
export class HeldUsage {
  private readonly byAccount = new Map<string, Usage>();

  add(accountId: string, delta: Usage): void {
    const sum = this.byAccount.get(accountId) ?? {};
    for (const [name, change] of Object.entries(delta) as [CountedQuota, number][]) {
      if (change) sum[name] = (sum[name] ?? 0) + change;
    }
    this.byAccount.set(accountId, sum);
  }

  /** What is held, per account; emptied by `applyHeldUsage`. */
  take(): [accountId: string, delta: Usage][] {
    const held = [...this.byAccount];
    this.byAccount.clear();
    return held;
  }
}

/**
 * The upsert of `upsertCounters`, per shape: the counters it moves, then those of them guarded by a
 * limit (`names|guarded`, by name). The limits are parameters, so one compiled statement serves every
 * account and plan.
 */
const guardedUsageUpsert = compiledPerShape<Database, Record<string, string | number>, { name: string }>(
  (shape) => (db, p) => {
    const [moved = '', guardedNames = ''] = shape.split('|');
    const names = moved.split(',');
    const guarded = guardedNames === '' ? [] : guardedNames.split(',');
    // The limit each guarded counter may reach, by name; the others may take any value.
    const cases = guarded.map((name, i) => sql`when ${sql.lit(name)} then ${p[`limit${i}`] as number}`);
    const guard =
      cases.length === 0
        ? sql<boolean>`1 = 1`
        : sql<boolean>`account_usage.used + excluded.used <= case excluded.name ${sql.join(cases, sql` `)} else account_usage.used + excluded.used end`;
    return db
      .insertInto('account_usage')
      .values(
        names.map((_, i) => ({
          account_id: p.accountId as string,
          name: p[`name${i}`] as string,
          used: p[`used${i}`] as number,
        })),
      )
      .onConflict((oc) =>
        oc
          .columns(['account_id', 'name'])
          .doUpdateSet({ used: sql<number>`account_usage.used + excluded.used` })
          .where(guard),
      )
      .returning('name');
  },
);

/**
 * Adds `changes` to the account's counters in one statement, each of `guarded` only up to its limit (a
 * counter that would pass it is left as it is); the names of the counters written.
 */
function upsertCounters(
  db: Executor,
  accountId: string,
  changes: readonly (readonly [CountedQuota, number])[],
  guarded: readonly (readonly [CountedQuota, number])[],
): Promise<{ name: string }[]> {
  const values: Record<string, string | number> = { accountId };
  changes.forEach(([name, change], i) => {
    values[`name${i}`] = name;
    values[`used${i}`] = change;
  });
  guarded.forEach(([, limit], i) => {
    values[`limit${i}`] = limit;
  });
  const shape = `${changes.map(([name]) => name).join(',')}|${guarded.map(([name]) => name).join(',')}`;
  return guardedUsageUpsert(shape).execute(db, values);
}

/**
 * Writes what `held` holds, in one statement per account, each counter guarded by its limit in `limits`
 * (a counter not named there is not guarded): a counter that would pass its limit is left as it is.
 * Returns the guarded counters left unchanged that way (the caller refuses the request and rolls the
 * transaction back); empty when everything was written.
 */
export async function applyHeldUsage(
  trx: Executor,
  held: HeldUsage,
  limits: ReadonlyMap<CountedQuota, number> = new Map(),
): Promise<CountedQuota[]> {
  const refused: CountedQuota[] = [];
  for (const [accountId, delta] of held.take()) {
    const changes = byName(
      (Object.entries(delta) as [CountedQuota, number][]).filter(([, change]) => change),
    );
    if (changes.length === 0) continue;
    // A counter with no row yet is inserted with the change itself: refused here when that passes.
    const growing = changes.filter(([name, change]) => change > 0 && limits.has(name));
    const tooBig = growing.filter(([name, change]) => change > (limits.get(name) as number));
    if (tooBig.length > 0) {
      refused.push(...tooBig.map(([name]) => name));
      continue;
    }
    const guarded = growing.map(([name]) => [name, limits.get(name) as number] as const);
    const written = await upsertCounters(trx, accountId, changes, guarded);
    const done = new Set(written.map((row) => row.name));
    refused.push(...changes.map(([name]) => name).filter((name) => !done.has(name)));
  }
  return refused;
}
