/**
 * First hook of every request: the request id, the HTTPS rule, HSTS, nosniff, and API versions.
 *
 * Plain-HTTP requests reach the same app (the HTTP listener hands them over) so that they are answered
 * in the same envelope, with a request id and a log line; this hook rejects them before anything
 * authenticates, rate-limits or parses a body. Behind a TLS-terminating proxy listed in
 * NIMBUS_TRUST_PROXY, `X-Forwarded-Proto: https` counts as HTTPS (Fastify's `request.protocol`).
 *
 * A second hook, before the body is read, puts every request the guard did not on its client address's
 * budget (keyless requests: the API document, /docs, unknown paths), so that every answer carries the
 * X-RateLimit headers and a keyless flood meets 429 like any other; then it refuses request lines and
 * headers over 16 KiB, or more than 1,000 header lines (431).
 */
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { DomainError, InvalidRequest, RateLimitExceeded, ServiceUnavailable } from '../../errors.js';
import type { RateDecision } from '../../rate-limits/rate-counters.js';
import type { RateLimitService } from '../../rate-limits/rate-limits.js';
import { hasRateHeaders, keepForUpgrade, spendAddressBudget } from '../rate-headers.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The answer carries a secret shown once (a new API key): no cache may keep it. */
    carriesSecret?: boolean;
  }
}

export const SUPPORTED_VERSIONS = ['v1', 'v2'] as const;
const DEPRECATION_NOTICE_MONTHS = 12;
export const HSTS = 'max-age=31536000';

/**
 * Headers every answer carries, including those made outside Fastify's hooks (early-errors.ts).
 * nosniff: a browser must never read a JSON answer (which may echo what a client sent) as HTML or script.
 */
export function baseHeaders(requestId: string, secure: boolean): Record<string, string> {
  return {
    'x-request-id': requestId,
    'x-content-type-options': 'nosniff',
    ...(secure ? { 'strict-transport-security': HSTS } : {}),
  };
}

/** Largest request line plus headers the API takes: Node's own default limit, 16 KiB. */
export const MAX_HEADER_BYTES = 16 * 1024;
/**
 * What Node's HTTP parser is allowed (main.ts). Above MAX_HEADER_BYTES so that a request between the two
 * limits reaches Fastify: its refusal then goes through the guard's rate limit, and knows the method
 * (an answer to HEAD has no body). Only past this limit does Node refuse on its own (early-errors.ts).
 */
export const PARSER_MAX_HEADER_BYTES = 64 * 1024;

/** Most header lines a request may carry. */
export const MAX_HEADER_COUNT = 1000;
/**
 * What Node's parser keeps (listener-limits.ts): one more than MAX_HEADER_COUNT. Node drops the lines past
 * its limit without a word, so only a request that kept one line too many is known to have had too many.
 */
export const PARSER_MAX_HEADER_COUNT = MAX_HEADER_COUNT + 1;

/** The size of the request line and headers as sent (header text is Latin-1: a character is a byte). */
function headerBytes(request: IncomingMessage): number {
  // "METHOD URL HTTP/1.1\r\n" and, per header, "name: value\r\n" (rawHeaders alternates names and values).
  let bytes = (request.method?.length ?? 0) + (request.url?.length ?? 0) + 11;
  const raw = request.rawHeaders;
  for (let i = 0; i < raw.length; i++) bytes += (raw[i]?.length ?? 0) + 2;
  return bytes;
}

export class HeadersTooLarge extends DomainError {
  constructor() {
    super(
      'headers_too_large',
      `The request line and headers together are larger than ${MAX_HEADER_BYTES / 1024} KiB`,
    );
  }
}

export class TooManyHeaders extends DomainError {
  constructor() {
    super('headers_too_large', `The request carries more than ${MAX_HEADER_COUNT} header lines`);
  }
}

/** What the header section breaks of the API's limits, if anything. */
function headerSectionFault(request: IncomingMessage): DomainError | null {
  if (request.rawHeaders.length / 2 > MAX_HEADER_COUNT) return new TooManyHeaders();
  if (headerBytes(request) > MAX_HEADER_BYTES) return new HeadersTooLarge();
  return null;
}

export class HttpsRequired extends InvalidRequest {
  constructor(carriedKey: boolean) {
    super(
      carriedKey
        ? 'HTTPS is required. This request sent its API key over plain HTTP, where anyone on the path can read it: rotate that key now.'
        : 'HTTPS is required: send this request to the https:// address.',
      // `api_key_exposed`: whether the key this request carried must now be rotated (a program can act on it).
      { field: 'scheme', value: 'http', allowed_values: ['https'], api_key_exposed: carriedKey },
    );
  }
}

/** HTTP/1.1 requires a Host header (RFC 9112 §3.2); Node's own refusal of one without is not in the envelope. */
export class HostRequired extends InvalidRequest {
  constructor() {
    super('An HTTP/1.1 request must carry a Host header', { field: 'Host', value: null });
  }
}

export interface TransportOptions {
  /** End of life per version; a version with one gets Deprecation and Sunset headers. */
  endOfLife: Partial<Record<(typeof SUPPORTED_VERSIONS)[number], Date>>;
  rateLimits: RateLimitService;
}

type Done = (error: Error) => void;

/**
 * Calls `next` once the address's budget allows the request, or `done` with the 429. When the counters
 * cannot be asked (Redis down), the request goes on without the headers: a health check or a refusal
 * must not turn into a 500 for that.
 */
function afterBudget(
  decision: RateDecision | Promise<RateDecision>,
  request: FastifyRequest,
  done: Done,
  next: () => void,
): void {
  const judge = (settled: RateDecision) => {
    if (settled.allowed) next();
    else done(new RateLimitExceeded(settled.retryAfter));
  };
  if (!(decision instanceof Promise)) {
    judge(decision);
    return;
  }
  decision.then(judge, (error: unknown) => {
    request.log.warn({ err: error }, 'rate counters unavailable; answering without rate-limit headers');
    next();
  });
}

function deprecationHeaders(endOfLife: Date) {
  const deprecatedAt = new Date(endOfLife);
  deprecatedAt.setUTCMonth(deprecatedAt.getUTCMonth() - DEPRECATION_NOTICE_MONTHS);
  return {
    // RFC 9745: the moment the version is (or will be) deprecated, as @unix-seconds.
    Deprecation: `@${Math.floor(deprecatedAt.getTime() / 1000)}`,
    // RFC 8594: when it stops answering.
    Sunset: endOfLife.toUTCString(),
  };
}

export const transportPlugin = fp<TransportOptions>(
  async (app: FastifyInstance, options) => {
    const headersByVersion = new Map(
      Object.entries(options.endOfLife).map(([version, date]) => [version, deprecationHeaders(date as Date)]),
    );
    // Requests that arrive on kept-alive connections while the server drains get a 503 in the envelope
    // (Fastify's own return503OnClosing answer is not) and are told to reconnect.
    let closing = false;
    app.addHook('preClose', async () => {
      closing = true;
    });
    // The hooks below run on every request and seldom wait, so they take Fastify's callback form: an
    // async hook costs a promise and a microtask turn each time.
    // Answers finished while draining close their connection, so shutdown need not wait for keep-alive.
    app.addHook('onSend', (_request, reply, payload, done) => {
      if (closing) reply.header('connection', 'close');
      done(null, payload);
    });
    app.addHook('onRequest', (request, reply, done) => {
      const refusal = screen(request, reply);
      if (refusal === null) {
        done();
        return;
      }
      // Refused before the guard could count it: the client address's budget pays, and a client already
      // out of budget gets the 429 rather than the refusal.
      const decision = spendAddressBudget(options.rateLimits, request.ip, reply, 'consume');
      afterBudget(decision, request, done, () => done(refusal));
    });
    // After the guard (an onRequest hook of the /v1 scope): a guarded request has been counted, with its
    // key's account or its address; every other one spends its address's budget here, before its body is
    // read, and the header refusals below are rate-limited either way.
    app.addHook('preParsing', (request, reply, payload, done) => {
      const checkHeaders = () => {
        const fault = headerSectionFault(request.raw);
        if (fault) done(fault);
        else done(null, payload);
      };
      if (hasRateHeaders(reply)) {
        checkHeaders();
        return;
      }
      const config = request.routeOptions.config;
      // A stream's upgrade is counted on its account's budget once it authenticates inside the socket;
      // its 101 reports the address's budget (rate-headers.ts).
      const upgrade = config.streamAuth === true && request.ws;
      const decision = spendAddressBudget(
        options.rateLimits,
        request.ip,
        reply,
        upgrade ? 'peek' : (config.rateLimit ?? 'consume'),
      );
      afterBudget(decision, request, done, () => {
        if (upgrade) keepForUpgrade(request.raw, reply);
        checkHeaders();
      });
    });

    /** The answer for requests that must not go further, or null; sets the headers every answer carries. */
    function screen(request: FastifyRequest, reply: FastifyReply): DomainError | null {
      // Lower-case header names throughout: see rate-headers.ts.
      reply.header('x-request-id', request.id);
      reply.header('x-content-type-options', 'nosniff');
      if (request.routeOptions.config.carriesSecret) reply.header('cache-control', 'no-store');
      if (closing) {
        reply.header('connection', 'close');
        return new ServiceUnavailable('The server is shutting down; retry the request', {
          reason: 'shutting_down',
        });
      }
      if (request.protocol !== 'https') {
        const carriedKey =
          request.headers.authorization !== undefined || request.headers['x-api-key'] !== undefined;
        if (carriedKey) request.log.warn('plain-HTTP request carried an API key; the key is exposed');
        return new HttpsRequired(carriedKey);
      }
      reply.header('strict-transport-security', HSTS);
      if (request.headers.host === undefined && request.raw.httpVersion === '1.1') {
        reply.header('connection', 'close');
        throw new HostRequired();
      }
      const version = /^\/(v\d+)(?:\/|\?|$)/.exec(request.url)?.[1];
      if (version === undefined) return null;
      if (!(SUPPORTED_VERSIONS as readonly string[]).includes(version)) {
        return new DomainError(
          'not_found',
          `API version ${version} does not exist; supported versions: ${SUPPORTED_VERSIONS.join(', ')}`,
          { supported_versions: [...SUPPORTED_VERSIONS] },
        );
      }
      const headers = headersByVersion.get(version);
      if (headers) reply.headers(headers);
      return null;
    }
  },
  { name: 'nimbus-transport' },
);
