/** Health, readiness, Prometheus metrics, API versions, the trusted-proxy rule and graceful shutdown. */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import pg from 'pg';
import { generate } from 'selfsigned';
import { afterAll, describe, expect, it } from 'vitest';
import { startServer } from '../src/main.js';
import { loadConfig } from '../src/platform/config.js';
import { createLogger } from '../src/platform/logger.js';
import { HAVE_POSTGRES, POSTGRES_ADMIN_URL } from './helpers/backends.js';
import { sleep, waitFor } from './helpers/common.js';
import { freePort, sendRequest, serverForSuite, startTestServer } from './helpers/server.js';

describe('operations', () => {
  const server = serverForSuite({ env: { NIMBUS_V1_END_OF_LIFE: '2027-12-31' } });

  it('answers /healthz and /readyz without a key, reporting the address budget without spending it', async () => {
    const health = await server.request('GET', '/healthz');
    expect(health.status).toBe(200);
    expect(health.body.data).toEqual({ status: 'ok' });
    expect(health.headers['x-ratelimit-limit']).toBe('1000');
    const remaining = health.headers['x-ratelimit-remaining'];
    const ready = await server.request('GET', '/readyz');
    expect(ready.status).toBe(200);
    expect(ready.body.data).toEqual({ status: 'ready' });
    expect(ready.headers['x-ratelimit-remaining']).toBe(remaining);
    expect((await server.request('GET', '/healthz')).headers['x-ratelimit-remaining']).toBe(remaining);
  });

  it('exports request counts and latency by route and status on the loopback metrics port', async () => {
    await server.request('GET', '/v1/account', { key: server.rootKey });
    await server.request('GET', '/v1/account');
    const metrics = await sendRequest(
      `http://127.0.0.1:${server.running.metricsPort}`,
      null,
      'GET',
      '/metrics',
      { notApi: true },
    );
    expect(metrics.status).toBe(200);
    expect(metrics.text).toMatch(
      /nimbus_http_requests_total\{route="\/v1\/account",method="GET",status="200"\} \d+/,
    );
    expect(metrics.text).toMatch(
      /nimbus_http_requests_total\{route="\/v1\/account",method="GET",status="401"\} \d+/,
    );
    expect(metrics.text).toMatch(
      /nimbus_http_request_duration_seconds_bucket\{le="0.005",route="\/v1\/account"/,
    );
  });

  it('answers unknown API versions with 404 naming the supported ones, before asking for a key', async () => {
    for (const url of ['/v3/instances', '/v0/account', '/v9']) {
      const reply = await server.request('GET', url);
      expect(reply.status, url).toBe(404);
      expect(reply.body.error.code).toBe('not_found');
      expect(reply.body.error.message).toMatch(/supported versions: v1, v2/);
      expect(reply.body.error.details.supported_versions).toEqual(['v1', 'v2']);
    }
  });

  it('sends Deprecation and Sunset headers for a version with a configured end of life', async () => {
    const reply = await server.request('GET', '/v1/regions', { key: server.rootKey });
    expect(reply.status).toBe(200);
    expect(reply.headers.sunset).toBe('Fri, 31 Dec 2027 00:00:00 GMT');
    // Twelve months' notice: deprecated from 2026-12-31.
    expect(reply.headers.deprecation).toBe(`@${Date.UTC(2026, 11, 31) / 1000}`);
    const health = await server.request('GET', '/healthz');
    expect(health.headers.sunset).toBeUndefined();
  });

  it('keeps an idle keep-alive connection open longer than Node’s 5 s, on both listeners', async () => {
    // A proxy reusing its pooled connection as we close it would get a reset; see KEEP_ALIVE_TIMEOUT_MS.
    const [overTls, overPlain] = await Promise.all([
      twoRequestsOnOneConnection(
        tls.connect({
          host: '127.0.0.1',
          port: server.running.httpsPort,
          ca: readFileSync(server.running.certFile),
          servername: 'localhost',
        }),
        6000,
      ),
      twoRequestsOnOneConnection(net.connect({ host: '127.0.0.1', port: server.running.httpPort! }), 6000),
    ]);
    expect(overTls).toEqual(['HTTP/1.1 200 OK', 'HTTP/1.1 200 OK']);
    expect(overPlain).toHaveLength(2);
  }, 15_000);

  it('sends no deprecation headers when no end of life is configured', async () => {
    const plain = await startTestServer();
    try {
      const reply = await plain.request('GET', '/v1/regions', { key: plain.rootKey });
      expect(reply.status).toBe(200);
      expect(reply.headers.sunset).toBeUndefined();
      expect(reply.headers.deprecation).toBeUndefined();
    } finally {
      await plain.close();
    }
  });
});

describe('data directory', () => {
  it('keeps the database, the bootstrap key and the TLS key readable by the owner only', async () => {
    const server = await startTestServer();
    try {
      const mode = (file: string) => statSync(path.join(server.config.dataDir, file)).mode & 0o777;
      expect(mode('.')).toBe(0o700);
      expect(mode('nimbus.db')).toBe(0o600);
      expect(mode('bootstrap-api-key')).toBe(0o600);
      expect(mode('tls/key.pem')).toBe(0o600);
    } finally {
      await server.close();
    }
  });

  it('releases everything it opened when a start fails (port taken), so the next start works', async () => {
    const first = await startTestServer();
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-failed-start-'));
    try {
      const config = loadConfig({
        NIMBUS_DATA_DIR: dataDir,
        NIMBUS_HTTPS_PORT: String(first.running.httpsPort),
        NIMBUS_HTTP_PORT: '0',
        NIMBUS_METRICS_PORT: '0',
        NIMBUS_METADATA_PORT: '0',
      });
      await expect(startServer(config, { logger: createLogger('silent') })).rejects.toMatchObject({
        code: 'EADDRINUSE',
      });
      const second = await startServer({ ...config, httpsPort: 0 }, { logger: createLogger('silent') });
      await second.close();
    } finally {
      await first.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe.skipIf(!HAVE_POSTGRES)('PostgreSQL connection loss', () => {
  it('keeps serving when PostgreSQL closes its connections (restart, failover, terminate)', async () => {
    const server = await startTestServer({ store: 'postgres' });
    try {
      expect((await server.request('GET', '/v1/account', { key: server.rootKey })).status).toBe(200);
      const database = new URL(server.config.databaseUrl!).pathname.slice(1);
      const admin = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
      await admin.connect();
      const killed = await admin.query(
        'select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()',
        [database],
      );
      await admin.end();
      expect(killed.rowCount).toBeGreaterThan(0);
      // The pool notices the dead idle connections ('error' events) and opens new ones on demand.
      await sleep(200);
      const after = await server.request('GET', '/v1/account/quota', { key: server.rootKey });
      expect(after.status).toBe(200);
      expect((await server.request('GET', '/readyz')).status).toBe(200);
    } finally {
      await server.close();
    }
  });
});

describe('operator-supplied TLS certificate', () => {
  it('serves with NIMBUS_TLS_CERT/NIMBUS_TLS_KEY and generates nothing', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-own-tls-'));
    const pems = await generate([{ name: 'commonName', value: 'api.example.test' }], {
      keyType: 'ec',
      algorithm: 'sha256',
      extensions: [{ name: 'subjectAltName', altNames: [{ type: 2, value: 'localhost' }] }],
    });
    writeFileSync(path.join(dir, 'own-cert.pem'), pems.cert);
    writeFileSync(path.join(dir, 'own-key.pem'), pems.private, { mode: 0o600 });
    const server = await startTestServer({
      env: { NIMBUS_TLS_CERT: path.join(dir, 'own-cert.pem'), NIMBUS_TLS_KEY: path.join(dir, 'own-key.pem') },
    });
    try {
      const reply = await sendRequest(server.url, Buffer.from(pems.cert), 'GET', '/healthz');
      expect(reply.status).toBe(200);
      expect(existsSync(path.join(server.config.dataDir, 'tls'))).toBe(false);
    } finally {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/**
 * Sends `GET /healthz` twice on one connection, `pauseMs` apart, and returns both status lines; rejects
 * if the server closes the connection in between.
 */
async function twoRequestsOnOneConnection(socket: Duplex, pauseMs: number): Promise<string[]> {
  let received = '';
  let closed = false;
  socket.on('data', (chunk: Buffer) => {
    received += chunk.toString('latin1');
  });
  socket.on('close', () => {
    closed = true;
  });
  const request = 'GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: keep-alive\r\n\r\n';
  const responses = () => received.match(/HTTP\/1\.1 \d+ [^\r\n]*/g) ?? [];
  const answered = (count: number) =>
    waitFor(
      `${count} answer(s) on the connection`,
      () => {
        if (closed) throw new Error(`the server closed the connection after ${responses().length} answer(s)`);
        return responses().length >= count ? true : undefined;
      },
      { intervalMs: 10 },
    );
  socket.write(request);
  await answered(1);
  await sleep(pauseMs);
  if (closed) throw new Error(`the server closed the idle connection within ${pauseMs} ms`);
  socket.write(request);
  await answered(2);
  socket.destroy();
  return responses();
}

describe('NIMBUS_TRUST_PROXY', () => {
  it('ignores X-Forwarded-Proto on plain HTTP unless the proxy is trusted', async () => {
    const untrusting = await startTestServer();
    try {
      const reply = await sendRequest(untrusting.httpUrl!, null, 'GET', '/v1/account', {
        key: untrusting.rootKey,
        headers: { 'x-forwarded-proto': 'https' },
      });
      expect(reply.status).toBe(400);
      expect(reply.body.error.message).toMatch(/HTTPS is required/);
    } finally {
      await untrusting.close();
    }
  });

  it('accepts a trusted proxy’s X-Forwarded-Proto: https on the HTTP listener', async () => {
    const trusting = await startTestServer({ env: { NIMBUS_TRUST_PROXY: '127.0.0.1' } });
    try {
      const forwarded = await sendRequest(trusting.httpUrl!, null, 'GET', '/v1/account', {
        key: trusting.rootKey,
        headers: { 'x-forwarded-proto': 'https' },
      });
      expect(forwarded.status).toBe(200);
      expect(forwarded.body.data.plan).toBe('enterprise');
      const direct = await sendRequest(trusting.httpUrl!, null, 'GET', '/v1/account', {
        key: trusting.rootKey,
      });
      expect(direct.status).toBe(400);
    } finally {
      await trusting.close();
    }
  });
});

describe('graceful shutdown', () => {
  const bin = path.resolve(import.meta.dirname, '../bin/nimbus');
  let child: ChildProcess | undefined;
  let dataDir: string;

  afterAll(() => {
    child?.kill('SIGKILL');
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('on SIGTERM stops accepting, finishes the in-flight request, then exits 0', async () => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-shutdown-'));
    const port = await freePort();
    let output = '';
    child = spawn(process.execPath, [bin, 'serve'], {
      env: {
        ...process.env,
        NIMBUS_DATA_DIR: dataDir,
        NIMBUS_HTTPS_PORT: String(port),
        NIMBUS_HTTP_PORT: '0',
        NIMBUS_METRICS_PORT: '0',
        NIMBUS_METADATA_PORT: '0',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout?.on('data', (chunk) => {
      output += chunk;
    });
    child.stderr?.on('data', (chunk) => {
      output += chunk;
    });
    const exited = new Promise<number | null>((resolve) => child?.once('exit', (code) => resolve(code)));

    const base = `https://127.0.0.1:${port}`;
    const up = await waitFor(
      'the server to answer /healthz',
      async () => {
        try {
          const certificate = readFileSync(path.join(dataDir, 'tls/cert.pem'));
          return (await sendRequest(base, certificate, 'GET', '/healthz')).status === 200 ? true : undefined;
        } catch {
          return undefined;
        }
      },
      { timeoutMs: 20_000, intervalMs: 100 },
    ).catch(() => false);
    expect(up, output).toBe(true);
    const ca = readFileSync(path.join(dataDir, 'tls/cert.pem'));
    const key = readFileSync(path.join(dataDir, 'bootstrap-api-key'), 'utf8').trim();

    // A keep-alive connection left idle after one answer: shutdown must close it rather than wait out the
    // keep-alive timeout (72 s).
    const idle = tls.connect({ host: '127.0.0.1', port, ca, servername: 'localhost' });
    const idleClosed = new Promise<void>((resolve) => idle.once('close', () => resolve()));
    idle.write('GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n');
    await new Promise((resolve) => idle.once('data', resolve));

    // An in-flight request: headers and half the body sent before SIGTERM, the rest after it.
    const body = JSON.stringify({ company: 'Finished In Flight' });
    const inFlight = new Promise<{ status: number; text: string; connection: string | undefined }>(
      (resolve, reject) => {
        const req = https.request(
          `${base}/v1/account`,
          {
            method: 'PATCH',
            ca,
            servername: 'localhost',
            headers: {
              authorization: `Bearer ${key}`,
              'content-type': 'application/json',
              'content-length': Buffer.byteLength(body),
            },
          },
          (res) => {
            let text = '';
            res.on('data', (c) => {
              text += c;
            });
            res.on('end', () =>
              resolve({ status: res.statusCode ?? 0, text, connection: res.headers.connection }),
            );
          },
        );
        req.on('error', reject);
        req.write(body.slice(0, 10));
        setTimeout(() => {
          child?.kill('SIGTERM');
          setTimeout(() => req.end(body.slice(10)), 500);
        }, 300);
      },
    );

    const finished = await inFlight;
    expect(finished.status, finished.text).toBe(200);
    expect(JSON.parse(finished.text).data.company).toBe('Finished In Flight');
    // Finished while draining, so its connection closes instead of waiting idle.
    expect(finished.connection).toBe('close');
    await idleClosed;

    // New connections are refused once the server has stopped accepting.
    const fresh = new Promise((resolve, reject) => {
      https
        .get(`${base}/healthz`, { ca, servername: 'localhost', agent: false }, resolve)
        .on('error', reject);
    });
    await expect(fresh).rejects.toThrow(/ECONNREFUSED|ECONNRESET|socket hang up/);
    expect(await exited).toBe(0);
    expect(output).toMatch(/nimbus stopped/);
    expect(output).not.toContain(key);
  });
});
