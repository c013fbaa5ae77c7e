/**
 * One table of scenarios, run against both backends: the in-process counters and the Redis Lua script.
 * Every step passes its own nowMs, so the same steps must give the same decisions on both; a
 * difference in any field means the two backends do not implement one algorithm.
 */
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HAVE_REDIS, redisClient } from '../../../test/helpers/backends.js';
import type { RateLimitPolicy } from '../domain/plans.js';
import {
  decide,
  MemoryRateCounters,
  type RateCounters,
  type RateDecision,
  RedisRateCounters,
} from './rate-counters.js';

/** 2026-03-10T14:00:00Z: the start of an hour window, so offsets below read as "seconds into the hour". */
const HOUR_START_MS = Date.UTC(2026, 2, 10, 14, 0, 0);
const HOUR_END_S = HOUR_START_MS / 1000 + 3600;

interface Step {
  /** Milliseconds after HOUR_START_MS. */
  atMs: number;
  op: 'consume' | 'peek';
  /** The fields of the decision this step must return (all of them are checked when given). */
  expect: Partial<RateDecision>;
  /** Repeat the step this many times, each with the same expectation except where noted. */
  times?: number;
}

interface Scenario {
  name: string;
  policy: RateLimitPolicy;
  steps: Step[];
}

const at = (seconds: number) => seconds * 1000;

const SCENARIOS: Scenario[] = [
  {
    name: 'a fresh subject starts with a full window and a full bucket, and peek reports it',
    policy: { perHour: 100, burst: 10 },
    steps: [
      {
        atMs: at(5),
        op: 'peek',
        expect: {
          allowed: true,
          limit: 100,
          remaining: 100,
          reset: HOUR_END_S,
          retryAfter: 0,
          burst: 10,
          burstRemaining: 10,
        },
      },
      {
        atMs: at(5),
        op: 'consume',
        expect: {
          allowed: true,
          limit: 100,
          remaining: 99,
          reset: HOUR_END_S,
          retryAfter: 0,
          burstRemaining: 9,
        },
      },
    ],
  },
  {
    name: 'burst exhaustion: the bucket empties, then refills at perHour/3600 tokens a second',
    // 3600/h refills one token a second.
    policy: { perHour: 3600, burst: 3 },
    steps: [
      { atMs: at(10), op: 'consume', expect: { allowed: true, remaining: 3599, burstRemaining: 2 } },
      { atMs: at(10), op: 'consume', expect: { allowed: true, remaining: 3598, burstRemaining: 1 } },
      { atMs: at(10), op: 'consume', expect: { allowed: true, remaining: 3597, burstRemaining: 0 } },
      // Empty bucket: denied, told to wait one second, and the denial takes nothing from the window.
      {
        atMs: at(10),
        op: 'consume',
        expect: { allowed: false, remaining: 3597, burstRemaining: 0, retryAfter: 1, reset: HOUR_END_S },
      },
      // Half a token back: still denied, still one (rounded-up) second to wait.
      { atMs: at(10) + 500, op: 'consume', expect: { allowed: false, retryAfter: 1, burstRemaining: 0 } },
      // A whole token back after one second.
      { atMs: at(11), op: 'consume', expect: { allowed: true, remaining: 3596, burstRemaining: 0 } },
      { atMs: at(11), op: 'consume', expect: { allowed: false, retryAfter: 1 } },
      // Long idle: the bucket fills to its capacity and no further.
      { atMs: at(100), op: 'peek', expect: { allowed: true, burstRemaining: 3, remaining: 3596 } },
      { atMs: at(100), op: 'consume', expect: { allowed: true, burstRemaining: 2, remaining: 3595 } },
    ],
  },
  {
    name: 'slow refill: retryAfter is the whole seconds until one token is back',
    // 360/h refills a token every 10 seconds.
    policy: { perHour: 360, burst: 2 },
    steps: [
      { atMs: at(0), op: 'consume', expect: { allowed: true }, times: 2 },
      { atMs: at(0), op: 'consume', expect: { allowed: false, retryAfter: 10, burstRemaining: 0 } },
      { atMs: at(4), op: 'consume', expect: { allowed: false, retryAfter: 6, burstRemaining: 0 } },
      { atMs: at(9), op: 'consume', expect: { allowed: false, retryAfter: 1, burstRemaining: 0 } },
      { atMs: at(10), op: 'consume', expect: { allowed: true, remaining: 357, burstRemaining: 0 } },
    ],
  },
  {
    name: 'a client that retries every second as told is let in when the token is back',
    // 360/h: 0.1 token a second. Ten denials one second apart add 0.1 ten times; the tenth second must
    // have a whole token on both backends (no rounding drift of the stored token count).
    policy: { perHour: 360, burst: 1 },
    steps: [
      { atMs: at(0), op: 'consume', expect: { allowed: true } },
      ...[1, 2, 3, 4, 5, 6, 7, 8, 9].map(
        (second): Step => ({
          atMs: at(second),
          op: 'consume',
          expect: { allowed: false, retryAfter: 10 - second },
        }),
      ),
      { atMs: at(10), op: 'consume', expect: { allowed: true, remaining: 358 } },
    ],
  },
  {
    name: 'hourly window exhaustion: retryAfter is the seconds left in the window',
    policy: { perHour: 3, burst: 10 },
    steps: [
      { atMs: at(600), op: 'consume', expect: { allowed: true, remaining: 2, burstRemaining: 9 } },
      { atMs: at(600), op: 'consume', expect: { allowed: true, remaining: 1 } },
      { atMs: at(600), op: 'consume', expect: { allowed: true, remaining: 0, burstRemaining: 7 } },
      // Tokens are left (7) but the window is full: wait for the window's end, 3000 s away.
      {
        atMs: at(600),
        op: 'consume',
        expect: { allowed: false, remaining: 0, reset: HOUR_END_S, retryAfter: 3000, burstRemaining: 7 },
      },
      { atMs: at(3599) + 999, op: 'consume', expect: { allowed: false, retryAfter: 1, remaining: 0 } },
      { atMs: at(3599) + 999, op: 'peek', expect: { allowed: true, remaining: 0, retryAfter: 0 } },
    ],
  },
  {
    name: 'window rollover at the hour: the count starts again and reset moves to the next hour',
    policy: { perHour: 2, burst: 5 },
    steps: [
      { atMs: at(3590), op: 'consume', expect: { allowed: true, remaining: 1, reset: HOUR_END_S } },
      { atMs: at(3590), op: 'consume', expect: { allowed: true, remaining: 0, reset: HOUR_END_S } },
      { atMs: at(3590), op: 'consume', expect: { allowed: false, retryAfter: 10, reset: HOUR_END_S } },
      { atMs: at(3600), op: 'peek', expect: { remaining: 2, reset: HOUR_END_S + 3600 } },
      {
        atMs: at(3600),
        op: 'consume',
        expect: { allowed: true, remaining: 1, reset: HOUR_END_S + 3600, retryAfter: 0 },
      },
      { atMs: at(3601), op: 'consume', expect: { allowed: true, remaining: 0 } },
      { atMs: at(3601), op: 'consume', expect: { allowed: false, retryAfter: 3599 } },
    ],
  },
  {
    name: 'window used up and bucket empty near the hour: retryAfter waits for the token too',
    policy: { perHour: 2, burst: 2 },
    steps: [
      { atMs: at(3599), op: 'consume', expect: { allowed: true, remaining: 1 } },
      { atMs: at(3599), op: 'consume', expect: { allowed: true, remaining: 0, burstRemaining: 0 } },
      // The window ends in 1 s, but a token takes 1,800 s to come back at 2 an hour.
      { atMs: at(3599), op: 'consume', expect: { allowed: false, remaining: 0, retryAfter: 1800 } },
      // A new window (remaining 2), still no whole token.
      { atMs: at(3599 + 1799), op: 'consume', expect: { allowed: false, remaining: 2 } },
      { atMs: at(3599 + 1800), op: 'consume', expect: { allowed: true, remaining: 1 } },
    ],
  },
  {
    name: 'peek never consumes, not even from an empty bucket or a full window',
    policy: { perHour: 5, burst: 2 },
    steps: [
      { atMs: at(1), op: 'peek', expect: { allowed: true, remaining: 5, burstRemaining: 2 }, times: 10 },
      { atMs: at(1), op: 'consume', expect: { allowed: true, remaining: 4, burstRemaining: 1 } },
      { atMs: at(1), op: 'peek', expect: { allowed: true, remaining: 4, burstRemaining: 1 }, times: 10 },
      { atMs: at(1), op: 'consume', expect: { allowed: true, remaining: 3, burstRemaining: 0 } },
      {
        atMs: at(1),
        op: 'peek',
        expect: { allowed: true, remaining: 3, burstRemaining: 0, retryAfter: 0 },
        times: 10,
      },
      { atMs: at(1), op: 'consume', expect: { allowed: false } },
    ],
  },
];

async function runScenario(counters: RateCounters, subject: string, scenario: Scenario): Promise<void> {
  for (const [index, step] of scenario.steps.entries()) {
    for (let i = 0; i < (step.times ?? 1); i += 1) {
      const nowMs = HOUR_START_MS + step.atMs;
      const decision =
        step.op === 'consume'
          ? await counters.consume(subject, scenario.policy, nowMs)
          : await counters.peek(subject, scenario.policy, nowMs);
      expect(
        { step: index, ...decision },
        `step ${index} (${step.op} at +${step.atMs} ms, repetition ${i})`,
      ).toMatchObject({ step: index, ...step.expect });
      // Invariants every decision keeps.
      expect(decision.limit).toBe(scenario.policy.perHour);
      expect(decision.burst).toBe(scenario.policy.burst);
      expect(decision.allowed ? decision.retryAfter === 0 : decision.retryAfter >= 1).toBe(true);
    }
  }
}

function uniqueSubject(): string {
  return `test:${randomBytes(8).toString('hex')}`;
}

async function keepsSubjectsApart(counters: RateCounters): Promise<void> {
  const policy = { perHour: 10, burst: 1 };
  const first = uniqueSubject();
  expect((await counters.consume(first, policy, HOUR_START_MS)).allowed).toBe(true);
  expect((await counters.consume(first, policy, HOUR_START_MS)).allowed).toBe(false);
  expect((await counters.consume(uniqueSubject(), policy, HOUR_START_MS)).allowed).toBe(true);
}

describe('MemoryRateCounters', () => {
  const counters = new MemoryRateCounters();
  afterAll(() => counters.close());

  it.each(SCENARIOS)('$name', (scenario) => runScenario(counters, uniqueSubject(), scenario));

  it('keeps subjects apart', () => keepsSubjectsApart(counters));
});

describe.skipIf(!HAVE_REDIS)('RedisRateCounters', () => {
  let redis: Redis;
  let counters: RedisRateCounters;
  const prefix = `nimbus-test:rl:${randomBytes(6).toString('hex')}:`;

  beforeAll(() => {
    redis = redisClient();
    counters = new RedisRateCounters(redis, prefix);
  });
  afterAll(async () => {
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    await counters.close();
    await redis.quit();
  });

  it.each(SCENARIOS)('$name', (scenario) => runScenario(counters, uniqueSubject(), scenario));

  it('keeps subjects apart', () => keepsSubjectsApart(counters));

  it('decides exactly as the memory backend over long pseudo-random request sequences', async () => {
    // A fixed-seed generator: the same sequences on every run, so a failure can be replayed.
    let seed = 42;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
    const memory = new MemoryRateCounters();
    try {
      for (let sequence = 0; sequence < 1000; sequence += 1) {
        const policy = {
          perHour: [7, 100, 360, 1000, 3600, 10_000][Math.floor(random() * 6)] ?? 1000,
          burst: 1 + Math.floor(random() * 5),
        };
        const subject = uniqueSubject();
        // Start a minute before an hour boundary so sequences also cross a window rollover.
        let nowMs = HOUR_START_MS - 60_000;
        const fromMemory: RateDecision[] = [];
        const fromRedis: Promise<RateDecision>[] = [];
        for (let step = 0; step < 60; step += 1) {
          nowMs += Math.floor(random() * 3000);
          const op = random() < 0.1 ? 'peek' : 'consume';
          fromMemory.push(await memory[op](subject, policy, nowMs));
          // Not awaited one by one: one connection runs the scripts in the order they were sent.
          fromRedis.push(counters[op](subject, policy, nowMs));
        }
        expect(await Promise.all(fromRedis), `sequence ${sequence}, ${JSON.stringify(policy)}`).toEqual(
          fromMemory,
        );
      }
    } finally {
      await memory.close();
    }
  });

  it('peek writes nothing to Redis', async () => {
    const subject = uniqueSubject();
    await counters.peek(subject, { perHour: 10, burst: 2 }, HOUR_START_MS);
    expect(await redis.exists(prefix + subject)).toBe(0);
  });

  it('is atomic: concurrent consumes never take more than the bucket holds', async () => {
    const subject = uniqueSubject();
    const policy = { perHour: 1000, burst: 7 };
    const decisions = await Promise.all(
      Array.from({ length: 40 }, () => counters.consume(subject, policy, HOUR_START_MS)),
    );
    expect(decisions.filter((d) => d.allowed)).toHaveLength(7);
    expect((await counters.peek(subject, policy, HOUR_START_MS)).remaining).toBe(993);
  });
});

describe('decide (the algorithm both backends run), for any policy and any sequence of requests', () => {
  // Small buckets and short gaps, so that most sequences run out of tokens (and some out of window).
  const policies = fc.record({
    perHour: fc.integer({ min: 1, max: 20_000 }),
    burst: fc.integer({ min: 1, max: 20 }),
  });
  /** Gaps between requests, all within the first 1,000 s of one clock hour. */
  const steps = fc.array(
    fc.record({
      gapMs: fc.oneof(fc.integer({ min: 0, max: 50 }), fc.integer({ min: 0, max: 5000 })),
      peek: fc.boolean(),
    }),
    { maxLength: 200 },
  );

  function run(policy: RateLimitPolicy, sequence: { gapMs: number; peek: boolean }[]) {
    let state: Parameters<typeof decide>[0];
    let nowMs = HOUR_START_MS;
    return sequence.map(({ gapMs, peek }) => {
      nowMs += gapMs;
      const { decision, next } = decide(state, policy, nowMs, peek ? 0 : 1);
      if (!peek) state = next;
      return { nowMs, peek, decision, state };
    });
  }

  it('never allows more than the bucket and the window hold, and reports what is left exactly', () => {
    fc.assert(
      fc.property(policies, steps, (policy, sequence) => {
        let allowed = 0;
        for (const { nowMs, peek, decision } of run(policy, sequence)) {
          if (!peek && decision.allowed) allowed += 1;
          const refilled = ((nowMs - HOUR_START_MS) / 1000) * (policy.perHour / 3600);
          expect(allowed).toBeLessThanOrEqual(Math.min(policy.perHour, policy.burst + refilled + 1e-6));
          expect(decision.remaining).toBe(policy.perHour - allowed);
          expect(decision.burstRemaining).toBeGreaterThanOrEqual(0);
          expect(decision.burstRemaining).toBeLessThanOrEqual(policy.burst);
        }
      }),
    );
  });

  it('a peek changes no later decision', () => {
    fc.assert(
      fc.property(policies, steps, (policy, sequence) => {
        const withPeeks = run(policy, sequence).filter((s) => !s.peek);
        // The same consumes at the same times, without the peeks in between.
        let carriedMs = 0;
        const consumesOnly = sequence.flatMap(({ gapMs, peek }) => {
          carriedMs += gapMs;
          if (peek) return [];
          const step = { gapMs: carriedMs, peek: false };
          carriedMs = 0;
          return [step];
        });
        expect(run(policy, consumesOnly).map((s) => s.decision)).toEqual(withPeeks.map((s) => s.decision));
      }),
    );
  });

  it('a refused request passes after retry_after seconds, whether the token or the window was short', () => {
    fc.assert(
      fc.property(policies, steps, (policy, sequence) => {
        for (const { nowMs, peek, decision, state } of run(policy, sequence)) {
          if (peek || decision.allowed) continue;
          const later = decide(state, policy, nowMs + decision.retryAfter * 1000, 1);
          expect(later.decision.allowed, JSON.stringify({ nowMs, decision })).toBe(true);
        }
      }),
    );
  });
});
