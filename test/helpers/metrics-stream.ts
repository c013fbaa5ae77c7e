/**
 * A metric stream client for tests: the real `ws` client over WSS, trusting the test server's
 * certificate, with every message it receives queued so a test can wait for the next one of a type.
 */
import { readFileSync } from 'node:fs';
import WebSocket from 'ws';
import type { TestServer } from './server.js';

export type StreamMessage = Record<string, any>;

export interface StreamClient {
  socket: WebSocket;
  /** Every message received so far, in order. */
  received: StreamMessage[];
  /** The next message of this type (from those not taken yet), within `timeoutMs`. */
  next(type: string, timeoutMs?: number): Promise<StreamMessage>;
  send(message: unknown): void;
  /** Resolves with the close code and reason once the socket has closed. */
  closed: Promise<{ code: number; reason: string }>;
  close(): void;
}

export function openStream(
  server: TestServer,
  path: string,
  options: { key?: string; headers?: Record<string, string> } = {},
): StreamClient {
  const headers: Record<string, string> = { ...options.headers };
  if (options.key) headers.authorization = `Bearer ${options.key}`;
  const socket = new WebSocket(`wss://127.0.0.1:${server.running.httpsPort}${path}`, {
    ca: readFileSync(server.running.certFile),
    headers,
  });
  const received: StreamMessage[] = [];
  const taken = new Set<StreamMessage>();
  const waiters: (() => void)[] = [];
  socket.on('message', (data) => {
    received.push(JSON.parse(data.toString()) as StreamMessage);
    for (const wake of waiters.splice(0)) wake();
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) => {
    socket.on('close', (code, reason) => {
      resolve({ code, reason: reason.toString() });
      for (const wake of waiters.splice(0)) wake();
    });
  });
  socket.on('error', () => {
    // A refused or reset connection also closes; the close code says what happened.
  });
  return {
    socket,
    received,
    closed,
    async next(type, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = received.find((m) => m.type === type && !taken.has(m));
        if (found) {
          taken.add(found);
          return found;
        }
        const left = deadline - Date.now();
        if (left <= 0 || socket.readyState === WebSocket.CLOSED) {
          throw new Error(
            `no ${type} message within ${timeoutMs} ms (received: ${JSON.stringify(received).slice(0, 500)})`,
          );
        }
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, left);
          waiters.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
    },
    send(message) {
      const text = typeof message === 'string' ? message : JSON.stringify(message);
      if (socket.readyState === WebSocket.OPEN) socket.send(text);
      else socket.once('open', () => socket.send(text));
    },
    close() {
      socket.close();
    },
  };
}

/** Opens a stream and waits for its close: the code and reason it was refused with. */
export async function refusal(
  server: TestServer,
  path: string,
  options: { key?: string; headers?: Record<string, string>; first?: unknown } = {},
): Promise<{ code: number; reason: string; error: StreamMessage | undefined }> {
  const client = openStream(server, path, options);
  if (options.first !== undefined) client.send(options.first);
  const { code, reason } = await client.closed;
  return { code, reason, error: client.received.find((m) => m.type === 'error') };
}
