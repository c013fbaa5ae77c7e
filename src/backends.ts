/**
 * The backing components as the server and the admin CLI both need them: the store (migrated),
 * Redis when configured, the broadcaster, the rate counters and every service. Kept apart from
 * main.ts so that operator commands do not load the HTTP stack.
 */
import { mkdirSync } from 'node:fs';
import { Redis } from 'ioredis';
import type { Config } from './config.js';
import { type Clock, systemClock } from './domain/clock.js';
import { type Broadcaster, LocalBroadcaster, RedisBroadcaster } from './events/broadcast.js';
import { createServices, type Services } from './services/index.js';
import { migrateToLatest, openStore, type Store } from './store/db.js';
import { MemoryRateCounters, type RateCounters, RedisRateCounters } from './store/rate-counters.js';

export interface Backends {
  store: Store;
  redis: Redis | null;
  broadcaster: Broadcaster;
  rateCounters: RateCounters;
  services: Services;
  close(): Promise<void>;
}

/** Store, Redis and services, as the server and the admin CLI both need them. */
export async function openBackends(config: Config, clock: Clock = systemClock): Promise<Backends> {
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  const store = openStore({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  await migrateToLatest(store.db);
  const redis = config.redisUrl
    ? new Redis(config.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 2 })
    : null;
  if (redis) await redis.connect();
  const broadcaster = redis ? new RedisBroadcaster(redis) : new LocalBroadcaster();
  const rateCounters = redis ? new RedisRateCounters(redis) : new MemoryRateCounters();
  const services = createServices({
    store,
    clock,
    broadcaster,
    rateCounters,
    authCacheMs: config.authCacheMs,
  });
  return {
    store,
    redis,
    broadcaster,
    rateCounters,
    services,
    close: async () => {
      await services.apiKeys.stop();
      await rateCounters.close();
      await broadcaster.close();
      if (redis) await redis.quit();
      await store.close();
    },
  };
}
