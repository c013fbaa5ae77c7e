/**
 * One access-log line and two Prometheus series per request. The log line names the request id, route,
 * status, duration and account; it never contains headers, so API keys cannot reach the logs. This runs
 * on every request, so it does no more than that (see bench/account.mjs).
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Logger } from 'pino';
import { Counter, Histogram, type Registry } from 'prom-client';
import { scalarLineLogger } from '../../logger.js';

export function httpMetrics(registry: Registry) {
  return {
    requests: new Counter({
      name: 'nimbus_http_requests_total',
      help: 'HTTP requests answered, by route, method and status',
      labelNames: ['route', 'method', 'status'] as const,
      registers: [registry],
    }),
    duration: new Histogram({
      name: 'nimbus_http_request_duration_seconds',
      help: 'Time to answer HTTP requests, by route, method and status',
      labelNames: ['route', 'method', 'status'] as const,
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [registry],
    }),
  };
}

export type HttpMetrics = ReturnType<typeof httpMetrics>;

export const observabilityPlugin = fp<{ metrics: HttpMetrics }>(
  async (app: FastifyInstance, { metrics }) => {
    // The access line holds only scalar fields, so it can skip the per-field wildcard redaction (see
    // scalarLineLogger); it names the request id itself, as `request.log` would.
    const accessLog = scalarLineLogger(app.log as Logger);
    // Series bound to their labels once per route, method and status: prom-client would otherwise
    // hash the label object on every request.
    const series = new Map<
      string,
      { requests: { inc(): void }; duration: { observe(value: number): void } }
    >();
    const seriesFor = (route: string, method: string, status: number) => {
      const key = `${method} ${route} ${status}`;
      let found = series.get(key);
      if (found === undefined) {
        const labels = { route, method, status: String(status) };
        found = { requests: metrics.requests.labels(labels), duration: metrics.duration.labels(labels) };
        series.set(key, found);
      }
      return found;
    };
    // A callback hook rather than an async one: nothing here waits, and every request pays for a promise.
    app.addHook('onResponse', (request, reply, done) => {
      // Unmatched URLs share one label so random paths cannot blow up the series count.
      const route = request.routeOptions.url ?? 'unmatched';
      const elapsedMs = reply.elapsedTime;
      const bound = seriesFor(route, request.method, reply.statusCode);
      bound.requests.inc();
      bound.duration.observe(elapsedMs / 1000);
      const query = request.url.indexOf('?');
      accessLog.info(
        {
          request_id: request.id,
          method: request.method,
          route,
          path: query === -1 ? request.url : request.url.slice(0, query),
          status: reply.statusCode,
          ms: Math.round(elapsedMs * 100) / 100,
          account: request.principal?.accountId,
          ip: request.ip,
        },
        'request',
      );
      done();
    });
  },
  { name: 'nimbus-observability' },
);
