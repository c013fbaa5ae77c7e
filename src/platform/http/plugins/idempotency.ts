/**
 * Idempotency-Key on POST: claims the key before the handler runs, replays a finished request's saved
 * response, and saves this request's response when it is sent. The rules live in
 * platform/idempotency/idempotency.ts; this plugin only carries HTTP in and out.
 *
 * A route that makes something says so (`idempotentCreate`): its handler runs with the claim visible to
 * the create's transaction (platform/idempotency/context.ts), and a retry that finds the create
 * committed without a saved answer is answered from the resource as it is now, through the route's own
 * view. Before any replay, the route's `idempotentReplayCheck` refuses a caller that could not have made
 * the request itself, with the error a fresh request would get.
 */
import { createHash } from 'node:crypto';
import type {
  FastifyInstance,
  onSendAsyncHookHandler,
  preHandlerAsyncHookHandler,
  preHandlerHookHandler,
} from 'fastify';
import fp from 'fastify-plugin';
import { InvalidRequest } from '../../errors.js';
import { type CreateClaim, type MadeResource, runWithClaim } from '../../idempotency/context.js';
import type { IdempotencyService } from '../../idempotency/idempotency.js';
import type { IdempotencyClaim } from '../../idempotency/store.js';
import type { Principal } from '../../principal.js';
import { ok } from '../envelope.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The key this request claimed, until its answer is saved. */
    idempotencyClaim: IdempotencyClaim | null;
    /** The claim as the create's transaction sees it, on routes that make something. */
    createClaim: CreateClaim | null;
  }
  interface FastifyContextConfig {
    /**
     * Fields of `data` that are secrets shown once (a new API key): they are left out of the saved
     * response, so the store never holds them and a replay does not show them again.
     */
    idempotencyOmit?: readonly string[];
    /**
     * The route makes something: the status it answers, and its view of what it made (a record named by
     * kind and id, of the caller's account) for a retry that finds the create committed but its answer
     * never saved. The view throws NotFound when the record is gone since.
     */
    idempotentCreate?: {
      status: number;
      view: (
        accountId: string,
        made: MadeResource,
        params: Readonly<Record<string, string>>,
      ) => Promise<unknown>;
    };
    /**
     * Checks, before a successful answer is replayed to `principal`, what the service checks beyond the
     * route's permission (a new API key's permissions): throws the error a fresh request would get.
     * `made` names what a create made (null for older records and requests that made nothing).
     */
    idempotentReplayCheck?: (
      principal: Principal,
      data: Record<string, unknown>,
      made: MadeResource | null,
    ) => void;
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

/** The `data` object of a saved answer, when it has one. */
function savedData(payload: string): Record<string, unknown> | null {
  try {
    const body = JSON.parse(payload) as { data?: unknown };
    return body.data !== null && typeof body.data === 'object' && !Array.isArray(body.data)
      ? (body.data as Record<string, unknown>)
      : null;
  } catch {
    return null;
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
    app.decorateRequest('idempotencyClaim', null);
    app.decorateRequest('createClaim', null);

    const claim: preHandlerAsyncHookHandler = async (request, reply) => {
      const key = request.headers['idempotency-key'];
      const principal = request.principal;
      if (key === undefined || !principal) return;
      if (typeof key !== 'string' || key.length === 0 || key.length > MAX_KEY_LENGTH) {
        throw new InvalidRequest(`Idempotency-Key must be 1 to ${MAX_KEY_LENGTH} characters`, {
          field: 'Idempotency-Key',
          value: key,
        });
      }
      const fingerprint = createHash('sha256')
        .update(`${request.method} ${request.url}\n${canonicalJson(request.body ?? null)}`)
        .digest('hex');
      const outcome = await idempotency.begin(principal.accountId, key, fingerprint);
      const config = request.routeOptions.config;
      if (outcome.kind === 'proceed') {
        request.idempotencyClaim = outcome.claim;
        if (config.idempotentCreate) {
          request.createClaim = { claim: outcome.claim, status: config.idempotentCreate.status, open: true };
        }
        return;
      }
      if (outcome.kind === 'replay') {
        const data = outcome.status < 300 ? savedData(outcome.body) : null;
        if (data) config.idempotentReplayCheck?.(principal, data, outcome.made);
        reply.header('idempotent-replayed', 'true');
        reply.code(outcome.status).type('application/json; charset=utf-8');
        return reply.send(outcome.body);
      }
      // The create committed and its answer was never saved: what it made, as the route shows it now.
      if (!config.idempotentCreate) throw new Error(`${request.url} has no view of what it made`);
      const params = request.params as Readonly<Record<string, string>>;
      const made = await config.idempotentCreate.view(principal.accountId, outcome.made, params);
      const data = made as Record<string, unknown>;
      config.idempotentReplayCheck?.(principal, data, outcome.made);
      const shown = { ...data };
      for (const field of config.idempotencyOmit ?? []) delete shown[field];
      reply.header('idempotent-replayed', 'true');
      reply.code(outcome.status);
      return reply.send(ok(request, shown));
    };

    // Callback style, so the handler runs inside the scope (an async hook's continuation would not).
    const enterClaim: preHandlerHookHandler = (request, _reply, done) => {
      const createClaim = request.createClaim;
      if (createClaim) runWithClaim(createClaim, done);
      else done();
    };

    const save: onSendAsyncHookHandler = async (request, reply, payload) => {
      const claimed = request.idempotencyClaim;
      if (claimed === null) return payload;
      request.idempotencyClaim = null;
      if (request.createClaim) request.createClaim.open = false;
      const saved = withoutSecrets(String(payload), request.routeOptions.config.idempotencyOmit);
      await idempotency.finish(claimed, reply.statusCode, saved);
      return payload;
    };

    // Only POST routes get the hooks, so reads do not pay for them on every request.
    app.addHook('onRoute', (route) => {
      const methods = Array.isArray(route.method) ? route.method : [route.method];
      if (!methods.includes('POST')) return;
      route.preHandler = [...asArray(route.preHandler), claim, enterClaim];
      route.onSend = [...asArray(route.onSend), save];
    });
  },
  { name: 'nimbus-idempotency' },
);
