/**
 * Quotas: the plan's limits (DESIGN.md §4), overridden per account by `admin set-quota`, and what the
 * account uses now. Each resource registers how to count its usage; unbuilt resources count 0.
 * `ensureRoom` must run inside the transaction that creates the resource, after the account row is
 * locked, so concurrent creates cannot both pass the last free slot.
 */
import { PLAN_QUOTAS, QUOTA_NAMES, type QuotaName } from '../domain/plans.js';
import { findAccount, quotaOverrides } from '../store/accounts.js';
import { countApiKeys } from '../store/api-keys.js';
import type { Store } from '../store/db.js';
import type { Executor } from '../store/schema.js';
import { NotFound, QuotaExceeded } from './errors.js';

export type UsageCounter = (db: Executor, accountId: string) => Promise<number>;

export interface QuotaView {
  name: QuotaName;
  limit: number;
  used: number;
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
    // Asking for nothing always fits, even when an operator has lowered a limit below what is in use.
    if (requested <= 0) return;
    const limit = (await this.limits(trx, accountId))[name];
    const used = await this.used(trx, accountId, name);
    if (used + requested > limit) throw new QuotaExceeded(name, limit, used, requested);
  }
}
