/**
 * The collected instance samples as Prometheus gauges on the operator metrics port: one
 * `nimbus_instance_<metric>` family per metric of the catalogue, labelled by account, instance and
 * region, with the latest sample the collector took (services/metrics-collector.ts). Only the process
 * holding the collector's job has them; Prometheus scrapes every replica, so the series continue when
 * the job moves (the labels are the same).
 */
import { METRIC_NAMES, METRICS } from '../domain/metric-catalog.js';
import type { LatestSample } from '../services/metrics-collector.js';

/** Label values escaped as the exposition format requires. */
function label(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

export function instanceMetricsExposition(samples: readonly LatestSample[]): string {
  if (samples.length === 0) return '';
  const lines: string[] = [];
  for (const metric of METRIC_NAMES) {
    const name = `nimbus_instance_${metric}`;
    lines.push(`# HELP ${name} ${METRICS[metric].help} (${METRICS[metric].unit}), latest 10 s sample`);
    lines.push(`# TYPE ${name} gauge`);
    for (const { accountId, instanceId, region, sample } of samples) {
      const value = sample[metric];
      if (typeof value !== 'number') continue;
      lines.push(
        `${name}{account="${label(accountId)}",instance="${label(instanceId)}",region="${label(region)}"} ${value}`,
      );
    }
  }
  return `${lines.join('\n')}\n`;
}
