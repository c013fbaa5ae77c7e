/**
 * One access-log line and two Prometheus series (request-metrics.ts) per request. The log line names
 * the request id, route, status, duration and account; it never contains headers, so API keys cannot
 * reach the logs. This runs on every request, so it does no more than that (see bench/account.mjs).
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Logger } from 'pino';
import { accessLogWriter } from '../../logger.js';
import type { RequestMetrics } from '../request-metrics.js';

export const observabilityPlugin = fp<{ metrics: RequestMetrics }>(
  async (app: FastifyInstance, { metrics }) => {
    // The line names the request id itself, as `request.log` would.
    const accessLog = accessLogWriter(app.log as Logger);
    // A callback hook rather than an async one: nothing here waits, and every request pays for a promise.
    app.addHook('onResponse', (request, reply, done) => {
      // Unmatched URLs share one label so random paths cannot blow up the series count.
      const route = request.routeOptions.url ?? 'unmatched';
      const elapsedMs = reply.elapsedTime;
      metrics.record(route, request.method, reply.statusCode, elapsedMs / 1000);
      const query = request.url.indexOf('?');
      accessLog({
        request_id: request.id,
        method: request.method,
        route,
        path: query === -1 ? request.url : request.url.slice(0, query),
        status: reply.statusCode,
        ms: Math.round(elapsedMs * 100) / 100,
        account: request.principal?.accountId,
        ip: request.ip,
      });
      done();
    });
  },
  { name: 'nimbus-observability' },
);
