import { describe, expect, it } from 'vitest';
import { DURATION_BUCKETS_SECONDS, RequestMetrics } from './request-metrics.js';

/** The exposition as `series → value`, checking every line is a comment or `name{labels} number`. */
function samples(text: string): Map<string, number> {
  expect(text.endsWith('\n')).toBe(true);
  const found = new Map<string, number>();
  for (const line of text.trimEnd().split('\n')) {
    if (line.startsWith('# HELP ') || line.startsWith('# TYPE ')) continue;
    const match = /^([a-z_]+\{.*\}) (\S+)$/.exec(line);
    expect(match, line).not.toBeNull();
    found.set(match?.[1] as string, Number(match?.[2]));
  }
  return found;
}

describe('RequestMetrics', () => {
  it('counts requests and builds a cumulative latency histogram per route, method and status', () => {
    const metrics = new RequestMetrics();
    metrics.record('/v1/account', 'GET', 200, 0.0004);
    metrics.record('/v1/account', 'GET', 200, 0.001); // on a bound: counted in that bucket (le is ≤)
    metrics.record('/v1/account', 'GET', 200, 0.3);
    metrics.record('/v1/account', 'GET', 200, 9); // above every bound: only in +Inf
    metrics.record('/v1/account', 'GET', 401, 0.002);

    const found = samples(metrics.exposition());
    const ok = 'route="/v1/account",method="GET",status="200"';
    expect(found.get(`nimbus_http_requests_total{${ok}}`)).toBe(4);
    expect(found.get('nimbus_http_requests_total{route="/v1/account",method="GET",status="401"}')).toBe(1);
    const bucket = (le: string) => found.get(`nimbus_http_request_duration_seconds_bucket{le="${le}",${ok}}`);
    expect(bucket('0.0005')).toBe(1);
    expect(bucket('0.001')).toBe(2);
    expect(bucket('0.25')).toBe(2);
    expect(bucket('0.5')).toBe(3);
    expect(bucket('2.5')).toBe(3);
    expect(bucket('+Inf')).toBe(4);
    expect(found.get(`nimbus_http_request_duration_seconds_count{${ok}}`)).toBe(4);
    expect(found.get(`nimbus_http_request_duration_seconds_sum{${ok}}`)).toBeCloseTo(9.3014, 10);
    // One line per bound plus +Inf, for each of the two series.
    const bucketLines = [...found.keys()].filter((name) => name.includes('_bucket{'));
    expect(bucketLines).toHaveLength(2 * (DURATION_BUCKETS_SECONDS.length + 1));
  });

  it('declares both families once, with their types', () => {
    const metrics = new RequestMetrics();
    metrics.record('/healthz', 'GET', 200, 0.0001);
    metrics.record('unmatched', 'GET', 404, 0.0001);
    const text = metrics.exposition();
    expect(text.match(/^# TYPE nimbus_http_requests_total counter$/gm)).toHaveLength(1);
    expect(text.match(/^# TYPE nimbus_http_request_duration_seconds histogram$/gm)).toHaveLength(1);
  });

  it('escapes label values as the exposition format requires', () => {
    const metrics = new RequestMetrics();
    metrics.record('/odd"route\\x\ny', 'GET', 200, 0.0001);
    expect(metrics.exposition()).toContain(
      'nimbus_http_requests_total{route="/odd\\"route\\\\x\\ny",method="GET",status="200"} 1',
    );
  });

  it('has only the headers before the first request', () => {
    expect(samples(new RequestMetrics().exposition()).size).toBe(0);
  });
});
