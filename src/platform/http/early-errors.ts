/**
 * Answers for requests that fail before Fastify's hooks run: a URL the router cannot decode (Fastify's
 * `frameworkErrors`) and input Node's HTTP parser refuses (the servers' `clientError`: headers or URL over
 * 16 KiB, a malformed request line, a request that takes too long). They get what every other answer
 * gets: the error envelope with a request id, X-Request-Id, nosniff and (over TLS) HSTS, one log line,
 * and one unit of the client address's rate budget, so a client already at 429 is refused with 429 here
 * too. Node's parser cannot go on after its own errors, so those connections close (lingeringly). The
 * same goes for what leaves Node's HTTP handling before the app: CONNECT, and WebSocket handshakes `ws`
 * refuses (plugins/upgrades.ts).
 */
import { type IncomingHttpHeaders, type IncomingMessage, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { newId } from '../domain/ids.js';
import { type ErrorCode, statusOf } from '../error-catalogue.js';
import { RateLimitExceeded } from '../errors.js';
import type { RateLimitService } from '../rate-limits/rate-limits.js';
import { echoed, errorEnvelope } from './envelope.js';
import { closeLingering, isLingering } from './lingering-close.js';
import { baseHeaders, HeadersTooLarge, HttpsRequired } from './plugins/transport.js';
import { rateHeadersOf } from './rate-headers.js';

export interface EarlyErrorDeps {
  rateLimits: RateLimitService;
  logger: Logger;
}

/** An answer in the error envelope; its status is its code's (platform/error-catalogue.ts). */
interface Refusal {
  code: ErrorCode;
  message: string;
  details?: Record<string, unknown>;
  retryAfter?: number;
}

interface Budgeted {
  refusal: Refusal;
  headers: Record<string, string>;
}

/** Spends one unit of the client's budget; a client out of budget gets the 429 instead. */
async function budgeted(deps: EarlyErrorDeps, ip: string, refusal: Refusal): Promise<Budgeted> {
  try {
    const decision = await deps.rateLimits.consumeForClient(ip);
    const headers = rateHeadersOf(decision);
    if (decision.allowed) return { refusal, headers };
    const limited = new RateLimitExceeded(decision.retryAfter);
    headers['retry-after'] = String(limited.retryAfterSeconds);
    return {
      refusal: {
        code: limited.code,
        message: limited.message,
        retryAfter: limited.retryAfterSeconds,
      },
      headers,
    };
  } catch (error) {
    // The counters are unreachable (Redis down): the refusal still goes out, without the headers.
    deps.logger.error({ err: error }, 'rate counters unavailable while refusing a malformed request');
    return { refusal, headers: {} };
  }
}

function envelopeOf(requestId: string, refusal: Refusal) {
  return errorEnvelope(requestId, refusal.code, refusal.message, {
    details: refusal.details,
    retry_after: refusal.retryAfter,
  });
}

/** The HTTPS-required refusal (transport.ts) of a plain-HTTP request with these headers. */
function httpsRefusal(headers: IncomingHttpHeaders): Refusal {
  const required = new HttpsRequired(
    headers.authorization !== undefined || headers['x-api-key'] !== undefined,
  );
  return { code: required.code, message: required.message, details: required.details };
}

/** Fastify's `frameworkErrors`: the router could not make sense of the URL. */
export function frameworkErrorHandler(deps: EarlyErrorDeps) {
  return (error: FastifyError, request: FastifyRequest, reply: FastifyReply): void => {
    const path = request.url.split('?')[0] ?? request.url;
    let refusal: Refusal;
    if (error.code === 'FST_ERR_BAD_URL') {
      refusal = {
        code: 'invalid_request',
        message: 'The URL is not valid: a %-escape is malformed (every % starts two hex digits) or not UTF-8',
        details: { field: 'path', value: echoed(path) },
      };
    } else if (error.code === 'FST_ERR_MAX_PARAM_LENGTH') {
      refusal = {
        code: 'invalid_request',
        message: 'A path segment of the URL is too long',
        details: { field: 'path', value: echoed(path) },
      };
    } else {
      request.log.error({ err: error }, 'router error');
      refusal = { code: 'server_error', message: 'Internal server error' };
    }
    const secure = request.protocol === 'https';
    // Plain HTTP is refused for that before anything else, on the address's budget like every refusal.
    const answered = budgeted(deps, request.ip, secure ? refusal : httpsRefusal(request.headers));
    void answered.then(({ refusal: final, headers }) => {
      deps.logger.info(
        {
          request_id: request.id,
          method: request.method,
          route: 'unmatched',
          path: echoed(path),
          status: statusOf(final.code),
          ip: request.ip,
          error_code: error.code,
        },
        'request',
      );
      reply
        .code(statusOf(final.code))
        .headers({ ...baseHeaders(request.id, secure), ...headers })
        .type('application/json; charset=utf-8')
        .send(envelopeOf(request.id, final));
    });
  };
}

function refusalFor(error: Error & { code?: string; reason?: string }): Refusal | null {
  switch (error.code) {
    case 'HPE_HEADER_OVERFLOW': {
      const tooLarge = new HeadersTooLarge();
      return { code: tooLarge.code, message: tooLarge.message };
    }
    case 'ERR_HTTP_REQUEST_TIMEOUT':
    case 'ERR_HTTP_HEADERS_TIMEOUT':
      return { code: 'request_timeout', message: 'The request did not arrive in time' };
  }
  if (error.code?.startsWith('HPE_')) {
    return {
      code: 'invalid_request',
      message: `Malformed HTTP request${error.reason ? `: ${error.reason}` : ''}`,
      details: { reason: error.code },
    };
  }
  return null;
}

/**
 * Whether the refused request is a HEAD, whose answer must not have a body. Known only when the bytes
 * Node was parsing begin with the request line; past PARSER_MAX_HEADER_BYTES they usually do not, and
 * such a HEAD gets the envelope anyway (its connection closes right after, so nothing else is misread).
 */
function isHead(error: Error & { rawPacket?: Buffer }): boolean {
  return error.rawPacket?.toString('latin1', 0, 5) === 'HEAD ';
}

function rawResponse(
  status: number,
  headers: Record<string, string>,
  body: string,
  withBody: boolean,
): string {
  const lines = [`HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}`];
  for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
  lines.push(
    'content-type: application/json; charset=utf-8',
    `content-length: ${Buffer.byteLength(body)}`,
    'connection: close',
  );
  return `${lines.join('\r\n')}\r\n\r\n${withBody ? body : ''}`;
}

/** A server's `clientError` listener: Node's HTTP parser refused what the client sent. */
export function clientErrorHandler(deps: EarlyErrorDeps) {
  return (error: Error & { code?: string }, socket: Socket): void => {
    if (socket.destroyed || isLingering(socket)) return;
    const refusal = refusalFor(error);
    // Node's own rule: nothing may be written once an answer to this connection has begun.
    const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage;
    if (refusal === null || error.code === 'ECONNRESET' || inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    refuseOnSocket(deps, socket, refusal, { errorCode: error.code, withBody: !isHead(error) });
  };
}

/**
 * Answers `refusal` on a socket no HTTP server will answer on any more (Node's parser gave up, or the
 * request left it: CONNECT, a WebSocket handshake), in the envelope, with one unit of the client's rate
 * budget and one log line; then closes the connection lingeringly.
 */
export function refuseOnSocket(
  deps: EarlyErrorDeps,
  socket: Socket,
  refusal: Refusal,
  { errorCode, withBody = true, headers: extra = {} }: RawRefusalOptions,
): void {
  const requestId = newId('request');
  const ip = socket.remoteAddress ?? 'unknown';
  const secure = (socket as Socket & { encrypted?: boolean }).encrypted === true;
  const answer = budgeted(deps, ip, refusal).then(({ refusal: final, headers }) => {
    deps.logger.info(
      { request_id: requestId, status: statusOf(final.code), ip, error_code: errorCode },
      'malformed request refused',
    );
    const body = JSON.stringify(envelopeOf(requestId, final));
    return rawResponse(
      statusOf(final.code),
      { ...baseHeaders(requestId, secure), ...extra, ...headers },
      body,
      withBody,
    );
  });
  closeLingering(socket, answer);
}

interface RawRefusalOptions {
  /** What the log line names as the cause. */
  errorCode: string | undefined;
  /** False for a HEAD, whose answer has no body. */
  withBody?: boolean;
  headers?: Record<string, string>;
}

/** Methods some route of the API answers; CONNECT is none of them. */
const API_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];

/**
 * A server's `connect` listener. Node hands a CONNECT request to it instead of to the app, and without
 * one it drops the connection unanswered. Nimbus is no proxy: 405 in the envelope, like any method a
 * route does not take (over plain HTTP, the HTTPS refusal every plain request gets).
 */
export function connectRefusalHandler(deps: EarlyErrorDeps) {
  return (request: IncomingMessage, socket: Socket): void => {
    if (socket.destroyed || isLingering(socket)) return;
    const secure = (socket as Socket & { encrypted?: boolean }).encrypted === true;
    if (!secure) {
      refuseOnSocket(deps, socket, httpsRefusal(request.headers), { errorCode: 'CONNECT' });
      return;
    }
    const refusal: Refusal = {
      code: 'method_not_allowed',
      message: 'CONNECT is not supported: this is an API server, not a proxy',
      details: { method: 'CONNECT', allowed_values: API_METHODS },
    };
    refuseOnSocket(deps, socket, refusal, {
      errorCode: 'CONNECT',
      headers: { allow: API_METHODS.join(', ') },
    });
  };
}
