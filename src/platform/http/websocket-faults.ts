/**
 * What happens to an error on an accepted WebSocket (@fastify/websocket's `errorHandler`). Most are the
 * client's doing: a frame over the size limit, a frame that breaks the protocol (ws has then already sent
 * the close frame with the matching code: 1009 too big, 1002 protocol, 1007 bad UTF-8), or a connection
 * reset. Those are no server fault and cost no stack trace: one warn line per client address per
 * FAULT_LOG_WINDOW_MS, however many sockets it spoils, and the socket is left to finish its close so the
 * client reads the code. Anything else is ours: an error line, and the socket is dropped.
 */
import type { FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import type { WebSocket } from 'ws';

export const FAULT_LOG_WINDOW_MS = 60_000;
/** Addresses remembered at most; past it the oldest are forgotten (a log line more, never memory). */
const MAX_REMEMBERED = 10_000;
const CONNECTION_ERRORS = new Set(['ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ECONNABORTED']);

function faultCode(error: unknown): string | null {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return null;
  return code.startsWith('WS_ERR_') || CONNECTION_ERRORS.has(code) ? code : null;
}

export function websocketErrorHandler(logger: Logger, nowMs: () => number = Date.now) {
  /** Address → when its last fault was logged. */
  const lastLogged = new Map<string, number>();
  return (error: Error, socket: WebSocket, request: FastifyRequest): void => {
    const code = faultCode(error);
    if (code === null) {
      logger.error({ err: error, request_id: request.id, path: request.url }, 'WebSocket handler failed');
      socket.terminate();
      return;
    }
    const now = nowMs();
    const last = lastLogged.get(request.ip);
    if (last !== undefined && now - last < FAULT_LOG_WINDOW_MS) return;
    lastLogged.delete(request.ip);
    lastLogged.set(request.ip, now);
    if (lastLogged.size > MAX_REMEMBERED) {
      const oldest = lastLogged.keys().next().value;
      if (oldest !== undefined) lastLogged.delete(oldest);
    }
    logger.warn(
      { client_ip: request.ip, path: request.url.split('?')[0], code, reason: error.message },
      `WebSocket client fault (logged once a minute per address): ${error.message}`,
    );
  };
}
