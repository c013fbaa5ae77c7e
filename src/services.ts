/** Builds every service over one store; main.ts (the server) and the admin CLI both start here. */

import type { ComputeDriver } from './drivers/driver.js';
import type { Clock } from './platform/domain/clock.js';
import { CursorSigner } from './platform/domain/cursors.js';
import type { Broadcaster } from './platform/events/broadcast.js';
import { subscribeToEvents } from './platform/events/outbox.js';
import { IdempotencyService } from './platform/idempotency/idempotency.js';
import type { JobRunner } from './platform/jobs/runner.js';
import { Lifecycle } from './platform/lifecycle/lifecycle.js';
import type { StateTable } from './platform/lifecycle/state-table.js';
import { QuotaService } from './platform/quotas/quotas.js';
import type { RateCounters } from './platform/rate-limits/rate-counters.js';
import { RateLimitService } from './platform/rate-limits/rate-limits.js';
import type { SecretBox } from './platform/secret-box.js';
import type { Store } from './platform/store/db.js';
import { ApiKeyService } from './resources/account/api-key-service.js';
import { countApiKeys } from './resources/account/api-key-store.js';
import { AccountService } from './resources/account/service.js';
import { quotaSettings } from './resources/account/store.js';
import { AlertEvaluator } from './resources/alerts/evaluator.js';
import { IncidentWriter } from './resources/alerts/incidents.js';
import { AlertNotifier } from './resources/alerts/notifier.js';
import { AlertService } from './resources/alerts/service.js';
import { BILLING_METERING } from './resources/billing/meter-store.js';
import { BillingService } from './resources/billing/service.js';
import { EventService } from './resources/events/service.js';
import { INSTANCE_KIND } from './resources/instances/kind.js';
import { InstanceReconciler } from './resources/instances/reconciler.js';
import { InstanceService, type InstanceServiceOptions } from './resources/instances/service.js';
import { lockAccountInstance } from './resources/instances/store.js';
import { MetricsCollector } from './resources/metrics/collector.js';
import { MetricsService } from './resources/metrics/service.js';
import { StatusRelay } from './resources/metrics/status-relay.js';
import { MetricsStreams } from './resources/metrics/streams.js';
import { FirewallRuleService } from './resources/networking/firewall-service.js';
import { NetworkService } from './resources/networking/service.js';
import { SNAPSHOT_KIND, sourceTagsOf } from './resources/snapshots/kind.js';
import { SnapshotReconciler } from './resources/snapshots/reconciler.js';
import { SnapshotScheduler } from './resources/snapshots/scheduler.js';
import { SnapshotService } from './resources/snapshots/service.js';
import { SshKeyService } from './resources/ssh-keys/service.js';
import { BackupScheduleBook } from './resources/volumes/backup-schedule-book.js';
import { VOLUME_KIND } from './resources/volumes/kind.js';
import { VolumeReconciler } from './resources/volumes/reconciler.js';
import { VolumeService } from './resources/volumes/service.js';
import { findVolume } from './resources/volumes/store.js';
import { gatewaySpecOf, VPN_KIND } from './resources/vpns/kind.js';
import { VpnReconciler } from './resources/vpns/reconciler.js';
import { VpnService } from './resources/vpns/service.js';
import { WebhookDeliveryWorker } from './resources/webhooks/delivery-worker.js';
import { fanOutToWebhooks } from './resources/webhooks/fan-out.js';
import { WebhookSender } from './resources/webhooks/sender.js';
import { WebhookService } from './resources/webhooks/service.js';

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
  /** Tests only: die before saving a keyed request's answer (platform/idempotency/idempotency.ts). */
  testCrashAfterCommit?: boolean;
}

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
  subscribeToEvents(fanOutToWebhooks);
  const quotas = new QuotaService(deps.store, quotaSettings);
  quotas.register('api_keys', countApiKeys);
  const apiKeys = new ApiKeyService(deps.store, deps.clock, quotas, deps.broadcaster, deps.authCacheMs);
  const sshKeys = new SshKeyService(deps.store, deps.clock);
  // The core meters billed kinds through billing's meter store (the core knows no prices).
  const lifecycle = new Lifecycle(deps.store, deps.clock, deps.jobs, { quotas, metering: BILLING_METERING });
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
  new SnapshotScheduler(
    deps.store,
    deps.clock,
    deps.jobs,
    lifecycle,
    snapshots,
    deps.onScheduledSnapshotError,
  );
  const volumes = new VolumeService(
    deps.store,
    deps.clock,
    lifecycle,
    quotas,
    schedules,
    { lockForAttach: lockAccountInstance },
    faults,
  );
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
    stateTables: lifecycle.stateTables(),
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
