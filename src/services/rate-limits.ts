/**
 * Who gets which rate-limit budget: an account its plan's (or its per-account override), a caller
 * without a valid key the Free plan's, counted per client IP. The counting itself is in
 * store/rate-counters.ts.
 */
import type { Clock } from '../domain/clock.js';
import { PLAN_RATE_LIMITS, type Plan, type RateLimitPolicy } from '../domain/plans.js';
import type { RateCounters, RateDecisionResult } from '../store/rate-counters.js';
import type { AccountRow } from '../store/schema.js';
import type { Principal } from './principal.js';

export function rateLimitPolicyOf(
  account: Pick<AccountRow, 'plan' | 'rate_limit_per_hour' | 'rate_limit_burst'>,
): RateLimitPolicy {
  const plan = PLAN_RATE_LIMITS[account.plan as Plan] ?? PLAN_RATE_LIMITS.free;
  return {
    perHour: account.rate_limit_per_hour ?? plan.perHour,
    burst: account.rate_limit_burst ?? plan.burst,
  };
}

export const ANONYMOUS_POLICY = PLAN_RATE_LIMITS.free;

/** Past this many accounts the memo of counter keys starts afresh; it only saves work, never decides. */
const MAX_MEMOISED_ACCOUNT_KEYS = 10_000;

export class RateLimitService {
  /**
   * Account id → its counter key, each made once. A key built per request is a new string that the
   * in-process counters' map must hash and then compare in full; the same string object is found at once.
   */
  private readonly accountKeys = new Map<string, string>();

  constructor(
    private readonly counters: RateCounters,
    private readonly clock: Clock,
  ) {}

  consumeForAccount(principal: Principal): RateDecisionResult {
    return this.counters.consume(
      this.accountKey(principal.accountId),
      principal.rateLimit,
      this.clock.nowMs(),
    );
  }

  peekForAccount(principal: Principal): RateDecisionResult {
    return this.counters.peek(this.accountKey(principal.accountId), principal.rateLimit, this.clock.nowMs());
  }

  private accountKey(accountId: string): string {
    let key = this.accountKeys.get(accountId);
    if (key === undefined) {
      if (this.accountKeys.size >= MAX_MEMOISED_ACCOUNT_KEYS) this.accountKeys.clear();
      key = `acct:${accountId}`;
      this.accountKeys.set(accountId, key);
    }
    return key;
  }

  consumeForClient(clientIp: string): RateDecisionResult {
    return this.counters.consume(`ip:${clientIp}`, ANONYMOUS_POLICY, this.clock.nowMs());
  }
}
