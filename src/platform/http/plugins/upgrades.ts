/**
 * WebSocket handshakes, judged before @fastify/websocket sees them, so that every refusal is an answer
 * in the error envelope rather than `ws`'s bare text/html 400 or, on a route that is no stream, a `101`
 * followed at once by a close frame.
 *
 * - An upgrade to a route that is not a stream (or with another method than GET) is a 400 naming the
 *   Upgrade header. It is not served as a plain request: Node hands an upgrade's connection over
 *   without its body, and the request asked for a protocol this route does not speak.
 * - An upgrade to a stream needs `Upgrade: websocket`, a valid Sec-WebSocket-Key and a version `ws`
 *   speaks; otherwise a 400 naming the header.
 * These run after the guard (a preParsing hook), so an upgrade to a route that is not a stream spends
 * the caller's budget like the plain request would. Any answer but a 101 closes the connection, which
 * left Node's HTTP parser with the upgrade: lingeringly, so the answer is not lost to a reset.
 */
import type { Socket } from 'node:net';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { InvalidRequest } from '../../errors.js';
import { type EarlyErrorDeps, refuseOnSocket } from '../early-errors.js';
import { closeLingering } from '../lingering-close.js';

/** RFC 6455 §4.1: the key is 16 random bytes in base64, so 22 characters and "==" (ws checks the same). */
const WEBSOCKET_KEY = /^[+/0-9A-Za-z]{22}==$/;
/** The handshake versions `ws` accepts: 13 (RFC 6455) and 8 (its last draft). */
export const WEBSOCKET_VERSIONS = ['13', '8'];

function header(request: FastifyRequest, name: string): string | null {
  const value = request.headers[name];
  return typeof value === 'string' ? value : null;
}

/** Why this upgrade request cannot become a stream, or null when it can. */
function handshakeFault(request: FastifyRequest, isStream: boolean): InvalidRequest | null {
  const upgrade = header(request, 'upgrade');
  if (!isStream || request.method !== 'GET') {
    return new InvalidRequest(
      `${request.method} ${request.url.split('?')[0]} is not a WebSocket stream: send it without the Upgrade header`,
      { field: 'Upgrade', value: upgrade },
    );
  }
  if (upgrade?.toLowerCase() !== 'websocket') {
    return new InvalidRequest('A stream is opened with Upgrade: websocket', {
      field: 'Upgrade',
      value: upgrade,
      allowed_values: ['websocket'],
    });
  }
  const key = header(request, 'sec-websocket-key');
  if (key === null || !WEBSOCKET_KEY.test(key)) {
    return new InvalidRequest(
      'Sec-WebSocket-Key must be 16 random bytes in base64: 24 characters ending in "=="',
      { field: 'Sec-WebSocket-Key', value: key },
    );
  }
  const version = header(request, 'sec-websocket-version');
  if (version === null || !WEBSOCKET_VERSIONS.includes(version.trim())) {
    return new InvalidRequest(`Sec-WebSocket-Version must be ${WEBSOCKET_VERSIONS.join(' or ')}`, {
      field: 'Sec-WebSocket-Version',
      value: version,
      allowed_values: WEBSOCKET_VERSIONS,
    });
  }
  return null;
}

/** Makes the next destroy() of `socket` (the websocket plugin's, once the answer is sent) a lingering close. */
function lingerOnDestroy(socket: Socket): void {
  const destroy = socket.destroy;
  socket.destroy = function (this: Socket, error?: Error) {
    socket.destroy = destroy;
    if (error) return destroy.call(this, error);
    closeLingering(socket);
    return this;
  };
}

/** Registered after @fastify/websocket (which sets `request.ws`) and before any route. */
export const upgradesPlugin = fp<EarlyErrorDeps>(
  async (app: FastifyInstance, deps) => {
    const streams = new Set<string>();
    app.addHook('onRoute', (route) => {
      if (route.websocket || route.wsHandler) streams.add(route.url);
    });

    app.addHook('preParsing', (request, reply, payload, done) => {
      if (!request.ws || request.is404) {
        done(null, payload);
        return;
      }
      const fault = handshakeFault(request, streams.has(request.routeOptions.url ?? ''));
      if (fault === null) {
        done(null, payload);
        return;
      }
      // RFC 6455 §4.4: a refused version is answered with the versions the server speaks.
      if (fault.details?.field === 'Sec-WebSocket-Version')
        reply.header('sec-websocket-version', WEBSOCKET_VERSIONS.join(', '));
      done(fault);
    });

    app.addHook('onSend', (request, reply, payload, done) => {
      if (request.ws) {
        reply.header('connection', 'close');
        lingerOnDestroy(request.raw.socket);
      }
      done(null, payload);
    });

    // Anything else `ws` refuses once the handshake is under way (a malformed Sec-WebSocket-Protocol or
    // -Extensions): in the envelope too, instead of its text/html answer.
    app.websocketServer.on('wsClientError', (error: Error, socket: Socket) => {
      refuseOnSocket(
        deps,
        socket,
        { code: 'invalid_request', message: `WebSocket handshake refused: ${error.message}` },
        { errorCode: 'WS_HANDSHAKE' },
      );
    });
  },
  { name: 'nimbus-upgrades', dependencies: ['@fastify/websocket'] },
);
