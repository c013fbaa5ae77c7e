/**
 * Liveness and readiness for load balancers and orchestrators; no key needed. They report the client
 * address's rate budget without spending it: a prober asks every few seconds from one address, and a
 * 429 here would take a healthy replica out of service.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { ServiceUnavailable } from '../errors.js';
import { ok } from './envelope.js';
import { described } from './responses.js';
import { Envelope } from './schemas.js';

export interface HealthDeps {
  /** Resolves when every backing service (store, Redis) answers. */
  checkReady: () => Promise<void>;
}

const Status = Type.Object({ status: Type.String() });

export const healthRoutes: FastifyPluginAsyncTypebox<HealthDeps> = async (app, { checkReady }) => {
  app.get(
    '/healthz',
    {
      schema: {
        tags: ['operations'],
        summary: 'Liveness: the process answers',
        description: 'Answers 200 while the process serves requests; it checks nothing behind it.',
        response: { 200: described(Envelope(Status), 'The process is alive') },
      },
      config: { public: true, rateLimit: 'peek' },
    },
    async (request) => ok(request, { status: 'ok' }),
  );

  app.get(
    '/readyz',
    {
      schema: {
        tags: ['operations'],
        summary: 'Readiness: the store (and Redis, when configured) answer',
        description:
          'Answers 200 when the store (and Redis, when configured) answer, 503 when one does not: a load ' +
          'balancer sends this replica no traffic until it is ready.',
        response: { 200: described(Envelope(Status), 'Every backing service answers') },
      },
      config: { public: true, rateLimit: 'peek' },
    },
    async (request) => {
      try {
        await checkReady();
      } catch (error) {
        request.log.warn({ err: error }, 'readiness check failed');
        throw new ServiceUnavailable('A backing service is not reachable', {
          reason: 'dependency_unavailable',
        });
      }
      return ok(request, { status: 'ready' });
    },
  );
};
