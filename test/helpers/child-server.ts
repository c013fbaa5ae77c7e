/**
 * The real server as a child process (`node bin/nimbus serve`), for tests that must kill it the hard way
 * (SIGKILL) and start another on the same data dir and database: spawnServer for one process,
 * restartableServer for the kill -9 suites' one server killed and started again. bin/nimbus runs the
 * compiled code in dist/, so these suites need `npm run build` (npm test's pretest does it);
 * `assertBuilt()` fails with that advice instead of testing stale code.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Kysely } from 'kysely';
import { afterAll, beforeAll, expect } from 'vitest';
import { openStore } from '../../src/platform/store/db.js';
import type { Database } from '../../src/platform/store/schema.js';
import { databaseEnv } from './backends.js';
import { sleep, waitFor } from './common.js';
import { freePort, type Reply, type RequestOptions, sendRequest } from './server.js';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const BIN = path.join(ROOT, 'bin', 'nimbus');
const BUILT_ENTRY = path.join(ROOT, 'dist', 'cli', 'main.js');

function newestSource(dir: string): { file: string; mtimeMs: number } {
  let newest = { file: '', mtimeMs: 0 };
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      const inner = newestSource(full);
      if (inner.mtimeMs > newest.mtimeMs) newest = inner;
    } else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts')) {
      const mtimeMs = statSync(full).mtimeMs;
      if (mtimeMs > newest.mtimeMs) newest = { file: full, mtimeMs };
    }
  }
  return newest;
}

/** Throws unless dist/ holds a build at least as new as every source file. */
export function assertBuilt(): void {
  if (!existsSync(BUILT_ENTRY)) {
    throw new Error(`${BUILT_ENTRY} is missing: run "npm run build" first (npm test does it for you)`);
  }
  const built = statSync(BUILT_ENTRY).mtimeMs;
  const newest = newestSource(path.join(ROOT, 'src'));
  if (newest.mtimeMs > built) {
    throw new Error(
      `dist/ is older than ${path.relative(ROOT, newest.file)}: run "npm run build" first (npm test does it for you)`,
    );
  }
}

export interface ChildServerOptions {
  dataDir: string;
  databaseUrl?: string | undefined;
  /** More NIMBUS_* settings (e.g. NIMBUS_SIM_SPEEDUP). */
  env?: Record<string, string>;
  /** How long to wait for /healthz. */
  startTimeoutMs?: number;
}

export interface ChildServer {
  url: string;
  pid: number;
  /** The plain-HTTP port (for a TLS-terminating proxy in front), chosen anew on every start attempt. */
  httpPort: number;
  /** The port of /metrics (NIMBUS_METRICS_PORT): the one `env` names, else chosen like httpPort. */
  metricsPort: number;
  /** The bootstrap account's key, read from `<data dir>/bootstrap-api-key`. */
  rootKey: string;
  /** Everything the child wrote to stdout and stderr. */
  output(): string;
  request<T = any>(method: string, urlPath: string, options?: RequestOptions): Promise<Reply<T>>;
  /** SIGKILL: no shutdown code runs. Resolves once the process is gone. */
  kill(): Promise<void>;
  /** SIGTERM: the graceful shutdown. Resolves once the process is gone. */
  stop(): Promise<void>;
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

/** Everything `child` writes to stdout and stderr, as it arrives. */
export function collectOutput(child: ChildProcess): () => string {
  let output = '';
  const append = (chunk: Buffer) => {
    output += chunk.toString();
  };
  child.stdout?.on('data', append);
  child.stderr?.on('data', append);
  return () => output;
}

/** The environment of an operator's shell, minus any NIMBUS_* settings of the test runner itself. */
function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('NIMBUS_')));
  return { ...env, ...extra };
}

async function spawnOnce(options: ChildServerOptions): Promise<ChildServer | 'port-taken'> {
  const httpsPort = await freePort();
  const httpPort = await freePort();
  const metricsPort = Number(options.env?.NIMBUS_METRICS_PORT ?? (await freePort()));
  const env = childEnv({
    NIMBUS_DATA_DIR: options.dataDir,
    NIMBUS_HTTPS_PORT: String(httpsPort),
    NIMBUS_HTTP_PORT: String(httpPort),
    NIMBUS_METRICS_PORT: String(metricsPort),
    NIMBUS_METADATA_PORT: String(await freePort()),
    NIMBUS_LOG_LEVEL: 'info',
    ...databaseEnv(options.databaseUrl, options.env),
    ...options.env,
  });
  const child = spawn(process.execPath, [BIN, 'serve'], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = collectOutput(child);
  const gone = exited(child);
  const url = `https://127.0.0.1:${httpsPort}`;
  const certFile = path.join(options.dataDir, 'tls', 'cert.pem');
  // A start compiles every route's schemas (about 4 s of one core here); two servers starting beside
  // other suites on two cores have taken over 20 s, so the default leaves room for that.
  const deadline = Date.now() + (options.startTimeoutMs ?? 60_000);
  let ca: Buffer | null = null;
  let lastError = '';
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      if (/EADDRINUSE/.test(output())) return 'port-taken';
      throw new Error(
        `the server exited (${child.exitCode ?? child.signalCode}) before serving:\n${output()}`,
      );
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      await gone;
      throw new Error(
        `the server did not answer /healthz within the time allowed (${lastError}):\n${output()}`,
      );
    }
    if (existsSync(certFile)) {
      try {
        ca ??= readFileSync(certFile);
        const reply = await sendRequest(url, ca, 'GET', '/healthz');
        if (reply.status === 200) break;
        lastError = `HTTP ${reply.status}`;
      } catch (error) {
        lastError = String(error);
        // A certificate read while the child was still writing it: read it again.
        if (/certificate|self.signed|SSL|TLS/i.test(lastError)) ca = null;
      }
    }
    await sleep(25);
  }
  const keyFile = path.join(options.dataDir, 'bootstrap-api-key');
  const rootKey = existsSync(keyFile) ? readFileSync(keyFile, 'utf8').trim() : '';
  const pid = child.pid;
  if (pid === undefined) throw new Error('the child has no pid');
  const signal = async (name: NodeJS.Signals) => {
    if (child.exitCode === null && child.signalCode === null) child.kill(name);
    await gone;
  };
  return {
    url,
    pid,
    httpPort,
    metricsPort,
    rootKey,
    output,
    request: (method, urlPath, requestOptions) => sendRequest(url, ca, method, urlPath, requestOptions),
    kill: () => signal('SIGKILL'),
    stop: () => signal('SIGTERM'),
  };
}

/**
 * Starts `node bin/nimbus serve` on `dataDir` (and `databaseUrl`, when given) with free ports, and
 * resolves once it answers GET /healthz over HTTPS, trusting the certificate in `<data dir>/tls/`.
 * A start that loses a port to another process is retried with new ports.
 */
export async function spawnServer(options: ChildServerOptions): Promise<ChildServer> {
  for (let attempt = 1; ; attempt++) {
    const started = await spawnOnce(options);
    if (started !== 'port-taken') return started;
    if (attempt >= 5) throw new Error('could not find free ports for the server in 5 attempts');
  }
}

/** The runner's default job lease (src/platform/jobs/runner.ts): a job the killed process held waits this long. */
export const JOB_LEASE_MS = 30_000;
/** A step that kills and restarts: its starts and waits, plus a lease to wait out should a kill land in one. */
export const RESTART_STEP_TIMEOUT_MS = 60_000 + JOB_LEASE_MS;

/** A job's row as the killed process left it. */
export interface LeftJob {
  key: string;
  run_at: string;
  lease_owner: string | null;
  lease_until: string | null;
}

export interface RestartableOptions {
  /** NIMBUS_* settings of every start. */
  env?: Record<string, string>;
  startTimeoutMs?: number;
  /** How the process running when the suite ends is ended: SIGKILL (the default) or SIGTERM. */
  atEnd?: 'kill' | 'stop';
}

/** One server at a time on a data dir and database that outlive its processes (kill -9, start again). */
export interface RestartableServer {
  /** Starts a process (none may be running); `env` adds settings for this start only. */
  start(env?: Record<string, string>): Promise<ChildServer>;
  /** The running process; throws when there is none. */
  live(): ChildServer;
  /** SIGKILL the running process. */
  kill(): Promise<void>;
  /**
   * SIGKILL, then what the dead process left: `read` on the store, and the rows of the jobs `jobKeys`
   * (in their order; undefined for one that is gone). A job leased at the kill cannot run again before
   * its lease runs out, so waitForStatus allows that much longer until the next kill.
   */
  killAndRead<T>(
    jobKeys: string[],
    read: (db: Kysely<Database>) => Promise<T>,
  ): Promise<{ left: T; jobs: (LeftJob | undefined)[] }>;
  /** `read` on the store through a connection of its own (while a process serves, or none does). */
  inspect<T>(read: (db: Kysely<Database>) => Promise<T>): Promise<T>;
  /**
   * Polls GET `path` (with the bootstrap key) until its `data.status` is `status`, or for 'gone' until it
   * answers 404; any other answer than 200 fails at once. Returns `data`. Waits `timeoutMs` and any lease
   * the last kill left.
   */
  waitForStatus(path: string, status: string, timeoutMs: number): Promise<Record<string, any>>;
}

/**
 * A RestartableServer on `store` (storeForSuite's, whose database URL is read at each start). It
 * registers the suite's hooks: before, that dist/ is current (assertBuilt); after, the end of the
 * process still running, ahead of the hooks registered before it (storeForSuite's removals).
 */
export function restartableServer(
  store: { readonly dataDir: string; readonly databaseUrl: string | undefined },
  options: RestartableOptions = {},
): RestartableServer {
  let current: ChildServer | null = null;
  let leaseWaitMs = 0;
  beforeAll(() => {
    // bin/nimbus runs dist/: testing an old build would test old code.
    assertBuilt();
  });
  afterAll(async () => {
    await (options.atEnd === 'stop' ? current?.stop() : current?.kill());
  });

  const live = (): ChildServer => {
    if (!current) throw new Error('no server is running');
    return current;
  };
  const kill = async (): Promise<void> => {
    await live().kill();
    current = null;
  };
  const inspect = async <T>(read: (db: Kysely<Database>) => Promise<T>): Promise<T> => {
    const opened = openStore({ databaseUrl: store.databaseUrl, dataDir: store.dataDir });
    try {
      return await read(opened.db as Kysely<Database>);
    } finally {
      await opened.close();
    }
  };

  return {
    async start(env = {}) {
      if (current) throw new Error('a server is running already');
      current = await spawnServer({
        dataDir: store.dataDir,
        databaseUrl: store.databaseUrl,
        env: { ...options.env, ...env },
        ...(options.startTimeoutMs === undefined ? {} : { startTimeoutMs: options.startTimeoutMs }),
      });
      return current;
    },
    live,
    kill,
    inspect,
    async killAndRead(jobKeys, read) {
      await kill();
      const killedAt = Date.now();
      const { left, jobs } = await inspect(async (db) => {
        const rows =
          jobKeys.length === 0
            ? []
            : await db
                .selectFrom('jobs')
                .select(['key', 'run_at', 'lease_owner', 'lease_until'])
                .where('key', 'in', jobKeys)
                .execute();
        return { left: await read(db), jobs: jobKeys.map((key) => rows.find((row) => row.key === key)) };
      });
      // Jobs wait unleased between steps, so a kill rarely lands inside a lease; when it does, the next
      // process can only take the job once the lease has run out.
      leaseWaitMs = Math.max(
        0,
        ...jobs.map((job) => (job?.lease_until ? Date.parse(job.lease_until) - killedAt : 0)),
      );
      return { left, jobs };
    },
    async waitForStatus(path, status, timeoutMs) {
      let last = '';
      return waitFor(
        `${path} to become ${status}`,
        async () => {
          const reply = await live().request('GET', path, { key: live().rootKey });
          if (status === 'gone' && reply.status === 404) return {};
          expect(reply.status, reply.text).toBe(200);
          last = reply.body.data.status;
          return last === status ? (reply.body.data as Record<string, any>) : undefined;
        },
        { timeoutMs: timeoutMs + leaseWaitMs, intervalMs: 50, lastSeen: () => `${last}\n${live().output()}` },
      );
    },
  };
}
