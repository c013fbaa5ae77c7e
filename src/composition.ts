/**
 * The composition root: the one place where Nimbus is put together, to be read from top to bottom.
 *
 * `openBackends` opens what the services run on, in order: the settings read from the configuration, the
 * store (migrated, its master key checked), Redis when configured, the job runner and the compute driver
 * NIMBUS_DRIVER names. `compose` then builds every service once, in the order they need each other, and
 * does every registration in view: the lifecycle kinds and their reconcilers, then the module of each
 * resource of the one list (src/resources.ts, which also gives the migrations and the event catalogue):
 * its quota counters, jobs and outbox subscriber, and its routes, which the HTTP app serves
 * (platform/module.ts). No constructor registers anything itself.
 *
 * The server (main.ts) and the admin CLI both start here. The modules' route definitions are loaded, but
 * not Fastify nor the server's plugins: buildApp (main.ts) serves them, so operator commands never pay for it.
 * The server also runs each module's start-up hooks and serves what this root hands it by role (the
 * guests' metadata service, the workers), so it names no resource.
 */
import { mkdirSync, readFileSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { ComputeDriver, GuestHost } from './drivers/driver.js';
import { type PublicLink, publicGateways } from './drivers/ovn/uplink.js';
import { queueVpcReconcile, VPC_JOB } from './drivers/ovn/vpcs.js';
import { QemuDriver } from './drivers/qemu/qemu.js';
import { SimulatedDriver } from './drivers/simulator/simulator.js';
import type { Config, PublicUplinkConfig } from './platform/config.js';
import { type Clock, systemClock } from './platform/domain/clock.js';
import { CursorSigner } from './platform/domain/cursors.js';
import type { QuotaName } from './platform/domain/plans.js';
import { type Broadcaster, LocalBroadcaster, RedisBroadcaster } from './platform/events/broadcast.js';
import { subscribeToEvents } from './platform/events/outbox.js';
import { IdempotencyService } from './platform/idempotency/idempotency.js';
import { JobRunner } from './platform/jobs/runner.js';
import { Lifecycle } from './platform/lifecycle/lifecycle.js';
import type { StateTable } from './platform/lifecycle/state-table.js';
import { checkMasterKey, resolveMasterKey } from './platform/master-key.js';
import { modulesOf, type ResourceModule } from './platform/module.js';
import { QuotaService } from './platform/quotas/quotas.js';
import {
  MemoryRateCounters,
  type RateCounters,
  RedisRateCounters,
} from './platform/rate-limits/rate-counters.js';
import { RateLimitService } from './platform/rate-limits/rate-limits.js';
import type { SecretBox } from './platform/secret-box.js';
import { migrateToLatest, openStore, type Store } from './platform/store/db.js';
import { FileClock } from './platform/test-clock.js';
import { ApiKeyService } from './resources/account/api-key-service.js';
import { AccountService } from './resources/account/service.js';
import { quotaSettings } from './resources/account/store.js';
import {
  holdGatewayAddress,
  holdRouterAddress,
  releaseRouterAddress,
  routerAddresses,
} from './resources/addresses/address-holds.js';
import { parseCidr } from './resources/addresses/addresses.js';
import { AlertEvaluator } from './resources/alerts/evaluator.js';
import { IncidentWriter } from './resources/alerts/incidents.js';
import { AlertNotifier } from './resources/alerts/notifier.js';
import { AlertService } from './resources/alerts/service.js';
import { BILLING_METERING } from './resources/billing/meter-store.js';
import { BillingService } from './resources/billing/service.js';
import { TRANSFER_JOB, TransferCollector } from './resources/billing/transfer-collector.js';
import { EventService } from './resources/events/service.js';
import { INSTANCE_KIND } from './resources/instances/kind.js';
import { InstanceReconciler } from './resources/instances/reconciler.js';
import { type RegionSettings, regionSettings } from './resources/instances/region-settings.js';
import { InstanceService } from './resources/instances/service.js';
import {
  findInstance,
  lockAccountInstance,
  networkInstanceAt,
  networkInstances,
  setInstancePublicIp,
} from './resources/instances/store.js';
import { hostnames } from './resources/instances/view.js';
import { MetricsCollector } from './resources/metrics/collector.js';
import { MetricsService } from './resources/metrics/service.js';
import { StatusRelay } from './resources/metrics/status-relay.js';
import { MetricsStreams } from './resources/metrics/streams.js';
import { FirewallRuleService } from './resources/networking/firewall-service.js';
import { firewallRulesInRegion } from './resources/networking/firewall-store.js';
import { NetworkService } from './resources/networking/service.js';
import { PublicIpService } from './resources/public-ips/service.js';
import { SNAPSHOT_KIND, sourceTagsOf } from './resources/snapshots/kind.js';
import { SnapshotReconciler } from './resources/snapshots/reconciler.js';
import { SnapshotScheduler } from './resources/snapshots/scheduler.js';
import { SnapshotService } from './resources/snapshots/service.js';
import { SshKeyService } from './resources/ssh-keys/service.js';
import { findSshKey } from './resources/ssh-keys/store.js';
import { BackupScheduleBook } from './resources/volumes/backup-schedule-book.js';
import { VOLUME_KIND } from './resources/volumes/kind.js';
import { VolumeReconciler } from './resources/volumes/reconciler.js';
import { VolumeService } from './resources/volumes/service.js';
import { findVolume } from './resources/volumes/store.js';
import { anySealedVpnKey, gatewaySpecOf, VPN_KIND } from './resources/vpns/kind.js';
import { VpnReconciler } from './resources/vpns/reconciler.js';
import { VpnService } from './resources/vpns/service.js';
import { WebhookDeliveryWorker } from './resources/webhooks/delivery-worker.js';
import { WebhookSender } from './resources/webhooks/sender.js';
import { WebhookService } from './resources/webhooks/service.js';
import { anySealedWebhookSecret } from './resources/webhooks/store.js';
import { EVENT_CATALOGUE, MIGRATIONS, RESOURCES } from './resources.js';

export interface Services {
  accounts: AccountService;
  /** The state table of every kind the lifecycle runs, published in the OpenAPI document. */
  stateTables: readonly StateTable<string, string>[];
  /** Seals and opens the /v2 list cursors, with a key derived from the master key (same on every replica). */
  cursors: CursorSigner;
  apiKeys: ApiKeyService;
  quotas: QuotaService;
  rateLimits: RateLimitService;
  idempotency: IdempotencyService;
  sshKeys: SshKeyService;
  events: EventService;
  instances: InstanceService;
  volumes: VolumeService;
  firewallRules: FirewallRuleService;
  network: NetworkService;
  snapshots: SnapshotService;
  vpns: VpnService;
  publicIps: PublicIpService;
  webhooks: WebhookService;
  deliveries: WebhookDeliveryWorker;
  metrics: MetricsService;
  metricsCollector: MetricsCollector;
  statusRelay: StatusRelay;
  metricStreams: MetricsStreams;
  billing: BillingService;
  alerts: AlertService;
  alertEvaluator: AlertEvaluator;
  alertNotifier: AlertNotifier;
}

export interface Backends {
  store: Store;
  redis: Redis | null;
  broadcaster: Broadcaster;
  rateCounters: RateCounters;
  services: Services;
  /** The resources' modules, in the order the API serves their routes. */
  modules: readonly ResourceModule[];
  jobs: JobRunner;
  driver: ComputeDriver;
  /** What a driver that serves its guests itself asks of the control plane (ComputeDriver.serve). */
  guests: Pick<GuestHost, 'allowsInbound' | 'machineChanged'>;
  /**
   * The guests' metadata service (resources/instances/metadata-server.ts), a plain-HTTP app of its own,
   * and the address its port may be bound to.
   */
  metadataService(
    logger: Logger,
  ): Promise<{ app: FastifyInstance; host: string; guest: GuestHost['metadata'] }>;
  /** The server's last start step: the job runner and the webhook delivery worker (the admin CLI runs neither). */
  startWorkers(): void;
  close(): Promise<void>;
}

export interface BackendOptions {
  clock?: Clock;
  /** Tests holding a manual clock: jobs run only when `jobs.runDue()` is called. */
  steppedJobs?: boolean;
  onJobError?: (error: unknown, job: { kind: string; subject_id: string; attempts: number }) => void;
}

/** What the services run on, as openBackends opened it. */
interface Infrastructure {
  store: Store;
  clock: Clock;
  broadcaster: Broadcaster;
  rateCounters: RateCounters;
  jobs: JobRunner;
  driver: ComputeDriver;
  secretBox: SecretBox;
}

/** How a delivery worker failure is reported to onJobError, which speaks of jobs. */
const DELIVERY_JOB = { kind: 'webhook_delivery', subject_id: '', attempts: 0 };
/** How a failed metric sample or stream is reported to onJobError. */
const METRICS_JOB = { kind: 'metrics', subject_id: '', attempts: 0 };
const TRANSFER_JOB_REPORT = { kind: TRANSFER_JOB.kind, subject_id: TRANSFER_JOB.subject, attempts: 0 };
/** How a skipped backup slot is reported to onJobError: the scheduler's job, naming the source. */
const scheduledSlot = (sourceId: string) => ({
  kind: 'snapshot-schedules:slot',
  subject_id: sourceId,
  attempts: 0,
});

/** Where the resources keep secrets sealed with the master key: one of each is opened to check the key. */
const SEALED_SECRETS = [anySealedWebhookSecret, anySealedVpnKey];

/** Store, Redis, driver and services, as the server and the admin CLI both need them. */
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
    await migrateToLatest(store.db, MIGRATIONS);
    await checkMasterKey(store.db, masterKey, SEALED_SECRETS);
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
  const driver = await openDriver(config, store, clock, regions.publicIpPools);
  const infrastructure = { store, clock, broadcaster, rateCounters, jobs, driver, secretBox: masterKey.box };
  const { services, modules } = compose(config, regions, options, infrastructure);
  return {
    store,
    redis,
    broadcaster,
    rateCounters,
    services,
    modules,
    jobs,
    driver,
    guests: guestsOf(store, jobs, services.network),
    metadataService: async (logger) => {
      // Loaded only here: it is a Fastify app, which operator commands never pay for.
      const { buildMetadataApp, metadataHost, serveGuestRequest } = await import(
        './resources/instances/metadata-server.js'
      );
      const app = await buildMetadataApp(services.instances, logger);
      return {
        app,
        host: metadataHost(config.host),
        guest: (instanceId, request, response) => serveGuestRequest(app, instanceId, request, response),
      };
    },
    startWorkers: () => {
      jobs.start();
      services.deliveries.start();
    },
    close: async () => {
      await jobs.stop();
      await driver.close?.();
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

/** Every service, built once in the order they need each other; then every registration, in view. */
function compose(
  config: Config,
  regions: RegionSettings,
  options: BackendOptions,
  { store, clock, broadcaster, rateCounters, jobs, driver, secretBox }: Infrastructure,
): { services: Services; modules: ResourceModule[] } {
  const report = options.onJobError;
  const automatic = options.steppedJobs !== true;
  const faults = driver.faultInjection;

  // The platform's own services.
  const quotas = new QuotaService(store, quotaSettings);
  const rateLimits = new RateLimitService(rateCounters, clock);
  const idempotency = new IdempotencyService(store, clock, {
    crashBeforeSavingAnswer: config.testCrashAfterCommit,
  });
  const cursors = new CursorSigner(secretBox.deriveKey('list-cursors'));
  // The core meters billed kinds through billing's meter store (the core knows no prices).
  const lifecycle = new Lifecycle(store, clock, jobs, { quotas, metering: BILLING_METERING });

  // The account and its keys.
  const apiKeys = new ApiKeyService(store, clock, quotas, broadcaster, config.authCacheMs);
  const accounts = new AccountService(store, clock, apiKeys);
  const sshKeys = new SshKeyService(store, clock);

  // Compute and storage: instances are made with their root volume, and a snapshot restores into a new instance.
  const schedules = new BackupScheduleBook(clock, jobs);
  const volumes = new VolumeService(
    store,
    clock,
    lifecycle,
    quotas,
    schedules,
    { lockForAttach: lockAccountInstance },
    faults,
  );
  const instances = new InstanceService(store, clock, lifecycle, quotas, sshKeys, volumes, {
    publicDomain: config.publicDomain,
    gpuCapacity: regions.gpuCapacity,
    publicIpPools: regions.publicIpPools,
    faultInjection: faults,
    schedules,
    ...(driver.sshEndpoint ? { sshEndpoints: (id: string) => driver.sshEndpoint?.(id) ?? null } : {}),
    ...(driver.availableImages ? { availableImages: () => driver.availableImages?.() ?? [] } : {}),
  });
  const snapshots = new SnapshotService(store, clock, lifecycle, quotas, faults, (principal, input, made) =>
    instances.create(principal, input, made),
  );
  const scheduler = new SnapshotScheduler(store, clock, jobs, lifecycle, snapshots, (error, sourceId) =>
    report?.(error, scheduledSlot(sourceId)),
  );

  // Networking: the firewall's verdicts, and VPN endpoints from the instances' public pools.
  const firewallRules = new FirewallRuleService(store, clock, quotas);
  const network = new NetworkService(store, instances, firewallRules);
  const vpns = new VpnService(store, clock, lifecycle, secretBox, regions.publicIpPools);
  const publicIps = new PublicIpService(
    store,
    clock,
    quotas,
    { lockForAddress: lockAccountInstance, setPublicIp: setInstancePublicIp },
    regions.publicIpPools,
  );

  // Events and the webhooks they are delivered to.
  const events = new EventService(store, EVENT_CATALOGUE);
  const webhookReceivers = {
    allowPrivate: config.webhooks.allowPrivate,
    extraCa: config.webhooks.caFile ? readFileSync(config.webhooks.caFile, 'utf8') : null,
  };
  const deliveries = new WebhookDeliveryWorker(
    store,
    clock,
    new WebhookSender(webhookReceivers),
    (sealed, webhookId) => secretBox.open(sealed, webhookId),
    {
      automatic,
      retryBaseSeconds: config.webhooks.retryBaseSeconds,
      ...(report ? { onError: (error: unknown) => report(error, DELIVERY_JOB) } : {}),
    },
  );
  const webhooks = new WebhookService(store, clock, quotas, secretBox, deliveries, {
    allowPrivate: config.webhooks.allowPrivate,
    catalogue: EVENT_CATALOGUE,
  });

  // Monitoring: samples collected, alert policies evaluated on them, notifications sent.
  const metricsErrors = report ? (error: unknown) => report(error, METRICS_JOB) : () => {};
  const intervalMs = config.metrics.intervalSeconds * 1000;
  const incidents = new IncidentWriter(
    store,
    clock,
    jobs,
    { jobs: () => jobs.wake(), deliveries: () => deliveries.wake() },
    config.alerts.consoleUrl,
  );
  const alertNotifier = new AlertNotifier(store, clock, new WebhookSender(webhookReceivers), {
    retryBaseSeconds: config.webhooks.retryBaseSeconds,
    mail: { url: config.alerts.smtpUrl, from: config.alerts.smtpFrom, caFile: config.alerts.smtpCaFile },
  });
  const alertEvaluator = new AlertEvaluator(store, incidents, { intervalMs });
  const alerts = new AlertService(store, clock, quotas, incidents, alertNotifier, deliveries, {
    allowPrivate: config.webhooks.allowPrivate,
    consoleUrl: config.alerts.consoleUrl,
  });
  const metrics = new MetricsService(store, clock);
  const metricsCollector = new MetricsCollector(store, clock, jobs, driver, {
    intervalMs,
    onError: metricsErrors,
    afterCollection: async (at, samples) => {
      await alertEvaluator.evaluate(at, samples);
    },
  });
  // How often the status relay reads new instance events for live streams.
  const statusRelay = new StatusRelay(store, clock, broadcaster, jobs, 1000);
  const metricStreams = new MetricsStreams(
    store,
    clock,
    driver,
    apiKeys,
    rateLimits,
    broadcaster,
    { maxStreamsPerAccount: config.metrics.maxStreamsPerAccount },
    metricsErrors,
  );

  const billing = new BillingService(store, clock, jobs, apiKeys, { dueDays: config.invoiceDueDays });
  const transfer = new TransferCollector(store, clock, jobs, driver, {
    intervalMs,
    ...(report ? { onError: (error: unknown) => report(error, TRANSFER_JOB_REPORT) } : {}),
  });

  // The stateful kinds: the lifecycle core runs each one's reconciler as its job.
  lifecycle.register(
    INSTANCE_KIND,
    new InstanceReconciler(
      driver,
      // A job step: what is committed is enough (the restore begins in the instance's own create).
      async (instance) =>
        (await findVolume(store.committedReads, instance.root_volume_id))?.status === 'restoring',
    ),
  );
  lifecycle.register(
    VOLUME_KIND,
    new VolumeReconciler(driver, clock, (volume) => snapshots.reportRestored(volume)),
  );
  lifecycle.register(
    SNAPSHOT_KIND,
    new SnapshotReconciler(driver, clock, (snapshot) => sourceTagsOf(store.background, snapshot)),
  );
  lifecycle.register(
    VPN_KIND,
    new VpnReconciler(driver, (vpn) => gatewaySpecOf(store.background, secretBox, vpn)),
  );

  // Each resource of the one list (src/resources.ts) given what its module needs, by name; the modules
  // come out in the list's order, the order the API serves their routes. Their parts are registered here.
  const modules = modulesOf(RESOURCES, {
    account: { store, accounts, apiKeys, quotas, rateLimits },
    catalog: {},
    instances: { instances },
    networking: { network, firewallRules },
    volumes: { volumes },
    vpns: { vpns },
    'public-ips': { publicIps },
    snapshots: { snapshots, scheduler },
    'ssh-keys': { sshKeys },
    events: { events },
    webhooks: { webhooks, catalogue: EVENT_CATALOGUE },
    metrics: { metrics, metricStreams, instances, collector: metricsCollector, statusRelay },
    billing: { billing, transfer },
    alerts: { alerts, notifier: alertNotifier },
    // NIMBUS_DNS_PORT: the platform's names, answered from the instances table (docs/api.md, "DNS"); 0: none.
    dns: {
      db: store.committedReads,
      port: config.dnsPort,
      host: config.host,
      domain: config.publicDomain,
      publicIpPools: regions.publicIpPools,
    },
  });
  for (const module of modules) {
    for (const [name, counter] of Object.entries(module.quotas ?? {})) {
      quotas.register(name as QuotaName, counter);
    }
    for (const [kind, handler] of Object.entries(module.jobs ?? {})) jobs.register(kind, handler);
    if (module.onEventRecorded) subscribeToEvents(module.onEventRecorded);
  }
  // A driver with a network per account (qemu with NIMBUS_NETWORK=ovn: its VPCs, drivers/ovn/vpcs.ts):
  // a change of an account's instances reconciles it.
  const networkReconcile = driver.networkReconcile ?? null;
  if (networkReconcile) {
    jobs.register(VPC_JOB, networkReconcile);
    subscribeToEvents(queueVpcReconcile(jobs));
  }

  return {
    services: {
      accounts,
      stateTables: lifecycle.stateTables(),
      cursors,
      apiKeys,
      quotas,
      rateLimits,
      idempotency,
      sshKeys,
      events,
      instances,
      volumes,
      firewallRules,
      network,
      snapshots,
      vpns,
      publicIps,
      webhooks,
      deliveries,
      metrics,
      metricsCollector,
      statusRelay,
      metricStreams,
      billing,
      alerts,
      alertEvaluator,
      alertNotifier,
    },
    modules,
  };
}

/**
 * The driver NIMBUS_DRIVER names: the simulator, or QEMU, given what a guest's seed needs from the store
 * (the instance's hostname and the public keys of its SSH keys).
 */
async function openDriver(
  config: Config,
  store: Store,
  clock: Clock,
  publicIpPools: Record<string, string>,
): Promise<ComputeDriver> {
  if (config.driver !== 'qemu') {
    return SimulatedDriver.open({
      db: store.background,
      reads: store.committedReads,
      clock,
      speedup: config.simSpeedup,
    });
  }
  return QemuDriver.open({
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
    network: config.network,
    ...(config.network.mode === 'ovn' && config.network.uplink
      ? { publicLink: publicLinkOf(config.network.uplink, publicIpPools, store, clock) }
      : {}),
    vpcInstances: {
      list: (accountId) => networkInstances(store.db, accountId),
      find: async (id) => (await findInstance(store.db, id)) ?? null,
      firewallRules: (accountId, region) => firewallRulesInRegion(store.db, accountId, region),
      atAddress: (accountId, region, privateIp) => networkInstanceAt(store.db, accountId, region, privateIp),
    },
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
}

/**
 * NIMBUS_PUBLIC_UPLINK's link: every region's pool on it, each with its upstream router, and the VPCs'
 * router addresses held in the addresses resource so no instance or VPN gateway is ever given one.
 */
function publicLinkOf(
  uplink: PublicUplinkConfig,
  pools: Record<string, string>,
  store: Store,
  clock: Clock,
): PublicLink {
  const block = (region: string) => {
    const pool = pools[region];
    if (pool === undefined) throw new Error(`no public pool for ${region}`);
    return parseCidr(pool);
  };
  const now = () => clock.now().toISOString();
  return {
    uplink: uplink.interface,
    pools,
    gateways: publicGateways(pools, uplink.gateway),
    routers: {
      hold: (accountId, region) => holdRouterAddress(store.db, accountId, region, block(region), now()),
      release: (accountId, region) => releaseRouterAddress(store.db, accountId, region),
      held: (accountId) => routerAddresses(store.db, accountId),
      holdGateway: (region, ip) => holdGatewayAddress(store.db, region, ip, block(region), now()),
    },
  };
}

/**
 * What a driver serving its guests itself asks of the control plane: an SSH connection is let through only
 * when the instance's firewall allows it from the client's address, and an instance whose machine changed
 * by itself is looked at again by its reconciler.
 */
function guestsOf(store: Store, jobs: JobRunner, network: NetworkService): Backends['guests'] {
  return {
    allowsInbound: async (instanceId, port, address) => {
      const instance = await findInstance(store.db, instanceId);
      if (!instance) return false;
      const check = await network.check(instance.account_id, instanceId, {
        direction: 'inbound',
        protocol: 'tcp',
        port,
        address,
      });
      return check.verdict === 'allow';
    },
    machineChanged: async (instanceId) => {
      await store.db.transaction().execute((trx) => jobs.enqueue(trx, INSTANCE_KIND.table.kind, instanceId));
      jobs.wake();
    },
  };
}
