/**
 * One access-log line and two Prometheus series per request. The log line names the request id, route,
 * status, duration and account; it never contains headers, so API keys cannot reach the logs.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Counter, Histogram, type Registry } from 'prom-client';

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
    app.addHook('onResponse', async (request, reply) => {
      // Unmatched URLs share one label so random paths cannot blow up the series count.
      const route = request.routeOptions.url ?? 'unmatched';
      const status = String(reply.statusCode);
      const seconds = reply.elapsedTime / 1000;
      metrics.requests.inc({ route, method: request.method, status });
      metrics.duration.observe({ route, method: request.method, status }, seconds);
      request.log.info(
        {
          method: request.method,
          route,
          path: request.url.split('?')[0],
          status: reply.statusCode,
          ms: Math.round(reply.elapsedTime * 100) / 100,
          account: request.principal?.accountId,
          ip: request.ip,
        },
        'request',
      );
    });
  },
  { name: 'nimbus-observability' },
);
