/**
 * What the API's listeners (HTTPS, and the plain-HTTP one that refuses) allow a client before Fastify
 * sees a request: header size and count for Node's parser, a deadline for a whole request (line,
 * headers and body), and a cap on the connections one address holds open at once. A client that sends
 * a body at one byte per 5 s, or opens connections without end, would otherwise hold the server's
 * sockets and memory for as long as it likes (issue 29).
 */
import type http from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { PARSER_MAX_HEADER_BYTES, PARSER_MAX_HEADER_COUNT } from './plugins/transport.js';

export interface ListenerLimits {
  /** Longest a request may take to arrive in full; past it the answer is 408 (early-errors.ts). */
  requestTimeoutMs: number;
  /** Connections one client address may hold open at once on a listener; 0: no cap. */
  maxConnectionsPerAddress: number;
}

/** Between two refusal log lines, however many connections were refused meanwhile. */
const REFUSAL_LOG_INTERVAL_MS = 60_000;

/**
 * Options for http.createServer and https.createServer. Node looks for requests past their deadline
 * only every `connectionsCheckingInterval` (30 s by default, so a 30 s deadline could take a minute):
 * look four times per deadline, between 250 ms and 5 s apart.
 */
export function parserOptions(limits: ListenerLimits): http.ServerOptions {
  return {
    maxHeaderSize: PARSER_MAX_HEADER_BYTES,
    requestTimeout: limits.requestTimeoutMs,
    // The headers are part of the request: one deadline for all of it (Node wants this ≤ requestTimeout).
    headersTimeout: limits.requestTimeoutMs,
    connectionsCheckingInterval: Math.min(5_000, Math.max(250, Math.floor(limits.requestTimeoutMs / 4))),
    // Node's own answer to a request without Host is a bare 400; the transport hook refuses it in the envelope.
    requireHostHeader: false,
  };
}

/**
 * Applies what cannot be given to createServer: Node's header-count limit (it drops the lines past it
 * silently; the transport plugin refuses a request that reaches it) and the per-address cap. A
 * connection over the cap is closed as it arrives, before its TLS handshake (the costly part): an answer
 * in the envelope would need that handshake first. Refusals are logged at most once a minute.
 */
export function limitListener<T extends http.Server>(server: T, limits: ListenerLimits, logger: Logger): T {
  server.maxHeadersCount = PARSER_MAX_HEADER_COUNT;
  const cap = limits.maxConnectionsPerAddress;
  if (cap <= 0) return server;
  const open = new Map<string, number>();
  let refused = 0;
  let lastLogMs = 0;
  // Before Node's own listener, so that a refused connection never reaches TLS or the HTTP parser.
  server.prependListener('connection', (socket: Socket) => {
    const address = socket.remoteAddress;
    if (address === undefined) return;
    const count = open.get(address) ?? 0;
    if (count >= cap) {
      socket.destroy();
      refused += 1;
      const nowMs = Date.now();
      if (nowMs - lastLogMs >= REFUSAL_LOG_INTERVAL_MS) {
        logger.warn(
          { ip: address, open: count, cap, refused },
          'refused connections over the per-address cap (NIMBUS_MAX_CONNECTIONS_PER_ADDRESS)',
        );
        lastLogMs = nowMs;
        refused = 0;
      }
      return;
    }
    open.set(address, count + 1);
    socket.once('close', () => {
      const left = (open.get(address) ?? 1) - 1;
      if (left === 0) open.delete(address);
      else open.set(address, left);
    });
  });
  return server;
}
