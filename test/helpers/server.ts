/**
 * Starts the real server (main.ts) for a test: HTTPS on an ephemeral port, the plain-HTTP listener,
 * a temporary data dir, and SQLite or a fresh PostgreSQL database. Requests go over real TLS, trusting
 * the certificate the server generated.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll } from 'vitest';
import { runAdmin } from '../../src/cli/admin.js';
import { type RunningServer, startServer } from '../../src/main.js';
import { type Config, loadConfig } from '../../src/platform/config.js';
import type { Clock } from '../../src/platform/domain/clock.js';
import { createLogger } from '../../src/platform/logger.js';
import { BOOTSTRAP_KEY_FILE } from '../../src/resources/account/bootstrap.js';
import { createPostgresDatabase, databaseEnv, type StoreKind } from './backends.js';
import { qemuProcessesOf, UNDER_QEMU } from './driver.js';
import { assertMatchesContract } from './openapi-contract.js';

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

export interface Reply<T = any> {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: T;
  text: string;
}

export interface RequestOptions {
  key?: string | null;
  body?: unknown;
  /** Sent as-is instead of JSON-encoding `body`. */
  rawBody?: string | Buffer;
  headers?: Record<string, string>;
  /**
   * The request goes to a listener that is not the API (the metadata service, the metrics port), so its
   * answer is not held to openapi/v1.json. Every other answer is, and fails the request when it departs.
   */
  notApi?: true;
}

export interface TestServer {
  url: string;
  httpUrl: string | null;
  config: Config;
  running: RunningServer;
  /** The bootstrap account's key (enterprise plan, every permission); '' on a replica that did not bootstrap. */
  rootKey: string;
  /** Captured log output (every line the server wrote). */
  logs(): string;
  request<T = any>(method: string, path: string, options?: RequestOptions): Promise<Reply<T>>;
  /** Runs `bin/nimbus admin …` in process on this server's own backends; returns parsed --json output. */
  admin<T = any>(...args: string[]): Promise<T>;
  /** Creates an account; returns its id and all-permissions key. */
  createAccount(options?: {
    plan?: string;
    perHour?: number;
    burst?: number;
  }): Promise<{ id: string; key: string }>;
  close(): Promise<void>;
}

export interface StartOptions {
  store?: StoreKind;
  /** Reuse a database (replicas). */
  databaseUrl?: string;
  dataDir?: string;
  env?: Record<string, string>;
  clock?: Clock;
  /** Jobs run only when the test calls `running.backends.jobs.runDue()` (pair with a ManualClock). */
  steppedJobs?: boolean;
}

let accountCounter = 0;

/**
 * The qemu driver's settings for a suite server under NIMBUS_TEST_DRIVER=qemu: the cached guest image
 * (as npm test's set-up builds it) and a block of SSH ports starting at a port free now (the driver skips any
 * taken meanwhile).
 */
async function qemuEnv(): Promise<Record<string, string>> {
  const first = Math.min(await freePort(), 65_435);
  return {
    NIMBUS_DRIVER: 'qemu',
    NIMBUS_IMAGE_DIR: process.env.NIMBUS_TEST_IMAGE_DIR ?? '/var/cache/nimbus-images',
    NIMBUS_QEMU_SSH_PORTS: `${first}-${first + 100}`,
    // Probed once for the run (helpers/qemu-accel.ts), when the run has a global setup that does.
    ...(process.env.NIMBUS_TEST_QEMU_ACCEL ? { NIMBUS_QEMU_ACCEL: process.env.NIMBUS_TEST_QEMU_ACCEL } : {}),
  };
}

function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // exited meanwhile
  }
}

export function sendRequest<T = any>(
  baseUrl: string,
  ca: Buffer | null,
  method: string,
  urlPath: string,
  options: RequestOptions = {},
): Promise<Reply<T>> {
  const url = new URL(urlPath, baseUrl);
  const headers: Record<string, string> = { ...options.headers };
  if (options.key) headers.authorization = `Bearer ${options.key}`;
  let payload: string | Buffer | undefined = options.rawBody;
  if (payload === undefined && options.body !== undefined) {
    payload = JSON.stringify(options.body);
    headers['content-type'] ??= 'application/json';
  }
  // Node frames a body of GET, HEAD or DELETE with neither length nor chunks, so the server would read it
  // as the start of the next request: say its length, as clients that send such bodies do.
  if (payload !== undefined) headers['content-length'] ??= String(Buffer.byteLength(payload));
  const transport = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = transport.request(
      url,
      {
        method,
        headers,
        ...(url.protocol === 'https:' ? { ca: ca ?? undefined, servername: 'localhost' } : {}),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let body: unknown = text;
          try {
            body = text.length > 0 ? JSON.parse(text) : undefined;
          } catch {
            // not JSON: keep the text
          }
          const reply = { status: res.statusCode ?? 0, headers: res.headers, body: body as T, text };
          try {
            if (!options.notApi) assertMatchesContract(method, url, reply);
          } catch (error) {
            reject(error);
            return;
          }
          resolve(reply);
        });
      },
    );
    req.on('error', reject);
    if (payload !== undefined) req.write(payload);
    req.end();
  });
}

export async function startTestServer(options: StartOptions = {}): Promise<TestServer> {
  const dataDir = options.dataDir ?? mkdtempSync(path.join(os.tmpdir(), 'nimbus-test-'));
  const ownsDataDir = options.dataDir === undefined;
  let dropDatabase: (() => Promise<void>) | null = null;
  let databaseUrl = options.databaseUrl;
  if (!databaseUrl && options.store === 'postgres') {
    const database = await createPostgresDatabase();
    databaseUrl = database.url;
    dropDatabase = database.drop;
  }
  let captured = '';
  const sink = new Writable({
    write(chunk, _encoding, done) {
      captured += chunk.toString();
      done();
    },
  });
  // freePort() cannot reserve a port: another process may take it before the server binds, so a
  // start that loses that race is retried with new ports.
  let config: Config | undefined;
  let running: RunningServer | undefined;
  // NIMBUS_TEST_DRIVER=qemu (helpers/driver.ts): real VMs, unless the suite names its driver itself.
  const qemu = UNDER_QEMU && options.env?.NIMBUS_DRIVER === undefined;
  for (let attempt = 1; running === undefined; attempt++) {
    const env: Record<string, string> = {
      ...(qemu ? await qemuEnv() : {}),
      NIMBUS_DATA_DIR: dataDir,
      NIMBUS_HTTPS_PORT: '0',
      NIMBUS_HTTP_PORT: String(await freePort()),
      NIMBUS_METRICS_PORT: String(await freePort()),
      NIMBUS_METADATA_PORT: String(await freePort()),
      // Simulated boots take 8 ms instead of 8 s; suites that step time themselves use a manual clock.
      NIMBUS_SIM_SPEEDUP: '1000',
      NIMBUS_LOG_LEVEL: 'info',
      ...databaseEnv(databaseUrl, options.env),
      ...options.env,
    };
    config = loadConfig(env);
    const logger = createLogger(config.logLevel, sink);
    try {
      running = await startServer(config, {
        logger,
        ...(options.clock ? { clock: options.clock } : {}),
        steppedJobs: options.steppedJobs === true,
      });
    } catch (error) {
      if ((error as { code?: string }).code !== 'EADDRINUSE' || attempt >= 5) throw error;
    }
  }
  if (!config) throw new Error('unreachable');
  const ca = readFileSync(running.certFile);
  const url = `https://127.0.0.1:${running.httpsPort}`;
  // Only the replica that created the bootstrap account has its key file.
  const keyFile = path.join(dataDir, BOOTSTRAP_KEY_FILE);
  const rootKey = existsSync(keyFile) ? readFileSync(keyFile, 'utf8').trim() : '';

  const server: TestServer = {
    url,
    httpUrl: running.httpPort ? `http://127.0.0.1:${running.httpPort}` : null,
    config,
    running,
    rootKey,
    logs: () => captured,
    request: (method, urlPath, requestOptions) => sendRequest(url, ca, method, urlPath, requestOptions),
    admin: async (...args) => {
      const lines: string[] = [];
      await runAdmin([...args, '--json'], config, { out: (line) => lines.push(line) }, running.backends);
      return JSON.parse(lines.join('\n'));
    },
    createAccount: async (accountOptions = {}) => {
      accountCounter += 1;
      const email = `user${accountCounter}-${Date.now()}-${process.pid}@example.com`;
      const created = await server.admin<{ account_id: string; api_key: string }>(
        'create-account',
        '--email',
        email,
        '--plan',
        accountOptions.plan ?? 'professional',
      );
      if (accountOptions.perHour !== undefined || accountOptions.burst !== undefined) {
        await server.admin(
          'set-rate-limit',
          '--account',
          created.account_id,
          '--per-hour',
          String(accountOptions.perHour ?? 10_000),
          '--burst',
          String(accountOptions.burst ?? 200),
        );
      }
      return { id: created.account_id, key: created.api_key };
    },
    close: async () => {
      await running.close();
      // The qemu driver leaves its VMs running when the server stops (a restart adopts them); the
      // suite's data dir and its VMs end here together.
      if (qemu && ownsDataDir) for (const pid of qemuProcessesOf(dataDir)) killQuietly(pid);
      if (dropDatabase) await dropDatabase();
      if (ownsDataDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return server;
}

/**
 * One server for the enclosing `describe` block: started before its first test, closed after its last.
 * Returns a stand-in that forwards to that server, so a suite declares it in one line and uses it as
 * the server itself.
 */
export function serverForSuite(options: StartOptions = {}): TestServer {
  let started: TestServer | undefined;
  beforeAll(async () => {
    started = await startTestServer(options);
  });
  afterAll(async () => {
    await started?.close();
  });
  return new Proxy({} as TestServer, {
    get(_target, property) {
      if (!started) throw new Error('the suite server is used before beforeAll started it');
      return started[property as keyof TestServer];
    },
  });
}
