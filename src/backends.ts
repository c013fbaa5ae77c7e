/**
 * The backing components as the server and the admin CLI both need them: the store (migrated),
 * Redis when configured, the broadcaster, the rate counters and every service. Kept apart from
 * main.ts so that operator commands do not load the HTTP stack.
 */
import { mkdirSync, readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { type Config, ConfigError } from './config.js';
import { type Clock, systemClock } from './domain/clock.js';
import type { ComputeDriver } from './drivers/driver.js';
import { SimulatedDriver } from './drivers/simulator/simulator.js';
import { type Broadcaster, LocalBroadcaster, RedisBroadcaster } from './events/broadcast.js';
import { JobRunner } from './jobs/runner.js';
import { createServices, type Services } from './services/index.js';
import { SecretBox } from './services/secret-box.js';
import { migrateToLatest, openStore, type Store } from './store/db.js';
import { MemoryRateCounters, type RateCounters, RedisRateCounters } from './store/rate-counters.js';

export interface Backends {
  store: Store;
  redis: Redis | null;
  broadcaster: Broadcaster;
  rateCounters: RateCounters;
  services: Services;
  jobs: JobRunner;
  driver: ComputeDriver;
  close(): Promise<void>;
}

export interface BackendOptions {
  clock?: Clock;
  /** Tests holding a manual clock: jobs run only when `jobs.runDue()` is called. */
  steppedJobs?: boolean;
  onJobError?: (error: unknown, job: { kind: string; subject_id: string; attempts: number }) => void;
}

/** How a delivery worker failure is reported to onJobError, which speaks of jobs. */
const DELIVERY_JOB = { kind: 'webhook_delivery', subject_id: '', attempts: 0 };
/** How a failed metric sample or stream is reported to onJobError. */
const METRICS_JOB = { kind: 'metrics', subject_id: '', attempts: 0 };
/** How a skipped backup slot is reported to onJobError: the scheduler's job, naming the source. */
const scheduledSlot = (sourceId: string) => ({
  kind: 'snapshot-schedules:slot',
  subject_id: sourceId,
  attempts: 0,
});

/** Store, Redis and services, as the server and the admin CLI both need them. */
export async function openBackends(config: Config, options: BackendOptions = {}): Promise<Backends> {
  const clock = options.clock ?? systemClock;
  if (config.driver !== 'simulator') {
    throw new ConfigError(
      `Invalid configuration: NIMBUS_DRIVER=${config.driver} is not available in this build yet; use simulator`,
    );
  }
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  const store = openStore({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  await migrateToLatest(store.db);
  const redis = config.redisUrl
    ? new Redis(config.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 2 })
    : null;
  if (redis) await redis.connect();
  const broadcaster = redis ? new RedisBroadcaster(redis) : new LocalBroadcaster();
  const rateCounters = redis ? new RedisRateCounters(redis) : new MemoryRateCounters();
  const jobs = new JobRunner(store, clock, {
    automatic: options.steppedJobs !== true,
    ...(options.onJobError ? { onError: options.onJobError } : {}),
  });
  const driver = await SimulatedDriver.open({ db: store.db, clock, speedup: config.simSpeedup });
  const services = createServices({
    store,
    clock,
    broadcaster,
    rateCounters,
    authCacheMs: config.authCacheMs,
    driver,
    jobs,
    instances: {
      publicDomain: config.publicDomain,
      gpuCapacity: config.gpuCapacity,
      publicIpPools: config.publicIpPools,
    },
    secretBox: SecretBox.open(config.dataDir, config.masterKey),
    metrics: {
      intervalMs: config.metrics.intervalSeconds * 1000,
      maxStreamsPerAccount: config.metrics.maxStreamsPerAccount,
      statusPollMs: 1000,
      ...(options.onJobError
        ? { onError: (error: unknown) => options.onJobError?.(error, METRICS_JOB) }
        : {}),
    },
    invoiceDueDays: config.invoiceDueDays,
    alerts: config.alerts,
    webhooks: {
      allowPrivate: config.webhooks.allowPrivate,
      extraCa: config.webhooks.caFile ? readFileSync(config.webhooks.caFile, 'utf8') : null,
      retryBaseSeconds: config.webhooks.retryBaseSeconds,
      automatic: options.steppedJobs !== true,
      ...(options.onJobError
        ? { onError: (error: unknown) => options.onJobError?.(error, DELIVERY_JOB) }
        : {}),
    },
    ...(options.onJobError
      ? {
          onScheduledSnapshotError: (error, sourceId) => options.onJobError?.(error, scheduledSlot(sourceId)),
        }
      : {}),
  });
  return {
    store,
    redis,
    broadcaster,
    rateCounters,
    services,
    jobs,
    driver,
    close: async () => {
      await jobs.stop();
      await services.deliveries.stop();
      services.alertNotifier.close();
      await services.apiKeys.stop();
      await rateCounters.close();
      await broadcaster.close();
      if (redis) await redis.quit();
      await store.close();
    },
  };
}
