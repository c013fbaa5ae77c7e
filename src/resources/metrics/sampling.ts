/**
 * Sampling many machines at one moment, for the metrics collector and the live streams: in one call
 * when the driver can (ComputeDriver.sampleMetricsMany), else machine by machine, all at once.
 */
import type { ComputeDriver, MachineSpec, MetricSample } from '../../drivers/driver.js';

/** Each machine's sample, or the error its sampling failed with. */
export async function sampleMany(
  driver: ComputeDriver,
  specs: readonly MachineSpec[],
  at: Date,
): Promise<Map<string, MetricSample | Error>> {
  if (specs.length === 0) return new Map();
  if (driver.sampleMetricsMany) return driver.sampleMetricsMany(specs, at);
  const samples = new Map<string, MetricSample | Error>();
  await Promise.all(
    specs.map(async (spec) => {
      try {
        samples.set(spec.id, await driver.sampleMetrics(spec, at));
      } catch (error) {
        samples.set(spec.id, error instanceof Error ? error : new Error(String(error)));
      }
    }),
  );
  return samples;
}
