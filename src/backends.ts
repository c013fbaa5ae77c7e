/**
 * The backing components as the server and the admin CLI both need them: the store (migrated),
 * Redis when configured, the broadcaster, the rate counters and every service. Kept apart from
 * main.ts so that operator commands do not load the HTTP stack.
 */
import { mkdirSync, readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import type { ComputeDriver } from './drivers/driver.js';
import { QemuDriver, QemuDriverError } from './drivers/qemu/qemu.js';
import { SimulatedDriver } from './drivers/simulator/simulator.js';
import { type Config, ConfigError } from './platform/config.js';
import { type Clock, systemClock } from './platform/domain/clock.js';
import { type Broadcaster, LocalBroadcaster, RedisBroadcaster } from './platform/events/broadcast.js';
import { JobRunner } from './platform/jobs/runner.js';
import { checkMasterKey, resolveMasterKey } from './platform/master-key.js';
import {
  MemoryRateCounters,
  type RateCounters,
  RedisRateCounters,
} from './platform/rate-limits/rate-counters.js';
import { migrateToLatest, openStore, type Store } from './platform/store/db.js';
import { FileClock } from './platform/test-clock.js';
import { regionSettings } from './resources/instances/region-settings.js';
import { findInstance } from './resources/instances/store.js';
import { hostnames } from './resources/instances/view.js';
import { findSshKey } from './resources/ssh-keys/store.js';
import { anySealedVpnKey } from './resources/vpns/kind.js';
import { anySealedWebhookSecret } from './resources/webhooks/store.js';
import { createServices, type Services } from './services.js';

export interface Backends {
  store: Store;
  redis: Redis | null;
  broadcaster: Broadcaster;
  rateCounters: RateCounters;
  services: Services;
  jobs: JobRunner;
  driver: ComputeDriver;
  /** The qemu driver when NIMBUS_DRIVER=qemu: the server hands it the metadata app and starts its watcher. */
  qemu: QemuDriver | null;
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
  // Read before anything is opened, as the rest of the configuration is.
  const regions = regionSettings(config);
  const clock = options.clock ?? (config.testClockFile ? new FileClock(config.testClockFile) : systemClock);
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  // Before the store is opened: on PostgreSQL without a configured key, nothing is touched.
  const masterKey = resolveMasterKey(config);
  const store = openStore({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    commitDelayMs: config.testCommitDelayMs,
  });
  try {
    await migrateToLatest(store.db);
    await checkMasterKey(store.db, masterKey, [anySealedWebhookSecret, anySealedVpnKey]);
  } catch (error) {
    await store.close();
    throw error;
  }
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
  const qemu = config.driver === 'qemu' ? await openQemu(config, store, clock) : null;
  const driver =
    qemu ??
    (await SimulatedDriver.open({
      db: store.background,
      reads: store.committedReads,
      clock,
      speedup: config.simSpeedup,
    }));
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
      gpuCapacity: regions.gpuCapacity,
      publicIpPools: regions.publicIpPools,
    },
    secretBox: masterKey.box,
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
    testCrashAfterCommit: config.testCrashAfterCommit,
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
    qemu,
    close: async () => {
      await jobs.stop();
      await qemu?.close();
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

/**
 * The qemu driver, given what a guest's seed needs from the store: its hostname (the instance record's)
 * and the public keys of the instance's SSH keys.
 */
async function openQemu(config: Config, store: Store, clock: Clock): Promise<QemuDriver> {
  try {
    return await QemuDriver.open({
      db: store.db,
      clock,
      dataDir: config.dataDir,
      imageDir: config.qemu.imageDir,
      ssh: {
        host: config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host,
        ports: config.qemu.sshPorts,
      },
      memoryScale: config.qemu.memoryScale,
      accel: config.qemu.accel,
      identity: async (spec) => {
        const instance = await findInstance(store.db, spec.id);
        const keys = [];
        for (const keyId of instance?.ssh_key_ids ?? []) {
          const key = instance ? await findSshKey(store.db, instance.account_id, keyId) : undefined;
          if (key) keys.push(key.public_key);
        }
        return { hostname: hostnames(spec, config.publicDomain).hostname, sshKeys: keys };
      },
    });
  } catch (error) {
    if (error instanceof QemuDriverError) throw new ConfigError(error.message);
    throw error;
  }
}
