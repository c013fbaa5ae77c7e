import { describe, expect, it } from 'vitest';
import { ManualClock } from '../domain/clock.js';
import type { Principal } from '../principal.js';
import { MemoryRateCounters, type RateCounters } from './rate-counters.js';
import { ANONYMOUS_POLICY, RateLimitService } from './rate-limits.js';

function principalOf(accountId: string): Principal {
  return {
    accountId,
    keyId: `key_${accountId}`,
    permissions: ['*'],
    keyCreatedAt: new Date(0),
    keyExpiresAt: null,
    plan: 'free',
    accountStatus: 'active',
    rateLimit: { perHour: 1000, burst: 100 },
    account: {} as Principal['account'],
  };
}

const clock = new ManualClock(new Date('2026-01-01T00:00:00Z'));

async function withMemoryCounters(test: (counters: MemoryRateCounters) => Promise<void>): Promise<void> {
  const counters = new MemoryRateCounters();
  try {
    await test(counters);
  } finally {
    await counters.close();
  }
}

describe('RateLimitService', () => {
  it('spends an account’s own budget, whatever other accounts spend; a peek spends nothing', () =>
    withMemoryCounters(async (counters) => {
      const service = new RateLimitService(counters, clock);
      const first = principalOf('acct_first');
      expect(await service.decide(first, '127.0.0.1', 'consume')).toMatchObject({
        allowed: true,
        remaining: 999,
      });
      for (let n = 0; n < 100; n++) await service.decide(principalOf(`acct_${n}`), '127.0.0.1', 'consume');
      expect(await service.decide(first, '127.0.0.1', 'consume')).toMatchObject({
        allowed: true,
        remaining: 998,
      });
      expect(await service.decide(first, '127.0.0.1', 'peek')).toMatchObject({ remaining: 998 });
      expect(await service.peekForAccount(first)).toMatchObject({ remaining: 998 });
    }));

  it('spends the client IP’s Free budget for a caller without a principal, apart from any account', () =>
    withMemoryCounters(async (counters) => {
      const service = new RateLimitService(counters, clock);
      const first = await service.decide(null, '192.0.2.7', 'consume');
      expect(first).toMatchObject({
        allowed: true,
        limit: ANONYMOUS_POLICY.perHour,
        burst: ANONYMOUS_POLICY.burst,
      });
      // A peek route asked without a valid key still spends: only a known account may look for free.
      expect(await service.decide(null, '192.0.2.7', 'peek')).toMatchObject({
        remaining: ANONYMOUS_POLICY.perHour - 2,
      });
      expect(await service.decide(null, '192.0.2.8', 'consume')).toMatchObject({
        remaining: ANONYMOUS_POLICY.perHour - 1,
      });
    }));

  it('decides at once with in-process counters, exactly as it would later', () =>
    withMemoryCounters(async (counters) => {
      const service = new RateLimitService(counters, clock);
      const account = principalOf('acct_now');
      expect(service.decideNow(account, '127.0.0.1', 'consume')).toMatchObject({ remaining: 999 });
      expect(service.decideNow(account, '127.0.0.1', 'peek')).toEqual(await service.peekForAccount(account));
      expect(service.decideNow(null, '192.0.2.9', 'consume')).toEqual(
        await service.decide(null, '192.0.2.10', 'consume'),
      );
    }));

  it('has no answer at once from counters kept elsewhere', () => {
    const remote: RateCounters = {
      consume: async () => {
        throw new Error('not asked here');
      },
      peek: async () => {
        throw new Error('not asked here');
      },
      decideNow: () => undefined,
      close: async () => {},
    };
    const service = new RateLimitService(remote, clock);
    expect(service.decideNow(principalOf('acct_remote'), '127.0.0.1', 'consume')).toBeUndefined();
    expect(service.decideNow(null, '127.0.0.1', 'consume')).toBeUndefined();
  });
});
