/**
 * Closing a connection whose client is still sending makes the kernel answer the unread bytes with a
 * reset, and a reset may destroy the answer before the client has read it (RFC 9112 §9.6): a client
 * that writes its whole body before reading (most do) then sees "connection reset" instead of our 413.
 * So connections closed with a request body unread close as nginx's lingering close does: the answer
 * goes out, then our side half-closes (FIN; close_notify on TLS), then whatever still arrives is read and
 * thrown away, until the client closes too, is quiet for a while, or has sent too much. Only then is the
 * socket destroyed, with nothing unread left to provoke a reset.
 */
import type { Socket } from 'node:net';

/** Longest the drain lasts in all (nginx's lingering_time is 30 s; our bodies are small). */
export const LINGER_MAX_MS = 10_000;
/** Longest the client may stay quiet while we drain (nginx's lingering_timeout). */
export const LINGER_IDLE_MS = 2_000;
/** Most we read and discard; a client still sending past this is not waiting for an answer. */
export const LINGER_MAX_BYTES = 16 * 1024 * 1024;

const lingering = new WeakSet<Socket>();

/** True once a socket is being closed this way: nothing more may be written to it. */
export function isLingering(socket: Socket): boolean {
  return lingering.has(socket);
}

/**
 * Writes `last` (if any, once it is ready), half-closes and drains `socket`, then destroys it. The HTTP
 * parser is detached at once: the rest of the request is not a request any more, just bytes to discard.
 */
export function closeLingering(socket: Socket, last?: string | Promise<string | undefined>): void {
  if (lingering.has(socket)) return;
  lingering.add(socket);
  if (socket.destroyed) return;
  // Node's own listeners would feed the parser (and report its errors again) or close at once.
  socket.removeAllListeners('data');
  socket.removeAllListeners('end');
  socket.removeAllListeners('timeout');
  socket.setTimeout(0);
  socket.on('error', () => {});

  let drained = 0;
  const close = () => {
    clearTimeout(overall);
    clearTimeout(idle);
    socket.destroy();
  };
  const overall = setTimeout(close, LINGER_MAX_MS);
  const idle = setTimeout(close, LINGER_IDLE_MS);
  socket.on('data', (chunk: Buffer) => {
    drained += chunk.length;
    if (drained > LINGER_MAX_BYTES) return close();
    idle.refresh();
  });
  socket.once('end', close);
  socket.once('close', () => {
    clearTimeout(overall);
    clearTimeout(idle);
  });
  socket.resume();
  void Promise.resolve(last).then((text) => {
    if (socket.destroyed) return;
    if (text === undefined) socket.end();
    else socket.end(text);
  });
}

/**
 * Makes Node close this socket lingeringly when it would close it: Node's HTTP server ends a
 * `Connection: close` exchange with `socket.destroySoon()`, which destroys the socket as soon as the
 * answer is flushed, unread body or not.
 */
export function lingerOnClose(socket: Socket): void {
  (socket as Socket & { destroySoon: () => void }).destroySoon = () => closeLingering(socket);
}
