/**
 * Rate-limit counters: an hourly window plus a token bucket per subject (an account, or a client IP
 * before authentication), updated in one atomic step.
 *
 * How it works: the window is the current clock hour; it allows `perHour` requests and resets at the
 * hour's end. The bucket holds at most `burst` tokens and refills at perHour/3600 tokens a second. A
 * request passes only when the window has room AND a whole token is left; passing takes one of each.
 * Both backends below implement exactly this; the Redis one runs it as a Lua script, so replicas that
 * share a Redis share one budget and never race on it.
 */
import type { Redis } from 'ioredis';
import type { RateLimitPolicy } from '../domain/plans.js';

export const WINDOW_SECONDS = 3600;

export interface RateDecision {
  allowed: boolean;
  limit: number;
  /** Requests left in the current window. */
  remaining: number;
  /** Unix seconds at which the window ends. */
  reset: number;
  /** Whole seconds until a denied request could pass; 0 when allowed. */
  retryAfter: number;
  burst: number;
  burstRemaining: number;
}

/** 1 takes a request from the budget when it has room (consume); 0 only reports it (peek). */
export type RateCost = 0 | 1;

export interface RateCounters {
  /** Takes one request from the subject's budget when it has room. */
  consume(subject: string, policy: RateLimitPolicy, nowMs: number): Promise<RateDecision>;
  /** Reports the budget without taking from it. */
  peek(subject: string, policy: RateLimitPolicy, nowMs: number): Promise<RateDecision>;
  /**
   * consume (cost 1) or peek (cost 0) answered at once, by counters kept in this process; undefined from
   * counters kept elsewhere, which only consume and peek can ask.
   */
  decideNow(
    subject: string,
    policy: RateLimitPolicy,
    nowMs: number,
    cost: RateCost,
  ): RateDecision | undefined;
  close(): Promise<void>;
}

interface BucketState {
  windowStart: number;
  count: number;
  tokens: number;
  tokensAtMs: number;
}

/**
 * Rounds to millionths. Token counts and waits are kept at this precision, in both backends, so that
 * refills add up exactly (ten refills of 0.1 make a whole token, not 0.9999999999999999) and a wait of
 * exactly 3 s is not rounded up to 4 by float error. floor(x + 0.5), not Math.round, because Lua has
 * only the former and the two backends must compute the same numbers.
 */
function micro(x: number): number {
  return Math.floor(x * 1e6 + 0.5) / 1e6;
}

/** The algorithm, as a pure function; MemoryRateCounters runs it, the Lua script mirrors it. */
export function decide(
  state: BucketState | undefined,
  policy: RateLimitPolicy,
  nowMs: number,
  cost: RateCost,
): { decision: RateDecision; next: BucketState } {
  const nowSeconds = Math.floor(nowMs / 1000);
  const windowStart = nowSeconds - (nowSeconds % WINDOW_SECONDS);
  const reset = windowStart + WINDOW_SECONDS;
  const refillPerSecond = policy.perHour / WINDOW_SECONDS;
  let count = state && state.windowStart === windowStart ? state.count : 0;
  let tokens = state
    ? micro(
        Math.min(
          policy.burst,
          state.tokens + (Math.max(0, nowMs - state.tokensAtMs) / 1000) * refillPerSecond,
        ),
      )
    : policy.burst;
  let allowed = true;
  let retryAfter = 0;
  if (cost === 1) {
    if (count < policy.perHour && tokens >= 1) {
      count += 1;
      tokens = micro(tokens - 1);
    } else {
      allowed = false;
      // The wait for both to have room: the window's end (a new window starts empty) and a whole token.
      const tokenWait = tokens >= 1 ? 0 : Math.ceil(micro((1 - tokens) / refillPerSecond));
      retryAfter = count >= policy.perHour ? Math.max(reset - nowSeconds, tokenWait) : Math.max(1, tokenWait);
    }
  }
  return {
    decision: {
      allowed,
      limit: policy.perHour,
      remaining: Math.max(0, policy.perHour - count),
      reset,
      retryAfter,
      burst: policy.burst,
      burstRemaining: Math.floor(tokens),
    },
    next: { windowStart, count, tokens, tokensAtMs: nowMs },
  };
}

export class MemoryRateCounters implements RateCounters {
  private readonly states = new Map<string, BucketState>();
  private readonly sweeper: NodeJS.Timeout;

  constructor() {
    // Subjects idle for a whole window are back to a full budget: forgetting them changes nothing.
    this.sweeper = setInterval(() => this.sweep(Date.now()), 60_000);
    this.sweeper.unref();
  }

  async consume(subject: string, policy: RateLimitPolicy, nowMs: number): Promise<RateDecision> {
    return this.decideNow(subject, policy, nowMs, 1);
  }

  async peek(subject: string, policy: RateLimitPolicy, nowMs: number): Promise<RateDecision> {
    return this.decideNow(subject, policy, nowMs, 0);
  }

  decideNow(subject: string, policy: RateLimitPolicy, nowMs: number, cost: RateCost): RateDecision {
    const { decision, next } = decide(this.states.get(subject), policy, nowMs, cost);
    // A peek leaves no state behind, as on Redis.
    if (cost === 1) this.states.set(subject, next);
    return decision;
  }

  sweep(nowMs: number): void {
    for (const [subject, state] of this.states) {
      if (nowMs - state.tokensAtMs > WINDOW_SECONDS * 1000) this.states.delete(subject);
    }
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
  }
}

// KEYS[1] = state hash; ARGV = nowMs, perHour, burst, cost, ttlMs. Mirrors decide() above.
const LUA_DECIDE = `
local now_ms = tonumber(ARGV[1])
local per_hour = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local now_s = math.floor(now_ms / 1000)
local window_start = now_s - (now_s % 3600)
local reset = window_start + 3600
local refill = per_hour / 3600
local function micro(x) return math.floor(x * 1e6 + 0.5) / 1e6 end
local s = redis.call('HMGET', KEYS[1], 'w', 'c', 't', 'ts')
local count = 0
local tokens = burst
if s[1] then
  if tonumber(s[1]) == window_start then count = tonumber(s[2]) end
  local elapsed = math.max(0, now_ms - tonumber(s[4]))
  tokens = micro(math.min(burst, tonumber(s[3]) + (elapsed / 1000) * refill))
end
local allowed = 1
local retry_after = 0
if cost == 1 then
  if count < per_hour and tokens >= 1 then
    count = count + 1
    tokens = micro(tokens - 1)
  else
    allowed = 0
    local token_wait = 0
    if tokens < 1 then
      token_wait = math.ceil(micro((1 - tokens) / refill))
    end
    if count >= per_hour then
      retry_after = math.max(reset - now_s, token_wait)
    else
      retry_after = math.max(1, token_wait)
    end
  end
  -- %.17g: tostring() keeps only 14 digits, and the memory backend keeps the exact double.
  redis.call('HSET', KEYS[1], 'w', window_start, 'c', count, 't', string.format('%.17g', tokens), 'ts', now_ms)
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[5]))
end
return {allowed, math.max(0, per_hour - count), reset, retry_after, math.floor(tokens)}
`;

type RedisWithDecide = Redis & {
  nimbusRateDecide(
    key: string,
    nowMs: number,
    perHour: number,
    burst: number,
    cost: number,
    ttlMs: number,
  ): Promise<number[]>;
};

export class RedisRateCounters implements RateCounters {
  private readonly redis: RedisWithDecide;

  constructor(
    redis: Redis,
    private readonly keyPrefix = 'nimbus:rl:',
  ) {
    redis.defineCommand('nimbusRateDecide', { numberOfKeys: 1, lua: LUA_DECIDE });
    this.redis = redis as RedisWithDecide;
  }

  consume(subject: string, policy: RateLimitPolicy, nowMs: number): Promise<RateDecision> {
    return this.run(subject, policy, nowMs, 1);
  }

  peek(subject: string, policy: RateLimitPolicy, nowMs: number): Promise<RateDecision> {
    return this.run(subject, policy, nowMs, 0);
  }

  decideNow(): undefined {
    return undefined;
  }

  private async run(
    subject: string,
    policy: RateLimitPolicy,
    nowMs: number,
    cost: RateCost,
  ): Promise<RateDecision> {
    const ttlMs = (WINDOW_SECONDS + 60) * 1000;
    const [allowed, remaining, reset, retryAfter, burstRemaining] = await this.redis.nimbusRateDecide(
      this.keyPrefix + subject,
      nowMs,
      policy.perHour,
      policy.burst,
      cost,
      ttlMs,
    );
    return {
      allowed: allowed === 1,
      limit: policy.perHour,
      remaining: remaining ?? 0,
      reset: reset ?? 0,
      retryAfter: retryAfter ?? 0,
      burst: policy.burst,
      burstRemaining: burstRemaining ?? 0,
    };
  }

  async close(): Promise<void> {
    // The Redis connection belongs to whoever opened it (main.ts).
  }
}
