/**
 * Who gets which rate-limit budget: an account its plan's (or its per-account override), a caller
 * without a valid key the Free plan's, counted per client IP. The counting itself is in
 * platform/rate-limits/rate-counters.ts.
 */
import type { Clock } from '../domain/clock.js';
import { PLAN_RATE_LIMITS, type RateLimitPolicy } from '../domain/plans.js';
import type { Principal } from '../principal.js';
import type { AccountRow } from '../store/schema.js';
import type { RateCost, RateCounters, RateDecision } from './rate-counters.js';

export function rateLimitPolicyOf(
  account: Pick<AccountRow, 'plan' | 'rate_limit_per_hour' | 'rate_limit_burst'>,
): RateLimitPolicy {
  const plan = PLAN_RATE_LIMITS[account.plan];
  return {
    perHour: account.rate_limit_per_hour ?? plan.perHour,
    burst: account.rate_limit_burst ?? plan.burst,
  };
}

export const ANONYMOUS_POLICY = PLAN_RATE_LIMITS.free;

/** What a request does to its budget: takes one request from it, or only reads it (GET /v1/account/rate-limit). */
export type RateUse = 'consume' | 'peek';

export class RateLimitService {
  constructor(
    private readonly counters: RateCounters,
    private readonly clock: Clock,
  ) {}

  /** The decision for a request: on its account's budget, or without a principal on its client IP's. */
  decide(principal: Principal | null, clientIp: string, use: RateUse): Promise<RateDecision> {
    return principal ? this.forAccount(principal, use) : this.consumeForClient(clientIp);
  }

  /** The same decision at once when the counters are in this process; undefined when they are not. */
  decideNow(principal: Principal | null, clientIp: string, use: RateUse): RateDecision | undefined {
    const nowMs = this.clock.nowMs();
    return principal
      ? this.counters.decideNow(accountKey(principal.accountId), principal.rateLimit, nowMs, costOf(use))
      : this.counters.decideNow(clientKey(clientIp), ANONYMOUS_POLICY, nowMs, 1);
  }

  peekForAccount(principal: Principal): Promise<RateDecision> {
    return this.forAccount(principal, 'peek');
  }

  consumeForClient(clientIp: string): Promise<RateDecision> {
    return this.counters.consume(clientKey(clientIp), ANONYMOUS_POLICY, this.clock.nowMs());
  }

  /**
   * A keyless request on the client address's budget: spent ('consume'), or only reported ('peek') by
   * the few answers that must stay available to everyone behind one address (health checks, the console).
   */
  forClient(clientIp: string, use: RateUse): Promise<RateDecision> {
    const nowMs = this.clock.nowMs();
    return use === 'peek'
      ? this.counters.peek(clientKey(clientIp), ANONYMOUS_POLICY, nowMs)
      : this.counters.consume(clientKey(clientIp), ANONYMOUS_POLICY, nowMs);
  }

  /** forClient answered at once when the counters are in this process; undefined when they are not. */
  forClientNow(clientIp: string, use: RateUse): RateDecision | undefined {
    return this.counters.decideNow(clientKey(clientIp), ANONYMOUS_POLICY, this.clock.nowMs(), costOf(use));
  }

  private forAccount(principal: Principal, use: RateUse): Promise<RateDecision> {
    const subject = accountKey(principal.accountId);
    const nowMs = this.clock.nowMs();
    return use === 'peek'
      ? this.counters.peek(subject, principal.rateLimit, nowMs)
      : this.counters.consume(subject, principal.rateLimit, nowMs);
  }
}

function costOf(use: RateUse): RateCost {
  return use === 'peek' ? 0 : 1;
}

function accountKey(accountId: string): string {
  return `acct:${accountId}`;
}

function clientKey(clientIp: string): string {
  return `ip:${clientIp}`;
}
