/**
 * Idempotency-Key on POST: claims the key before the handler runs, replays a finished request's saved
 * response, and saves this request's response when it is sent. The rules live in
 * services/idempotency.ts; this plugin only carries HTTP in and out.
 */
import { createHash } from 'node:crypto';
import type { FastifyInstance, onSendAsyncHookHandler, preHandlerAsyncHookHandler } from 'fastify';
import fp from 'fastify-plugin';
import { InvalidRequest } from '../../services/errors.js';
import type { IdempotencyService } from '../../services/idempotency.js';

declare module 'fastify' {
  interface FastifyRequest {
    idempotencyKey: string | null;
  }
  interface FastifyContextConfig {
    /**
     * Fields of `data` that are secrets shown once (a new API key): they are left out of the saved
     * response, so the store never holds them and a replay does not show them again.
     */
    idempotencyOmit?: readonly string[];
  }
}

const MAX_KEY_LENGTH = 255;

function asArray<T>(value: T | T[] | undefined): T[] {
  if (value === undefined) return [];
  return Array.isArray(value) ? value : [value];
}

function withoutSecrets(payload: string, omit: readonly string[] | undefined): string {
  if (!omit || omit.length === 0) return payload;
  try {
    const body = JSON.parse(payload) as { data?: Record<string, unknown> };
    if (body.data === null || typeof body.data !== 'object') return payload;
    for (const field of omit) delete body.data[field];
    return JSON.stringify(body);
  } catch {
    return payload;
  }
}

/**
 * JSON with object keys sorted: the same fields sent in another order are the same request, so they
 * must make the same fingerprint (array order still counts).
 */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const object = value as Record<string, unknown>;
    const fields = Object.keys(object)
      .filter((name) => object[name] !== undefined)
      .sort()
      .map((name) => `${JSON.stringify(name)}:${canonicalJson(object[name])}`);
    return `{${fields.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

export const idempotencyPlugin = fp<{ idempotency: IdempotencyService }>(
  async (app: FastifyInstance, { idempotency }) => {
    app.decorateRequest('idempotencyKey', null);

    const claim: preHandlerAsyncHookHandler = async (request, reply) => {
      const key = request.headers['idempotency-key'];
      if (key === undefined || !request.principal) return;
      if (typeof key !== 'string' || key.length === 0 || key.length > MAX_KEY_LENGTH) {
        throw new InvalidRequest(`Idempotency-Key must be 1 to ${MAX_KEY_LENGTH} characters`, {
          field: 'Idempotency-Key',
          value: key,
        });
      }
      const fingerprint = createHash('sha256')
        .update(`${request.method} ${request.url}\n${canonicalJson(request.body ?? null)}`)
        .digest('hex');
      const outcome = await idempotency.begin(request.principal.accountId, key, fingerprint);
      if (outcome.kind === 'replay') {
        reply.header('idempotent-replayed', 'true');
        reply.code(outcome.status).type('application/json; charset=utf-8');
        return reply.send(outcome.body);
      }
      request.idempotencyKey = key;
    };

    const save: onSendAsyncHookHandler = async (request, reply, payload) => {
      const key = request.idempotencyKey;
      if (key === null || !request.principal) return payload;
      request.idempotencyKey = null;
      const saved = withoutSecrets(String(payload), request.routeOptions.config.idempotencyOmit);
      await idempotency.finish(request.principal.accountId, key, reply.statusCode, saved);
      return payload;
    };

    // Only POST routes get the hooks, so reads do not pay for them on every request.
    app.addHook('onRoute', (route) => {
      const methods = Array.isArray(route.method) ? route.method : [route.method];
      if (!methods.includes('POST')) return;
      route.preHandler = [...asArray(route.preHandler), claim];
      route.onSend = [...asArray(route.onSend), save];
    });
  },
  { name: 'nimbus-idempotency' },
);
