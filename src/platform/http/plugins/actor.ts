/**
 * Runs each authenticated request's handler on behalf of its caller (platform/events/actor.ts): the key's id and
 * the client's address (`request.ip`, which honours NIMBUS_TRUST_PROXY), so every event the request
 * writes names them. Never the key's secret.
 *
 * A preHandler hook: it runs after the guard has named the principal and after the body was read (a
 * context entered earlier would be lost on the way through the body's stream events), and Fastify calls
 * the handler from inside `done`, so the handler and all it starts run in the context.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { actingAs } from '../../events/actor.js';

export const actorPlugin = fp(
  async (app: FastifyInstance) => {
    app.addHook('preHandler', (request, _reply, done) => {
      const principal = request.principal;
      if (!principal) {
        done();
        return;
      }
      actingAs({ type: 'api_key', id: principal.keyId, ip: request.ip }, done);
    });
  },
  { name: 'nimbus-actor', dependencies: ['nimbus-guard'] },
);
