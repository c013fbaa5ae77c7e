/**
 * Authentication, rate limiting and permissions, in that order, for every route of the API scope.
 *
 * The key comes from `Authorization: Bearer` or `X-API-Key`. Rate limiting runs before the verdict on
 * the key so that a wrong key still spends the caller's per-IP budget (brute force stays slow) and
 * every answer, 401 and 429 included, carries the X-RateLimit headers. Routes say what they need in
 * their config: `permission: ['account', 'read']`, `rateLimit: 'peek'` to report without consuming,
 * `public: true` to skip all of this.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { type Access, allows, type PermissionArea } from '../../domain/permissions.js';
import type { ApiKeyService } from '../../services/api-keys.js';
import { AuthenticationFailed, Forbidden, RateLimitExceeded } from '../../services/errors.js';
import type { Principal } from '../../services/principal.js';
import type { RateLimitService } from '../../services/rate-limits.js';
import type { RateDecision, RateDecisionResult } from '../../store/rate-counters.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    public?: boolean;
    permission?: readonly [PermissionArea, Access];
    rateLimit?: 'consume' | 'peek';
  }
  interface FastifyRequest {
    principal: Principal | null;
  }
}

export interface GuardOptions {
  apiKeys: ApiKeyService;
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

// Header names are given in lower case, as Fastify stores and sends them: it lower-cases every name it is
// given, and only a name that already is comes back as the same string rather than a new one per request.
function setRateHeaders(reply: FastifyReply, decision: RateDecision): void {
  reply.header('x-ratelimit-limit', decision.limit);
  reply.header('x-ratelimit-remaining', decision.remaining);
  reply.header('x-ratelimit-reset', decision.reset);
}

type RouteConfig = FastifyRequest['routeOptions']['config'];

export const guardPlugin = fp<GuardOptions>(
  async (app: FastifyInstance, { apiKeys, rateLimits }) => {
    app.decorateRequest('principal', null);

    function decisionFor(principal: Principal, config: RouteConfig): RateDecisionResult {
      return config.rateLimit === 'peek'
        ? rateLimits.peekForAccount(principal)
        : rateLimits.consumeForAccount(principal);
    }

    /** What is left once the caller is known (or known to have failed): headers, then each refusal. */
    function admit(
      request: FastifyRequest,
      reply: FastifyReply,
      config: RouteConfig,
      principal: Principal | null,
      failure: AuthenticationFailed | null,
      decision: RateDecision,
    ): void {
      setRateHeaders(reply, decision);
      if (!decision.allowed) throw new RateLimitExceeded(decision.retryAfter);
      if (failure || !principal) throw failure ?? new AuthenticationFailed();
      if (principal.accountStatus === 'suspended') {
        throw new Forbidden('This account is suspended; contact the operator of this Nimbus installation');
      }
      if (apiKeys.rotationDue(principal)) reply.header('warning', ROTATION_WARNING);
      request.principal = principal;
      const needed = config.permission;
      if (needed && !allows(principal.permissions, needed[0], needed[1])) {
        throw new Forbidden(`This API key lacks the permission ${needed[0]}:${needed[1]}`, {
          required_permission: `${needed[0]}:${needed[1]}`,
        });
      }
    }

    /** Any key, any counters: the key may need the store, and the counters Redis. */
    async function guardWaiting(
      request: FastifyRequest,
      reply: FastifyReply,
      config: RouteConfig,
      key: string | AuthenticationFailed,
    ): Promise<void> {
      let principal: Principal | null = null;
      let failure: AuthenticationFailed | null = null;
      if (key instanceof AuthenticationFailed) failure = key;
      else {
        try {
          principal = await apiKeys.authenticate(key);
        } catch (error) {
          if (!(error instanceof AuthenticationFailed)) throw error;
          failure = error;
        }
      }
      const decision = await (principal
        ? decisionFor(principal, config)
        : rateLimits.consumeForClient(request.ip));
      admit(request, reply, config, principal, failure, decision);
    }

    app.addHook('onRequest', (request, reply, done) => {
      const config = request.routeOptions.config;
      if (config.public) {
        done();
        return;
      }
      const key = presentedKey(request);
      // The common case, a key verified moments ago and in-process counters, finishes here without a
      // promise or a microtask turn; it runs on every request (bench/account.mjs).
      const principal = typeof key === 'string' ? apiKeys.cachedPrincipal(key) : undefined;
      const decision = principal ? decisionFor(principal, config) : undefined;
      if (principal && decision && !(decision instanceof Promise)) {
        try {
          admit(request, reply, config, principal, null, decision);
        } catch (error) {
          done(error as Error);
          return;
        }
        done();
        return;
      }
      const waiting =
        principal && decision
          ? Promise.resolve(decision).then((later) => admit(request, reply, config, principal, null, later))
          : guardWaiting(request, reply, config, key);
      waiting.then(() => done(), done);
    });
  },
  { name: 'nimbus-guard' },
);

/** The caller of a guarded route; routes call this instead of reading `request.principal` directly. */
export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw new AuthenticationFailed();
  return request.principal;
}
