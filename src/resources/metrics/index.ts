/** Monitoring as the platform serves it: metric history, live streams, and the jobs that collect and relay. */
import { defineResource, type ModuleParts } from '../../platform/module.js';
import type { InstanceService } from '../instances/service.js';
import { COLLECT_JOB, type MetricsCollector } from './collector.js';
import { METRIC_MIGRATIONS } from './migrations/index.js';
import { instanceMetricsExposition } from './operator-gauges.js';
import { metricRoutes, STREAM_MAX_PAYLOAD } from './routes.js';
import type { MetricsService } from './service.js';
import { STATUS_RELAY_JOB, type StatusRelay } from './status-relay.js';
import type { MetricsStreams } from './streams.js';

export function metricsModule(deps: {
  metrics: MetricsService;
  metricStreams: MetricsStreams;
  instances: InstanceService;
  collector: MetricsCollector;
  statusRelay: StatusRelay;
}): ModuleParts {
  return {
    routes: async (app) => {
      await app.register(metricRoutes, deps);
    },
    maxWebSocketPayload: STREAM_MAX_PAYLOAD,
    jobs: { [COLLECT_JOB.kind]: deps.collector, [STATUS_RELAY_JOB.kind]: deps.statusRelay },
    // Collection and the status relay are jobs (once across replicas); streams are per process.
    start: async () => {
      await deps.collector.start();
      await deps.statusRelay.start();
      await deps.metricStreams.start();
    },
    stop: async () => deps.metricStreams.stop(),
    operatorMetrics: () => instanceMetricsExposition(deps.collector.latestSamples()),
  };
}

/** The resource as src/resources.ts lists it. */
export const METRICS_RESOURCE = defineResource({
  name: 'metrics',
  migrations: METRIC_MIGRATIONS,
  module: metricsModule,
});
