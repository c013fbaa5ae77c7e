/**
 * The collected instance samples as Prometheus gauges on the operator metrics port, aggregated per
 * region: how many instances have a fresh sample, and per metric of the catalogue the sum and the
 * largest of their latest samples (resources/metrics/collector.ts). No series names an account or an
 * instance: the port needs no API key, and tenants' ids are not the operator's dashboards' business
 * (issue 29, item 6) — a tenant's own instance has its history behind its key (GET
 * /v1/instances/{id}/metrics). Only the process holding the collector's job has them; Prometheus
 * scrapes every replica, so the series continue when the job moves (the labels are the same).
 */
import { METRIC_NAMES, METRICS, type MetricName } from './catalog.js';
import type { LatestSample } from './collector.js';

/** Label values escaped as the exposition format requires. */
function label(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

interface RegionFigures {
  sampled: number;
  perMetric: Map<MetricName, { count: number; sum: number; max: number }>;
}

export function instanceMetricsExposition(samples: readonly LatestSample[]): string {
  if (samples.length === 0) return '';
  const regions = new Map<string, RegionFigures>();
  for (const { region, sample } of samples) {
    let figures = regions.get(region);
    if (figures === undefined) {
      figures = { sampled: 0, perMetric: new Map() };
      regions.set(region, figures);
    }
    figures.sampled += 1;
    for (const metric of METRIC_NAMES) {
      const value = sample[metric];
      if (typeof value !== 'number') continue;
      const seen = figures.perMetric.get(metric);
      if (seen === undefined) figures.perMetric.set(metric, { count: 1, sum: value, max: value });
      else {
        seen.count += 1;
        seen.sum += value;
        seen.max = Math.max(seen.max, value);
      }
    }
  }
  const sorted = [...regions].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const lines = [
    '# HELP nimbus_instances_sampled Instances with a sample newer than two collection intervals, by region',
    '# TYPE nimbus_instances_sampled gauge',
    ...sorted.map(
      ([region, figures]) => `nimbus_instances_sampled{region="${label(region)}"} ${figures.sampled}`,
    ),
  ];
  for (const metric of METRIC_NAMES) {
    const { help, unit } = METRICS[metric];
    for (const [suffix, what, pick] of [
      ['sum', 'their sum', (f: { sum: number }) => f.sum],
      ['max', 'the largest', (f: { max: number }) => f.max],
      ['count', 'how many instances have one', (f: { count: number }) => f.count],
    ] as const) {
      const name = `nimbus_instances_${metric}_${suffix}`;
      lines.push(`# HELP ${name} ${help} (${unit}), latest samples: ${what}, by region`);
      lines.push(`# TYPE ${name} gauge`);
      for (const [region, figures] of sorted) {
        const seen = figures.perMetric.get(metric);
        if (seen) lines.push(`${name}{region="${label(region)}"} ${pick(seen)}`);
      }
    }
  }
  return `${lines.join('\n')}\n`;
}
