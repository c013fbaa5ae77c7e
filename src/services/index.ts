/** Builds every service over one store; main.ts (the server) and the admin CLI both start here. */
import type { Clock } from '../domain/clock.js';
import { CursorSigner } from '../domain/cursors.js';
import type { ComputeDriver } from '../drivers/driver.js';
import type { Broadcaster } from '../events/broadcast.js';
import { WebhookSender } from '../events/webhook-sender.js';
import type { JobRunner } from '../jobs/runner.js';
import type { Store } from '../store/db.js';
import type { RateCounters } from '../store/rate-counters.js';
import { findVolume } from '../store/volumes.js';
import { AccountService } from './accounts.js';
import { AlertEvaluator } from './alert-evaluator.js';
import { IncidentWriter } from './alert-incidents.js';
import { AlertNotifier } from './alert-notifier.js';
import { AlertService } from './alerts.js';
import { ApiKeyService } from './api-keys.js';
import { BackupScheduleBook } from './backup-schedules.js';
import { BillingService } from './billing.js';
import { EventService } from './events.js';
import { FirewallRuleService } from './firewall-rules.js';
import { IdempotencyService } from './idempotency.js';
import { INSTANCE_KIND } from './instance-kind.js';
import { InstanceReconciler } from './instance-reconciler.js';
import { InstanceService, type InstanceServiceOptions } from './instances.js';
import { Lifecycle } from './lifecycle.js';
import { MetricsService } from './metrics.js';
import { MetricsCollector } from './metrics-collector.js';
import { StatusRelay } from './metrics-status.js';
import { MetricsStreams } from './metrics-streams.js';
import { NetworkService } from './network.js';
import { QuotaService } from './quotas.js';
import { RateLimitService } from './rate-limits.js';
import type { SecretBox } from './secret-box.js';
import { SNAPSHOT_KIND, sourceTagsOf } from './snapshot-kind.js';
import { SnapshotReconciler } from './snapshot-reconciler.js';
import { SnapshotScheduler } from './snapshot-scheduler.js';
import { SnapshotService } from './snapshots.js';
import { SshKeyService } from './ssh-keys.js';
import { VOLUME_KIND } from './volume-kind.js';
import { VolumeReconciler } from './volume-reconciler.js';
import { VolumeService } from './volumes.js';
import { gatewaySpecOf, VPN_KIND } from './vpn-kind.js';
import { VpnReconciler } from './vpn-reconciler.js';
import { VpnService } from './vpns.js';
import { WebhookDeliveryWorker } from './webhook-delivery.js';
import { WebhookService } from './webhooks.js';

export interface ServiceDeps {
  store: Store;
  clock: Clock;
  broadcaster: Broadcaster;
  rateCounters: RateCounters;
  authCacheMs: number;
  driver: ComputeDriver;
  jobs: JobRunner;
  instances: Omit<InstanceServiceOptions, 'faultInjection' | 'schedules'>;
  secretBox: SecretBox;
  metrics: {
    intervalMs: number;
    maxStreamsPerAccount: number;
    /** How often the status relay reads new instance events for live streams. */
    statusPollMs: number;
    onError?: (error: unknown) => void;
  };
  /** Days from an invoice's issue to its due date (default 14). */
  invoiceDueDays?: number;
  webhooks: {
    allowPrivate: boolean;
    /** PEM of an extra CA trusted for receivers. */
    extraCa: string | null;
    retryBaseSeconds: number;
    /** false: deliveries are sent only by `runDue()` (tests with a manual clock). */
    automatic: boolean;
    onError?: (error: unknown) => void;
  };
  /** Told of a scheduled snapshot that could not be made (its slot is skipped); the server logs it. */
  onScheduledSnapshotError?: (error: unknown, sourceId: string) => void;
  /** Alert notifications (config.alerts); without it e-mail channels are refused and links point at localhost. */
  alerts?: { smtpUrl: string | null; smtpFrom: string; smtpCaFile: string | null; consoleUrl: string };
  /** Tests only: die before saving a keyed request's answer (services/idempotency.ts). */
  testCrashAfterCommit?: boolean;
}

export interface Services {
  accounts: AccountService;
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

export function createServices(deps: ServiceDeps): Services {
  const quotas = new QuotaService(deps.store);
  const apiKeys = new ApiKeyService(deps.store, deps.clock, quotas, deps.broadcaster, deps.authCacheMs);
  const sshKeys = new SshKeyService(deps.store, deps.clock);
  const lifecycle = new Lifecycle(deps.store, deps.clock, deps.jobs);
  lifecycle.register(
    INSTANCE_KIND,
    new InstanceReconciler(
      deps.driver,
      // A job step: what is committed is enough (the restore begins in the instance's own create).
      async (instance) =>
        (await findVolume(deps.store.committedReads, instance.root_volume_id))?.status === 'restoring',
    ),
  );
  const faults = deps.driver.faultInjection;
  const schedules = new BackupScheduleBook(deps.clock, deps.jobs);
  const snapshots = new SnapshotService(deps.store, deps.clock, lifecycle, quotas, faults);
  lifecycle.register(
    VOLUME_KIND,
    new VolumeReconciler(deps.driver, deps.clock, (volume) => snapshots.reportRestored(volume)),
  );
  lifecycle.register(
    SNAPSHOT_KIND,
    new SnapshotReconciler(deps.driver, deps.clock, (snapshot) =>
      sourceTagsOf(deps.store.background, snapshot),
    ),
  );
  new SnapshotScheduler(deps.store, deps.clock, deps.jobs, snapshots, deps.onScheduledSnapshotError);
  const volumes = new VolumeService(deps.store, deps.clock, lifecycle, quotas, schedules, faults);
  const instances = new InstanceService(deps.store, deps.clock, lifecycle, quotas, sshKeys, volumes, {
    ...deps.instances,
    faultInjection: faults,
    schedules,
    ...(deps.driver.sshEndpoint
      ? { sshEndpoints: (id: string) => deps.driver.sshEndpoint?.(id) ?? null }
      : {}),
    ...(deps.driver.availableImages ? { availableImages: () => deps.driver.availableImages?.() ?? [] } : {}),
  });
  snapshots.restoresInstancesWith(instances);
  const firewallRules = new FirewallRuleService(deps.store, deps.clock, quotas);
  lifecycle.register(
    VPN_KIND,
    new VpnReconciler(deps.driver, (vpn) => gatewaySpecOf(deps.store.background, deps.secretBox, vpn)),
  );
  const vpns = new VpnService(
    deps.store,
    deps.clock,
    lifecycle,
    quotas,
    deps.secretBox,
    deps.instances.publicIpPools,
  );
  const deliveries = new WebhookDeliveryWorker(
    deps.store,
    deps.clock,
    new WebhookSender({ allowPrivate: deps.webhooks.allowPrivate, extraCa: deps.webhooks.extraCa }),
    (sealed, webhookId) => deps.secretBox.open(sealed, webhookId),
    {
      automatic: deps.webhooks.automatic,
      retryBaseSeconds: deps.webhooks.retryBaseSeconds,
      ...(deps.webhooks.onError ? { onError: deps.webhooks.onError } : {}),
    },
  );
  const webhooks = new WebhookService(deps.store, deps.clock, quotas, deps.secretBox, deliveries, {
    allowPrivate: deps.webhooks.allowPrivate,
  });
  const metricsErrors = deps.metrics.onError ?? (() => {});
  const alertSettings = deps.alerts ?? {
    smtpUrl: null,
    smtpFrom: 'Nimbus <alerts@localhost>',
    smtpCaFile: null,
    consoleUrl: 'https://127.0.0.1:8443/console',
  };
  const incidents = new IncidentWriter(
    deps.store,
    deps.clock,
    deps.jobs,
    { jobs: () => deps.jobs.wake(), deliveries: () => deliveries.wake() },
    alertSettings.consoleUrl,
  );
  const alertNotifier = new AlertNotifier(
    deps.store,
    deps.clock,
    deps.jobs,
    new WebhookSender({ allowPrivate: deps.webhooks.allowPrivate, extraCa: deps.webhooks.extraCa }),
    {
      retryBaseSeconds: deps.webhooks.retryBaseSeconds,
      mail: { url: alertSettings.smtpUrl, from: alertSettings.smtpFrom, caFile: alertSettings.smtpCaFile },
    },
  );
  const alertEvaluator = new AlertEvaluator(deps.store, incidents, { intervalMs: deps.metrics.intervalMs });
  const metricsCollector = new MetricsCollector(deps.store, deps.clock, deps.jobs, deps.driver, {
    intervalMs: deps.metrics.intervalMs,
    onError: metricsErrors,
    afterCollection: async (at, samples) => {
      await alertEvaluator.evaluate(at, samples);
    },
  });
  const statusRelay = new StatusRelay(
    deps.store,
    deps.clock,
    deps.broadcaster,
    deps.jobs,
    deps.metrics.statusPollMs,
  );
  const rateLimits = new RateLimitService(deps.rateCounters, deps.clock);
  const metricStreams = new MetricsStreams(
    deps.store,
    deps.clock,
    deps.driver,
    apiKeys,
    rateLimits,
    deps.broadcaster,
    { maxStreamsPerAccount: deps.metrics.maxStreamsPerAccount },
    metricsErrors,
  );
  return {
    cursors: new CursorSigner(deps.secretBox.deriveKey('list-cursors')),
    accounts: new AccountService(deps.store, deps.clock, apiKeys),
    apiKeys,
    quotas,
    rateLimits,
    idempotency: new IdempotencyService(deps.store, deps.clock, {
      crashBeforeSavingAnswer: deps.testCrashAfterCommit === true,
    }),
    sshKeys,
    events: new EventService(deps.store),
    instances,
    volumes,
    firewallRules,
    network: new NetworkService(deps.store, instances, firewallRules),
    snapshots,
    vpns,
    webhooks,
    deliveries,
    metrics: new MetricsService(deps.store, deps.clock),
    metricsCollector,
    statusRelay,
    metricStreams,
    billing: new BillingService(deps.store, deps.clock, deps.jobs, apiKeys, {
      dueDays: deps.invoiceDueDays ?? 14,
    }),
    alerts: new AlertService(deps.store, deps.clock, quotas, incidents, alertNotifier, deliveries, {
      allowPrivate: deps.webhooks.allowPrivate,
      consoleUrl: alertSettings.consoleUrl,
    }),
    alertEvaluator,
    alertNotifier,
  };
}
