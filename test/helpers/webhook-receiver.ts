/**
 * A real HTTPS webhook receiver for the tests: its own self-signed certificate (handed to Nimbus as
 * NIMBUS_WEBHOOK_CA_FILE), every request kept with its raw body and headers, and answers the test
 * scripts per path (status, delay, a redirect).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { loadOrCreateTls } from '../../src/platform/http/tls.js';

export interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
}

export interface Answer {
  status: number;
  delayMs?: number;
  headers?: Record<string, string>;
  body?: string;
}

export interface Receiver {
  /** `https://127.0.0.1:<port>` */
  origin: string;
  caFile: string;
  received: Received[];
  /** What requests to `path` are answered with from now on (default 200). */
  answer(path: string, answer: Answer | ((request: Received) => Answer)): void;
  receivedAt(path: string): Received[];
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-receiver-'));
  const tls = await loadOrCreateTls({ dataDir: dir, files: null, host: '127.0.0.1' });
  const received: Received[] = [];
  const answers = new Map<string, Answer | ((request: Received) => Answer)>();
  const server = https.createServer({ key: tls.key, cert: tls.cert }, (request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const entry: Received = {
        path: request.url ?? '',
        headers: request.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        at: Date.now(),
      };
      received.push(entry);
      const scripted = answers.get(entry.path);
      const answer = typeof scripted === 'function' ? scripted(entry) : (scripted ?? { status: 200 });
      const send = () => {
        if (response.destroyed) return;
        response.writeHead(answer.status, answer.headers ?? { 'content-type': 'text/plain' });
        response.end(answer.body ?? 'ok');
      };
      if (answer.delayMs) setTimeout(send, answer.delayMs);
      else send();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    origin: `https://127.0.0.1:${port}`,
    caFile: tls.certFile,
    received,
    answer: (at, answer) => answers.set(at, answer),
    receivedAt: (at) => received.filter((r) => r.path === at),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
