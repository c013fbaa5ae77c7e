/** The history body is byte for byte what JSON.stringify writes for the answer with its points as pairs. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { metricsHistoryBody } from './history-body.js';
import type { MetricSeries, MetricsAnswer } from './service.js';

/** What the route's schema says the body is, made the slow way. */
function reference(envelope: { data: MetricsAnswer } & Record<string, unknown>): string {
  return JSON.stringify({
    ...envelope,
    data: {
      ...envelope.data,
      series: envelope.data.series.map(({ times, values, ...rest }) => ({
        ...rest,
        points: times.map((ms, i) => [new Date(ms).toISOString(), values[i]]),
      })),
    },
  });
}

const anyTime = fc.oneof(
  // Whole seconds, mostly around now, some anywhere a four-digit year reaches.
  fc.integer({ min: 1_700_000_000, max: 1_900_000_000 }).map((s) => s * 1000),
  fc.integer({ min: 0, max: 253_402_300_799 }).map((s) => s * 1000),
  // Milliseconds, years before 1970 and after 9999 (six-digit years).
  fc.integer({ min: -8_640_000_000_000_000, max: 8_640_000_000_000_000 }),
);

const anyValue = fc.oneof(
  fc.integer({ min: 0, max: 2 ** 40 }),
  fc.integer({ min: -(2 ** 53) + 1, max: 2 ** 53 - 1 }),
  fc.integer({ min: 0, max: 100_000 }).map((n) => n / 100),
  // Hundredths of any size and sign, as percentages are shown, written without String().
  fc.integer({ min: -(1e15 - 1), max: 1e15 - 1 }).map((n) => n / 100),
  fc.double({ min: -1e14, max: 1e14, noNaN: true }).map((x) => Math.round(x * 100) / 100),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom(0, -0, 2 ** 53, 1e21, 1e-7, 0.1 + 0.2),
);

const anySeries: fc.Arbitrary<MetricSeries> = fc
  .array(fc.tuple(anyTime, anyValue), { maxLength: 200 })
  .chain((points) =>
    fc.record({
      metric: fc.constantFrom('cpu_percent', 'memory_used_bytes', 'net_rx_bps', 'gpu_percent'),
      unit: fc.constantFrom('percent', 'bytes', 'bytes_per_second'),
      times: fc.constant(points.map(([t]) => t)),
      values: fc.constant(points.map(([, v]) => v)),
    }),
  ) as fc.Arbitrary<MetricSeries>;

const anyEnvelope = fc.record({
  success: fc.constant(true),
  data: fc.record({
    instance_id: fc.string(),
    start: fc.constant('2026-03-02T00:00:00.000Z'),
    end: fc.constant('2026-03-03T00:00:00.000Z'),
    step: fc.integer({ min: 10, max: 86_400 }),
    aggregate: fc.constantFrom('avg', 'min', 'max'),
    resolution: fc.constantFrom('raw', 'rollup'),
    series: fc.array(anySeries, { maxLength: 8 }),
  }),
  // Any text the request id may hold (it can come from a header): quotes, controls, non-ASCII.
  metadata: fc.record({
    request_id: fc.string({ unit: 'binary' }),
    timestamp: fc.constant('2026-03-03T00:00:01.234Z'),
  }),
}) as fc.Arbitrary<{ data: MetricsAnswer } & Record<string, unknown>>;

describe('metrics history body', () => {
  it('equals JSON.stringify of the answer with [timestamp, value] pairs, for any answer', () => {
    fc.assert(
      fc.property(anyEnvelope, (envelope) => {
        expect(metricsHistoryBody(envelope).toString('utf8')).toBe(reference(envelope));
      }),
      { numRuns: 300 },
    );
  });

  it('a day of 10 s points of seven series, consecutive seconds across midnight', () => {
    const start = Date.parse('2026-03-01T12:00:00Z');
    const times = Array.from({ length: 8_640 }, (_, i) => start + i * 10_000);
    const series = [
      'cpu_percent',
      'memory_used_bytes',
      'memory_total_bytes',
      'disk_read_bps',
      'disk_write_bps',
      'net_rx_bps',
      'net_tx_bps',
    ].map((metric, m) => ({
      metric,
      unit: 'bytes',
      times,
      values: times.map((_, i) => (m === 0 ? Math.round(i * 7.3) / 10 : i * 1_048_576)),
    })) as MetricSeries[];
    const envelope = {
      success: true,
      data: {
        instance_id: 'ins_x',
        start: new Date(start).toISOString(),
        end: new Date(start + 86_400_000).toISOString(),
        step: 10,
        aggregate: 'avg',
        resolution: 'raw',
        series,
      } as MetricsAnswer,
      metadata: { request_id: 'req_1', timestamp: '2026-03-02T12:00:00.000Z' },
    };
    const body = metricsHistoryBody(envelope);
    expect(body.toString('utf8')).toBe(reference(envelope));
    expect(JSON.parse(body.toString('utf8')).data.series[0].points[4_320]).toEqual([
      '2026-03-02T00:00:00.000Z',
      3153.6,
    ]);
  });
});
