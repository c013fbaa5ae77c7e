/**
 * The X-RateLimit headers, written the same way by every path that answers (the guard, the transport's
 * hooks for requests the guard never sees, the early answers made outside Fastify), and the spending of
 * a keyless request's unit of its client address's budget.
 */
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { RateDecision } from '../rate-limits/rate-counters.js';
import type { RateLimitService, RateUse } from '../rate-limits/rate-limits.js';

/**
 * The three headers of a decision. A refused request says `Remaining: 0`: whether the hour's window is
 * spent or the burst bucket is empty, no request passes before Retry-After, and a positive count beside a
 * 429 would tell the client the opposite. GET /v1/account/rate-limit still reports both counts apart.
 * Names are lower case, as Fastify stores and sends them: it lower-cases every name it is given, and only
 * a name that already is comes back as the same string rather than a new one per request.
 */
export function rateHeadersOf(decision: RateDecision): Record<string, string> {
  return {
    'x-ratelimit-limit': String(decision.limit),
    'x-ratelimit-remaining': String(decision.allowed ? decision.remaining : 0),
    'x-ratelimit-reset': String(decision.reset),
  };
}

export function setRateHeaders(reply: FastifyReply, decision: RateDecision): void {
  reply.header('x-ratelimit-limit', decision.limit);
  reply.header('x-ratelimit-remaining', decision.allowed ? decision.remaining : 0);
  reply.header('x-ratelimit-reset', decision.reset);
}

/** True once some step has put this request on a budget (the guard did, for a guarded route). */
export function hasRateHeaders(reply: FastifyReply): boolean {
  return reply.hasHeader('x-ratelimit-limit');
}

/**
 * Puts a keyless request on its client address's budget and writes the headers: at once when the
 * counters are in this process, else once Redis answers. Returns the decision (or its promise).
 */
export function spendAddressBudget(
  rateLimits: RateLimitService,
  ip: string,
  reply: FastifyReply,
  use: RateUse,
): RateDecision | Promise<RateDecision> {
  const now = rateLimits.forClientNow(ip, use);
  if (now !== undefined) {
    setRateHeaders(reply, now);
    return now;
  }
  return rateLimits.forClient(ip, use).then((decision) => {
    setRateHeaders(reply, decision);
    return decision;
  });
}

/**
 * The headers of a WebSocket upgrade the transport let through, until its `101` is written: that answer
 * is made by the ws library, outside Fastify's reply, and gets them from here (`rateHeadersOnUpgrades`).
 */
const upgradeHeaders = new WeakMap<IncomingMessage, Record<string, string>>();

export function keepForUpgrade(request: IncomingMessage, reply: FastifyReply): void {
  const kept: Record<string, string> = {};
  for (const name of ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset']) {
    const value = reply.getHeader(name);
    if (value !== undefined) kept[name] = String(value);
  }
  upgradeHeaders.set(request, kept);
}

/** Adds the kept headers to every `101 Switching Protocols` (call once @fastify/websocket is registered). */
export function rateHeadersOnUpgrades(app: FastifyInstance): void {
  app.websocketServer.on('headers', (lines: string[], request: IncomingMessage) => {
    const headers = upgradeHeaders.get(request);
    if (headers) for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
  });
}
