/**
 * Idempotency-Key on POST: claims the key before the handler runs, replays a finished request's saved
 * response, and saves this request's response when it is sent. The rules live in
 * services/idempotency.ts; this plugin only carries HTTP in and out.
 */
import { createHash } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { InvalidRequest } from '../../services/errors.js';
import type { IdempotencyService } from '../../services/idempotency.js';

declare module 'fastify' {
  interface FastifyRequest {
    idempotencyKey: string | null;
  }
}

const MAX_KEY_LENGTH = 255;

export const idempotencyPlugin = fp<{ idempotency: IdempotencyService }>(
  async (app: FastifyInstance, { idempotency }) => {
    app.decorateRequest('idempotencyKey', null);

    app.addHook('preHandler', async (request, reply) => {
      const key = request.headers['idempotency-key'];
      if (request.method !== 'POST' || key === undefined || !request.principal) return;
      if (typeof key !== 'string' || key.length === 0 || key.length > MAX_KEY_LENGTH) {
        throw new InvalidRequest(`Idempotency-Key must be 1 to ${MAX_KEY_LENGTH} characters`, {
          field: 'Idempotency-Key',
          value: key,
        });
      }
      const fingerprint = createHash('sha256')
        .update(`${request.method} ${request.url}\n${JSON.stringify(request.body ?? null)}`)
        .digest('hex');
      const outcome = await idempotency.begin(request.principal.accountId, key, fingerprint);
      if (outcome.kind === 'replay') {
        reply.header('Idempotent-Replayed', 'true');
        reply.code(outcome.status).type('application/json; charset=utf-8');
        return reply.send(outcome.body);
      }
      request.idempotencyKey = key;
    });

    app.addHook('onSend', async (request, reply, payload) => {
      const key = request.idempotencyKey;
      if (key === null || !request.principal) return payload;
      request.idempotencyKey = null;
      await idempotency.finish(request.principal.accountId, key, reply.statusCode, String(payload));
      return payload;
    });
  },
  { name: 'nimbus-idempotency' },
);
