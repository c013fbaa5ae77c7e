/**
 * Quotas: the plan's limits (docs/design.md, "Quotas and plans"), overridden by `admin set-quota`, and what the
 * account uses now. Each resource registers how to count its usage; unbuilt resources count 0.
 * `ensureRoom` must run inside the transaction that creates the resource. For the quotas that are not
 * counters it runs after the account row is locked, so concurrent creates cannot both pass the last
 * free slot. For the counters a create holds nothing while it builds: `ensureRooms` is an early answer
 * from what is committed, and `claimRooms`, the transaction's last statement, adds the create's usage
 * with each counter guarded by its limit (`used + n <= limit`), so of concurrent creates only those that
 * fit get through, and the counter rows stay held only until the COMMIT right after (platform/quotas/usage-store.ts).
 *
 * The quotas that were sums over every row (instances, vCPUs, GPUs, volumes, volume GB, snapshots) are
 * read from counters the store keeps in each write's transaction (platform/quotas/usage-store.ts), so a check costs the
 * same at a million instances as at ten; their registered counts are the full recount that
 * `admin recount` compares with and repairs from.
 */

import { PLAN_QUOTAS, type Plan, QUOTA_NAMES, type QuotaName } from '../domain/plans.js';
import { NotFound, QuotaExceeded } from '../errors.js';
import type { Store } from '../store/db.js';
import type { Executor } from '../store/schema.js';
import { COUNTED_QUOTAS, type CountedQuota, isCountedQuota } from './usage.js';
import { applyHeldUsage, type HeldUsage, lockUsage, setUsage, usageOf, usagesOf } from './usage-store.js';

export type UsageCounter = (db: Executor, accountId: string) => Promise<number>;

/** An account's plan and the limits set for it alone (`admin set-quota`), by quota name. */
export interface QuotaSettings {
  plan: Plan;
  overrides: ReadonlyMap<string, number>;
}

/** Where the account's quota settings are read (the account resource's store); undefined: no such account. */
export type QuotaSettingsReader = (db: Executor, accountId: string) => Promise<QuotaSettings | undefined>;

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

  constructor(
    private readonly store: Store,
    private readonly settingsOf: QuotaSettingsReader,
  ) {}

  /** How a resource counts its usage of a quota (the composition root registers each). */
  register(name: QuotaName, counter: UsageCounter): void {
    this.counters.set(name, counter);
  }

  async limits(db: Executor, accountId: string): Promise<Record<QuotaName, number>> {
    const settings = await this.settingsOf(db, accountId);
    if (!settings) throw new NotFound('account', accountId);
    const { plan, overrides } = settings;
    const defaults = PLAN_QUOTAS[plan];
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
   * to the recounted value instead of being lost or counted twice: every writer moves a counter in the
   * transaction that writes its row, and a create whose row is not committed yet (so not counted here)
   * writes its counters after this recount commits (`claimRooms` is its last statement).
   */
  async recount(accountId: string): Promise<Recount[]> {
    return this.store.db.transaction().execute(async (trx) => {
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

  async ensureRoom(
    trx: Executor,
    accountId: string,
    name: QuotaName,
    requested: number,
  ): Promise<Record<QuotaName, number> | null> {
    return this.ensureRooms(trx, accountId, [[name, requested]]);
  }

  /**
   * Several quotas at once (an instance takes an instance, vCPUs and GPUs): the limits and the counters
   * are read once for all; the first request that does not fit, in the order given, is refused. Returns
   * the limits read (for `claimRooms`), null when nothing was asked for. `hold`: the counters asked for
   * are held until the transaction ends, which makes the answer final (a change of an existing record,
   * whose counters move mid-transaction, unguarded: resizes).
   */
  async ensureRooms(
    trx: Executor,
    accountId: string,
    requests: readonly (readonly [name: QuotaName, requested: number])[],
    { hold = false }: { hold?: boolean } = {},
  ): Promise<Record<QuotaName, number> | null> {
    // Asking for nothing always fits, even when an operator has lowered a limit below what is in use.
    const asked = requests.filter(([, requested]) => requested > 0);
    if (asked.length === 0) return null;
    const limits = await this.limits(trx, accountId);
    const counted = asked.map(([name]) => name).filter(isCountedQuota);
    const read = hold ? lockUsage : usagesOf;
    const counters = counted.length > 0 ? await read(trx, accountId, counted) : null;
    for (const [name, requested] of asked) {
      const limit = limits[name];
      const used = isCountedQuota(name) ? (counters?.get(name) ?? 0) : await this.count(trx, accountId, name);
      if (used + requested > limit) throw new QuotaExceeded(name, limit, used, requested);
    }
    return limits;
  }

  /**
   * What is left of a counted quota, its counter held until the transaction ends: for a batch that
   * makes several records under one check (scheduled snapshots); the account's creates wait at their
   * claim meanwhile, then count what the batch made.
   */
  async roomHeld(trx: Executor, accountId: string, name: CountedQuota): Promise<number> {
    const limits = await this.limits(trx, accountId);
    const used = (await lockUsage(trx, accountId, [name])).get(name) ?? 0;
    return limits[name] - used;
  }

  /**
   * The transaction's last statement before COMMIT: writes the counter changes `held` back by a create
   * (platform/lifecycle/write-context.ts), each of `requests` guarded by its limit in `limits` (from
   * `ensureRooms`; null: nothing was asked for, nothing is guarded). A counter another create filled
   * meanwhile is refused like `ensureRooms` refuses (403 quota_exceeded, the first in the order given),
   * and the caller's transaction rolls back.
   */
  async claimRooms(
    trx: Executor,
    accountId: string,
    requests: readonly (readonly [name: QuotaName, requested: number])[],
    limits: Record<QuotaName, number> | null,
    held: HeldUsage,
  ): Promise<void> {
    const guarded = new Map(
      requests
        .filter(([name, requested]) => requested > 0 && isCountedQuota(name) && limits !== null)
        .map(([name]) => [name as CountedQuota, (limits as Record<QuotaName, number>)[name]]),
    );
    const refused = await applyHeldUsage(trx, held, guarded);
    if (refused.length === 0) return;
    const [name, requested] = requests.find(([name]) => refused.includes(name as CountedQuota)) ?? [];
    if (name === undefined || requested === undefined || limits === null) {
      throw new Error(`Counters ${refused.join(', ')} refused without a request for them`);
    }
    throw new QuotaExceeded(
      name,
      limits[name],
      await usageOf(trx, accountId, name as CountedQuota),
      requested,
    );
  }
}
