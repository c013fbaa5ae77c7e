/**
 * Authentication, rate limiting and permissions, in that order, for every route of the API scope.
 *
 * The key comes from `Authorization: Bearer` or `X-API-Key`. Rate limiting runs before the verdict on
 * the key so that a wrong key still spends the caller's per-IP budget (brute force stays slow) and
 * every answer, 401 and 429 included, carries the X-RateLimit headers. Routes say what they need in
 * their config: `permission: ['account', 'read']`, `rateLimit: 'peek'` to report without consuming,
 * `public: true` to skip all of this.
 *
 * The steps read the key's verdict and the budget from memory when they can (the verified-key cache,
 * in-process counters) and then finish without a promise; when either must be fetched (the store, Redis),
 * admitLater runs the same steps, waiting for them. Either way `admit` gives the verdict.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { type Authenticator, UnverifiedKey } from '../../authenticator.js';
import type { Access, PermissionArea } from '../../domain/permissions.js';
import { AuthenticationFailed, Forbidden, RateLimitExceeded } from '../../errors.js';
import { type Principal, requirePermission } from '../../principal.js';
import type { RateDecision } from '../../rate-limits/rate-counters.js';
import type { RateLimitService, RateUse } from '../../rate-limits/rate-limits.js';
import { setRateHeaders } from '../rate-headers.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    public?: boolean;
    permission?: readonly [PermissionArea, Access];
    rateLimit?: 'consume' | 'peek';
    /**
     * A WebSocket route that authenticates inside the socket (resources/metrics/routes.ts), answering with close
     * codes a browser can read: an upgrade to it passes the guard; a plain request does not.
     */
    streamAuth?: boolean;
  }
  interface FastifyRequest {
    principal: Principal | null;
  }
}

export interface GuardOptions {
  apiKeys: Authenticator;
  rateLimits: RateLimitService;
}

const ROTATION_WARNING =
  '299 - "This API key is more than 90 days old; rotating keys every 90 days is recommended"';

function presentedKey(request: FastifyRequest): string | AuthenticationFailed {
  const authorization = request.headers.authorization;
  if (authorization !== undefined) {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    return match?.[1] ?? new AuthenticationFailed('The Authorization header must be "Bearer <API key>"');
  }
  const header = request.headers['x-api-key'];
  if (typeof header === 'string' && header.length > 0) return header;
  return new AuthenticationFailed('Missing API key: send Authorization: Bearer <key> or X-API-Key: <key>');
}

/** Who is calling: a principal, or the refusal of the key presented (which waits until the budget is spent). */
type Caller = Principal | AuthenticationFailed;

export const guardPlugin = fp<GuardOptions>(
  async (app: FastifyInstance, { apiKeys, rateLimits }) => {
    app.decorateRequest('principal', null);

    app.addHook('onRequest', (request, reply, done) => {
      const config = request.routeOptions.config;
      if (config.public || (config.streamAuth && request.ws)) {
        done();
        return;
      }
      const use = config.rateLimit ?? 'consume';
      // Who is calling, as far as memory knows: a key verified moments ago is in the cache.
      const known = identify(request);
      // Its budget, at once when the counters are in this process.
      const decision =
        known instanceof UnverifiedKey
          ? undefined
          : rateLimits.decideNow(principalIn(known), request.ip, use);
      if (known instanceof UnverifiedKey || decision === undefined) {
        admitLater(request, reply, known, use).then(() => done(), done);
        return;
      }
      // Kept synchronous when both are in memory: an async hook costs 5% more CPU per request (bench/compare.mjs).
      try {
        admit(request, reply, known, decision);
      } catch (error) {
        done(error as Error);
        return;
      }
      done();
    });

    function identify(request: FastifyRequest): Caller | UnverifiedKey {
      const key = presentedKey(request);
      return key instanceof AuthenticationFailed ? key : apiKeys.verifyFromMemory(key);
    }

    /** The same steps when the key must be read from the store or the counters asked in Redis. */
    async function admitLater(
      request: FastifyRequest,
      reply: FastifyReply,
      known: Caller | UnverifiedKey,
      use: RateUse,
    ): Promise<void> {
      let caller: Caller;
      try {
        caller = known instanceof UnverifiedKey ? await apiKeys.verifyFromStore(known) : known;
      } catch (error) {
        if (!(error instanceof AuthenticationFailed)) throw error;
        caller = error;
      }
      admit(request, reply, caller, await rateLimits.decide(principalIn(caller), request.ip, use));
    }

    /** The verdict once the caller and its budget are known: rate-limit headers, then each refusal in turn. */
    function admit(
      request: FastifyRequest,
      reply: FastifyReply,
      caller: Caller,
      decision: RateDecision,
    ): void {
      setRateHeaders(reply, decision);
      if (!decision.allowed) throw new RateLimitExceeded(decision.retryAfter);
      if (caller instanceof AuthenticationFailed) throw caller;
      if (caller.accountStatus === 'suspended') {
        throw new Forbidden('This account is suspended; contact the operator of this Nimbus installation');
      }
      if (apiKeys.rotationDue(caller)) reply.header('warning', ROTATION_WARNING);
      request.principal = caller;
      const needed = request.routeOptions.config.permission;
      if (needed) requirePermission(caller, needed[0], needed[1]);
    }
  },
  { name: 'nimbus-guard' },
);

/** The principal whose budget a request spends; a caller without one spends its client IP's. */
function principalIn(caller: Caller): Principal | null {
  return caller instanceof AuthenticationFailed ? null : caller;
}

/** The caller of a guarded route; routes call this instead of reading `request.principal` directly. */
export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw new AuthenticationFailed();
  return request.principal;
}
