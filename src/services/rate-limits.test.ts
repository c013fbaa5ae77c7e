import { describe, expect, it } from 'vitest';
import { ManualClock } from '../domain/clock.js';
import { MemoryRateCounters } from '../store/rate-counters.js';
import type { Principal } from './principal.js';
import { RateLimitService } from './rate-limits.js';

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

describe('RateLimitService', () => {
  it('keeps an account’s budget when its memoised counter key is dropped with 10,000 others', async () => {
    const clock = new ManualClock(new Date('2026-01-01T00:00:00Z'));
    const counters = new MemoryRateCounters();
    try {
      const service = new RateLimitService(counters, clock);
      const first = principalOf('acct_first');
      expect(await service.decide(first, '127.0.0.1', 'consume')).toMatchObject({
        allowed: true,
        remaining: 999,
      });
      for (let n = 0; n < 10_000; n++) await service.decide(principalOf(`acct_${n}`), '127.0.0.1', 'consume');
      expect(await service.decide(first, '127.0.0.1', 'consume')).toMatchObject({
        allowed: true,
        remaining: 998,
      });
      expect(await service.peekForAccount(first)).toMatchObject({ remaining: 998 });
    } finally {
      await counters.close();
    }
  });
});
