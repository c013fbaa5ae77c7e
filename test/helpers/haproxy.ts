/**
 * HAProxy (the Debian package) in front of `nimbus serve` replicas, as docs/operations.md sets it up:
 * TLS terminated at the balancer with the given certificate, requests forwarded over plain HTTP to each
 * replica's HTTP port with X-Forwarded-For and X-Forwarded-Proto: https (the replicas trust them through
 * NIMBUS_TRUST_PROXY=127.0.0.1). Round robin per request; a replica is taken out after two failed health
 * checks (GET /readyz every 200 ms, each given 3 s: on a loaded machine a busy replica answers slowly,
 * and one slow answer must not leave the balancer with no server) and a request whose connection is
 * refused is sent to another.
 *
 * The configuration is generated on free ports and HAProxy runs in the foreground as a child process
 * (`-db`), so closing the helper stops it.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { collectOutput } from './child-server.js';
import { waitFor } from './common.js';
import { freePort } from './server.js';

export interface Backend {
  name: string;
  /** The replica's plain-HTTP port (NIMBUS_HTTP_PORT). */
  httpPort: number;
}

export interface Balancer {
  url: string;
  /** HAProxy's own view of each backend server (UP/DOWN), from its stats socket. */
  serverStates(): Promise<Record<string, string>>;
  output(): string;
  close(): Promise<void>;
}

/** The haproxy binary, or null when it is not installed (npm test's set-up installs it as root). */
export function haproxyBinary(): string | null {
  for (const candidate of ['/usr/sbin/haproxy', '/usr/bin/haproxy', '/usr/local/sbin/haproxy']) {
    try {
      execFileSync(candidate, ['-v'], { stdio: 'ignore' });
      return candidate;
    } catch {
      // not here
    }
  }
  return null;
}

export function haproxyConfig(options: {
  port: number;
  pemFile: string;
  statsSocket: string;
  backends: readonly Backend[];
}): string {
  const servers = options.backends.map(
    (b) => `  server ${b.name} 127.0.0.1:${b.httpPort} check inter 200ms fall 2 rise 2`,
  );
  return [
    'global',
    `  stats socket ${options.statsSocket} mode 600 level admin`,
    '  maxconn 2000',
    'defaults',
    '  mode http',
    '  option forwardfor',
    '  option redispatch',
    '  retries 3',
    '  timeout connect 2s',
    '  timeout check 3s',
    '  timeout client 60s',
    '  timeout server 60s',
    'frontend nimbus_https',
    `  bind 127.0.0.1:${options.port} ssl crt ${options.pemFile}`,
    '  http-request set-header X-Forwarded-Proto https',
    '  default_backend nimbus_replicas',
    'backend nimbus_replicas',
    '  balance roundrobin',
    // Behind the balancer the replicas speak plain HTTP, which Nimbus answers only when a trusted proxy
    // says the client used HTTPS: the health check says so too.
    '  option httpchk',
    '  http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host localhost hdr X-Forwarded-Proto https',
    '  http-check expect status 200',
    ...servers,
    '',
  ].join('\n');
}

/** Starts HAProxy on a free port in front of `backends`; resolves once it serves and sees them all UP. */
export async function startBalancer(options: {
  binary: string;
  certFile: string;
  keyFile: string;
  backends: readonly Backend[];
}): Promise<Balancer> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-haproxy-'));
  const pemFile = path.join(dir, 'balancer.pem');
  // Certificate then key, each on lines of its own (the generated PEM files may lack a final newline).
  const pem = [options.certFile, options.keyFile].map((file) => `${readFileSync(file, 'utf8').trim()}\n`);
  writeFileSync(pemFile, pem.join(''), { mode: 0o600 });
  const statsSocket = path.join(dir, 'stats.sock');
  const port = await freePort();
  const configFile = path.join(dir, 'haproxy.cfg');
  writeFileSync(configFile, haproxyConfig({ port, pemFile, statsSocket, backends: options.backends }));
  try {
    execFileSync(options.binary, ['-c', '-q', '-f', configFile], { stdio: 'pipe' });
  } catch (error) {
    const stderr = (error as { stderr?: Buffer }).stderr?.toString() ?? '';
    throw new Error(`haproxy refused its configuration:\n${stderr}\n${readFileSync(configFile, 'utf8')}`);
  }

  const child: ChildProcess = spawn(options.binary, ['-db', '-f', configFile], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = collectOutput(child);
  const serverStates = async (): Promise<Record<string, string>> => {
    // `show servers state`: one line per server; field 4 is the name, field 6 the operational state
    // (2 = running/UP, 0 = stopped/DOWN).
    const text = await askStats(statsSocket, 'show servers state nimbus_replicas');
    const states: Record<string, string> = {};
    for (const line of text.split('\n')) {
      const fields = line.trim().split(/\s+/);
      if (fields.length > 6 && /^\d+$/.test(fields[0] ?? '')) {
        states[fields[3] as string] = fields[5] === '2' ? 'UP' : 'DOWN';
      }
    }
    return states;
  };
  const close = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const gone = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await gone;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitFor(
      'HAProxy sees every replica UP',
      async () => {
        if (child.exitCode !== null) throw new Error(`haproxy exited:\n${output()}`);
        try {
          const states = await serverStates();
          return options.backends.every((b) => states[b.name] === 'UP') ? true : undefined;
        } catch {
          return undefined;
        }
      },
      { timeoutMs: 15_000, intervalMs: 100, lastSeen: output },
    );
  } catch (error) {
    await close();
    throw error;
  }
  return { url: `https://127.0.0.1:${port}`, serverStates, output, close };
}

/** One command on HAProxy's stats socket; resolves with its whole answer (it closes after answering). */
function askStats(socket: string, command: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const connection = createConnection(socket);
    let answer = '';
    connection.on('data', (chunk: Buffer) => {
      answer += chunk.toString();
    });
    connection.on('end', () => resolve(answer));
    connection.on('error', reject);
    connection.end(`${command}\n`);
  });
}
