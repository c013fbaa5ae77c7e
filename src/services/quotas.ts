/**
 * Quotas: the plan's limits (DESIGN.md §4), overridden per account by `admin set-quota`, and what the
 * account uses now. Each resource registers how to count its usage; unbuilt resources count 0.
 * `ensureRoom` must run inside the transaction that creates the resource, after the account row is
 * locked, so concurrent creates cannot both pass the last free slot.
 *
 * The quotas that were sums over every row (instances, vCPUs, GPUs, volumes, volume GB, snapshots) are
 * read from counters the store keeps in each write's transaction (store/usage.ts), so a check costs the
 * same at a million instances as at ten; their registered counts are the full recount that
 * `admin recount` compares with and repairs from.
 */
import { PLAN_QUOTAS, QUOTA_NAMES, type QuotaName } from '../domain/plans.js';
import { COUNTED_QUOTAS, isCountedQuota } from '../domain/usage.js';
import { findAccount, lockAccount, quotaOverrides } from '../store/accounts.js';
import { countApiKeys } from '../store/api-keys.js';
import type { Store } from '../store/db.js';
import type { Executor } from '../store/schema.js';
import { lockUsage, setUsage, usageOf, usagesOf } from '../store/usage.js';
import { NotFound, QuotaExceeded } from './errors.js';

export type UsageCounter = (db: Executor, accountId: string) => Promise<number>;

export interface QuotaView {
  name: QuotaName;
  limit: number;
  used: number;
}

/** One maintained counter as `admin recount` found it. */
export interface Recount {
  name: QuotaName;
  counter: number;
  counted: number;
}

export class QuotaService {
  private readonly counters = new Map<QuotaName, UsageCounter>();

  constructor(private readonly store: Store) {
    this.register('api_keys', countApiKeys);
  }

  register(name: QuotaName, counter: UsageCounter): void {
    this.counters.set(name, counter);
  }

  async limits(db: Executor, accountId: string): Promise<Record<QuotaName, number>> {
    const account = await findAccount(db, accountId);
    if (!account) throw new NotFound('account', accountId);
    const overrides = await quotaOverrides(db, accountId);
    const defaults = PLAN_QUOTAS[account.plan];
    return Object.fromEntries(
      QUOTA_NAMES.map((name) => [name, overrides.get(name) ?? defaults[name]]),
    ) as Record<QuotaName, number>;
  }

  used(db: Executor, accountId: string, name: QuotaName): Promise<number> {
    if (isCountedQuota(name)) return usageOf(db, accountId, name);
    return this.count(db, accountId, name);
  }

  /**
   * Counts the maintained quotas afresh and writes the counts over the counters, reporting both.
   * The counters are held first, so writers that change rows meanwhile wait and then apply their change
   * to the recounted value instead of being lost or counted twice.
   */
  async recount(accountId: string): Promise<Recount[]> {
    return this.store.db.transaction().execute(async (trx) => {
      await lockAccount(trx, accountId);
      const counters = await lockUsage(trx, accountId, COUNTED_QUOTAS);
      const found: Recount[] = [];
      for (const name of COUNTED_QUOTAS) {
        const counted = await this.count(trx, accountId, name);
        found.push({ name, counter: counters.get(name) ?? 0, counted });
        await setUsage(trx, accountId, name, counted);
      }
      return found;
    });
  }

  private count(db: Executor, accountId: string, name: QuotaName): Promise<number> {
    const counter = this.counters.get(name);
    return counter ? counter(db, accountId) : Promise.resolve(0);
  }

  async list(accountId: string): Promise<QuotaView[]> {
    const db = this.store.db;
    const limits = await this.limits(db, accountId);
    return Promise.all(
      QUOTA_NAMES.map(async (name) => ({
        name,
        limit: limits[name],
        used: await this.used(db, accountId, name),
      })),
    );
  }

  async ensureRoom(trx: Executor, accountId: string, name: QuotaName, requested: number): Promise<void> {
    await this.ensureRooms(trx, accountId, [[name, requested]]);
  }

  /**
   * Several quotas at once (an instance takes an instance, vCPUs and GPUs): the limits and the counters
   * are read once for all; the first request that does not fit, in the order given, is refused.
   */
  async ensureRooms(
    trx: Executor,
    accountId: string,
    requests: readonly (readonly [name: QuotaName, requested: number])[],
  ): Promise<void> {
    // Asking for nothing always fits, even when an operator has lowered a limit below what is in use.
    const asked = requests.filter(([, requested]) => requested > 0);
    if (asked.length === 0) return;
    const limits = await this.limits(trx, accountId);
    const counted = asked.map(([name]) => name).filter(isCountedQuota);
    const counters = counted.length > 0 ? await usagesOf(trx, accountId, counted) : null;
    for (const [name, requested] of asked) {
      const limit = limits[name];
      const used = isCountedQuota(name) ? (counters?.get(name) ?? 0) : await this.count(trx, accountId, name);
      if (used + requested > limit) throw new QuotaExceeded(name, limit, used, requested);
    }
  }
}
