/**
 * The real server as a child process (`node bin/nimbus serve`), for tests that must kill it the hard way
 * (SIGKILL) and start another on the same data dir and database. bin/nimbus runs the compiled code in
 * dist/, so these suites need `npm run build` (npm test's pretest does it); `assertBuilt()` fails with
 * that advice instead of testing stale code.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { databaseEnv } from './backends.js';
import { sleep } from './common.js';
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

/** The environment of an operator's shell, minus any NIMBUS_* settings of the test runner itself. */
function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('NIMBUS_')));
  return { ...env, ...extra };
}

async function spawnOnce(options: ChildServerOptions): Promise<ChildServer | 'port-taken'> {
  const httpsPort = await freePort();
  const httpPort = await freePort();
  const env = childEnv({
    NIMBUS_DATA_DIR: options.dataDir,
    NIMBUS_HTTPS_PORT: String(httpsPort),
    NIMBUS_HTTP_PORT: String(httpPort),
    NIMBUS_METRICS_PORT: String(await freePort()),
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
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const gone = exited(child);
  const url = `https://127.0.0.1:${httpsPort}`;
  const certFile = path.join(options.dataDir, 'tls', 'cert.pem');
  const deadline = Date.now() + (options.startTimeoutMs ?? 20_000);
  let ca: Buffer | null = null;
  let lastError = '';
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      if (/EADDRINUSE/.test(output)) return 'port-taken';
      throw new Error(`the server exited (${child.exitCode ?? child.signalCode}) before serving:\n${output}`);
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      await gone;
      throw new Error(
        `the server did not answer /healthz within the time allowed (${lastError}):\n${output}`,
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
    rootKey,
    output: () => output,
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
