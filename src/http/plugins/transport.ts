/**
 * First hook of every request: the request id, the HTTPS rule, HSTS, nosniff, and API versions.
 *
 * Plain-HTTP requests reach the same app (the HTTP listener hands them over) so that they are answered
 * in the same envelope, with a request id and a log line; this hook rejects them before anything
 * authenticates, rate-limits or parses a body. Behind a TLS-terminating proxy listed in
 * NIMBUS_TRUST_PROXY, `X-Forwarded-Proto: https` counts as HTTPS (Fastify's `request.protocol`).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { DomainError, InvalidRequest, ServiceUnavailable } from '../../services/errors.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The answer carries a secret shown once (a new API key): no cache may keep it. */
    carriesSecret?: boolean;
  }
}

export const SUPPORTED_VERSIONS = ['v1'] as const;
const DEPRECATION_NOTICE_MONTHS = 12;
export const HSTS = 'max-age=31536000';

/**
 * Headers every answer carries, including those made outside Fastify (plugins/errors.ts, client-errors.ts).
 * nosniff: a browser must never read a JSON answer (which may echo what a client sent) as HTML or script.
 */
export function baseHeaders(requestId: string, secure: boolean): Record<string, string> {
  return {
    'x-request-id': requestId,
    'x-content-type-options': 'nosniff',
    ...(secure ? { 'strict-transport-security': HSTS } : {}),
  };
}

export class HttpsRequired extends InvalidRequest {
  constructor(carriedKey: boolean) {
    super(
      carriedKey
        ? 'HTTPS is required. This request sent its API key over plain HTTP, where anyone on the path can read it: rotate that key now.'
        : 'HTTPS is required: send this request to the https:// address.',
    );
  }
}

export interface TransportOptions {
  /** End of life per version; a version with one gets Deprecation and Sunset headers. */
  endOfLife: Partial<Record<(typeof SUPPORTED_VERSIONS)[number], Date>>;
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
    // The two hooks below run on every request and never wait, so they take Fastify's callback form: an
    // async hook costs a promise and a microtask turn each time.
    // Answers finished while draining close their connection, so shutdown need not wait for keep-alive.
    app.addHook('onSend', (_request, reply, payload, done) => {
      if (closing) reply.header('connection', 'close');
      done(null, payload);
    });
    app.addHook('onRequest', (request, reply, done) => {
      try {
        screen(request, reply);
      } catch (error) {
        done(error as Error);
        return;
      }
      done();
    });

    /** Throws the answer for requests that must not go further; sets the headers every answer carries. */
    function screen(request: FastifyRequest, reply: FastifyReply): void {
      // Lower-case header names throughout: see setRateHeaders in guard.ts.
      reply.header('x-request-id', request.id);
      reply.header('x-content-type-options', 'nosniff');
      if (request.routeOptions.config.carriesSecret) reply.header('cache-control', 'no-store');
      if (closing) {
        reply.header('connection', 'close');
        throw new ServiceUnavailable('The server is shutting down; retry the request', {
          reason: 'shutting_down',
        });
      }
      if (request.protocol !== 'https') {
        const carriedKey =
          request.headers.authorization !== undefined || request.headers['x-api-key'] !== undefined;
        if (carriedKey) request.log.warn('plain-HTTP request carried an API key; the key is exposed');
        throw new HttpsRequired(carriedKey);
      }
      reply.header('strict-transport-security', HSTS);
      const version = /^\/(v\d+)(?:\/|\?|$)/.exec(request.url)?.[1];
      if (version === undefined) return;
      if (!(SUPPORTED_VERSIONS as readonly string[]).includes(version)) {
        throw new DomainError(
          'not_found',
          `API version ${version} does not exist; supported versions: ${SUPPORTED_VERSIONS.join(', ')}`,
          { supported_versions: [...SUPPORTED_VERSIONS] },
        );
      }
      const headers = headersByVersion.get(version);
      if (headers) reply.headers(headers);
    }
  },
  { name: 'nimbus-transport' },
);
