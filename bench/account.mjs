/**
 * Benchmark of issue #2: an authenticated, rate-limited, logged `GET /v1/account` against the ceiling,
 * a bare `node:https` server answering a fixed small JSON body, in one run with one load generator.
 *
 * How it works: the script builds Nimbus, starts it once on a fresh data dir (which creates the
 * bootstrap account, its key and the self-signed certificate), raises that account's rate limit with
 * `admin set-rate-limit`, and stops it. Then, one after the other and each in its own child process
 * (so the server has a core to itself while autocannon runs here), it measures the bare server (using
 * Nimbus' certificate, so both pay for the same TLS) and the restarted Nimbus (restarted so the raised
 * limit is in effect however long keys stay cached). Both get the same connections, warm-up and
 * duration over keep-alive TLS on 127.0.0.1. Any non-2xx answer, socket error or timeout fails the run.
 * Nimbus logs at info to a file, and the run checks that every measured request left an access-log line
 * and spent rate-limit budget, so neither can be switched off unnoticed. The figures go to stdout and to
 * docs/benchmarks.md.
 *
 * Usage: node bench/account.mjs [--connections N] [--duration S] [--warmup S] [--no-write] [--keep]
 *   --no-write  print the figures only; --keep  leave the temporary data dir (and Nimbus' log) in place
 * Exits 1 when a check fails (non-2xx, errors, logging or rate limiting missing from the path, a revoked
 * key accepted), 0 otherwise: the verdict on the target is reported, not enforced, since it depends on
 * what else the machine is running.
 */
import { fork, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import {
  createReadStream,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const HOST = '127.0.0.1';
const TARGET_RATIO = 0.6;
const RAISED_LIMIT = 100_000_000;
// USER_HZ, the unit of /proc/<pid>/stat times: 100 on every Linux architecture Node supports.
const CLOCK_TICKS_PER_SECOND = 100;
const BARE_BODY = JSON.stringify({ success: true, data: { id: 'acct_bench', name: 'bench' } });
const SELF = fileURLToPath(import.meta.url);
const ROOT = path.resolve(path.dirname(SELF), '..');
const RESULTS_FILE = path.join(ROOT, 'docs', 'benchmarks.md');
const SECTION_START = '<!-- bench/account.mjs: start (generated, do not edit by hand) -->';
const SECTION_END = '<!-- bench/account.mjs: end -->';

// ---------------------------------------------------------------------------------------------------
// Parent mode: the benchmark.
// ---------------------------------------------------------------------------------------------------
async function main() {
  const { values } = parseArgs({
    options: {
      connections: { type: 'string', default: '10' },
      duration: { type: 'string', default: '20' },
      warmup: { type: 'string', default: '5' },
      'no-write': { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
    },
  });
  const settings = {
    connections: positiveInt(values.connections, 'connections'),
    duration: positiveInt(values.duration, 'duration'),
    warmup: positiveInt(values.warmup, 'warmup'),
  };
  const command = ['node bench/account.mjs', ...process.argv.slice(2)].join(' ');
  // Other work on the machine moves both figures; the 1-minute load average before the run says how much.
  const loadAverage = os.loadavg()[0];
  const { default: autocannon } = await import('autocannon');

  step('building Nimbus (npm run build)');
  const build = spawnSync('npm', ['run', '--silent', 'build'], { cwd: ROOT, stdio: 'inherit' });
  if (build.status !== 0) fail('npm run build failed');

  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-bench-'));
  const logFile = path.join(dataDir, 'nimbus.log');
  const children = new Set();
  // fail() exits at once; whatever was started or written still goes away.
  let cleaned = false;
  const cleanUp = () => {
    if (cleaned) return;
    cleaned = true;
    for (const child of children) child.kill('SIGKILL');
    children.clear();
    if (values.keep) step(`kept ${dataDir}`);
    else rmSync(dataDir, { recursive: true, force: true });
  };
  process.once('exit', cleanUp);

  try {
    // 1. First start: bootstrap account, key and certificate; raise the account's limit.
    step(`first start of Nimbus (data dir ${dataDir})`);
    let nimbus = await startNimbus(dataDir, logFile, children);
    const apiKey = readFileSync(path.join(dataDir, 'bootstrap-api-key'), 'utf8').trim();
    const auth = { authorization: `Bearer ${apiKey}` };
    const first = await request(nimbus.port, 'GET', '/v1/account', auth);
    if (first.status !== 200) fail(`GET /v1/account answered ${first.status}: ${first.body}`);
    const accountId = JSON.parse(first.body).data.id;
    const raised = admin(dataDir, [
      'set-rate-limit',
      '--account',
      accountId,
      '--per-hour',
      String(RAISED_LIMIT),
      '--burst',
      String(RAISED_LIMIT),
    ]);
    if (raised.per_hour !== RAISED_LIMIT || raised.burst !== RAISED_LIMIT) {
      fail(`admin set-rate-limit did not apply: ${JSON.stringify(raised)}`);
    }
    await stopChild(nimbus.child, children);

    // 2. The ceiling: a bare node:https server with the same certificate.
    step('bare node:https server');
    const bare = await startBare(dataDir, children);
    const bareUrl = `https://${HOST}:${bare.port}/`;
    await load(autocannon, 'bare warm-up', { url: bareUrl, ...settings, duration: settings.warmup });
    const bareResult = await load(autocannon, 'bare', { url: bareUrl, ...settings }, bare.child.pid);
    await stopChild(bare.child, children);

    // 3. Nimbus, restarted so that no key cached before the limit was raised is still served.
    step('Nimbus: authenticated GET /v1/account');
    nimbus = await startNimbus(dataDir, logFile, children);
    const check = await request(nimbus.port, 'GET', '/v1/account', auth);
    if (check.status !== 200) fail(`GET /v1/account answered ${check.status}: ${check.body}`);
    if (check.headers['x-ratelimit-limit'] !== String(RAISED_LIMIT)) {
      fail(
        `the raised rate limit is not in effect (X-RateLimit-Limit: ${check.headers['x-ratelimit-limit']})`,
      );
    }
    const nimbusUrl = `https://${HOST}:${nimbus.port}/v1/account`;
    const nimbusLoad = { url: nimbusUrl, headers: auth, ...settings };
    await load(autocannon, 'Nimbus warm-up', { ...nimbusLoad, duration: settings.warmup });
    const before = await rateLimitStatus(nimbus.port, auth);
    const nimbusResult = await load(autocannon, 'Nimbus', nimbusLoad, nimbus.child.pid);
    const after = await rateLimitStatus(nimbus.port, auth);
    const revocation = await revokedKeyIsRefused(nimbus.port, auth);
    await stopChild(nimbus.child, children);

    // 4. What was on the path really ran: rate-limit budget spent, one access-log line per request.
    if (after.reset === before.reset) {
      // GET /v1/account/rate-limit peeks without consuming, so the difference is exactly the load.
      const spent = before.remaining - after.remaining;
      if (spent < nimbusResult.requests.total) {
        fail(`only ${spent} requests spent rate-limit budget, ${nimbusResult.requests.total} were answered`);
      }
    }
    const logged = await countAccessLogLines(logFile, accountId);
    const expectedLines = nimbusResult.requests.total;
    if (logged < expectedLines) fail(`${logged} access-log lines for ${expectedLines} measured requests`);
    if (!revocation.refused) fail(`a deleted key was still accepted (status ${revocation.status})`);

    const figures = {
      bare: summarize(bareResult),
      nimbus: summarize(nimbusResult),
    };
    const ratio = figures.nimbus.rps / figures.bare.rps;
    const verdict = ratio >= TARGET_RATIO ? 'met' : 'NOT met';
    const notes = caveats(figures);
    process.stdout.write(
      [
        '',
        line('bare node:https', figures.bare),
        line('Nimbus GET /v1/account', figures.nimbus),
        `ratio ${ratio.toFixed(3)} (target ≥ ${TARGET_RATIO}: ${verdict})`,
        `checks: ${logged} access-log lines, revoked key answered ${revocation.status}`,
        ...notes,
        '',
      ].join('\n'),
    );
    if (!values['no-write']) {
      writeResults({ command, settings, figures, ratio, verdict, logged, revocation, loadAverage, notes });
      step(`wrote ${path.relative(ROOT, RESULTS_FILE)}`);
    }
    // A report, not a gate: the exit code says whether the run was sound (every answer 2xx, logging and
    // rate limiting on the path), and the verdict on the target is printed and written above.
  } finally {
    cleanUp();
  }
}

function positiveInt(value, name) {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) fail(`--${name} must be a positive whole number`);
  return n;
}

function step(message) {
  process.stderr.write(`[bench] ${message}\n`);
}

function fail(message) {
  process.stderr.write(`[bench] FAILED: ${message}\n`);
  process.exit(1);
}

function line(name, f) {
  const cpu = f.cpuShare === null ? '' : `  server CPU ${cpuText(f)}`;
  return `${name.padEnd(24)} ${fmt(f.rps)} req/s  p50 ${f.p50} ms  p99 ${f.p99} ms${cpu}`;
}

function cpuText(f) {
  if (f.cpuShare === null) return 'n/a';
  return `${Math.round(f.cpuShare * 100)}% of a core, ${f.cpuUsPerRequest.toFixed(1)} µs/request`;
}

function fmt(n) {
  return Math.round(n).toLocaleString('en-US').padStart(7);
}

function freePort() {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', reject);
    probe.listen(0, HOST, () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

/** Nimbus' environment: the benchmark's own NIMBUS_* values only, so the caller's cannot change what runs. */
function nimbusEnv(dataDir, extra = {}) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('NIMBUS_')));
  return { ...env, NIMBUS_DATA_DIR: dataDir, NIMBUS_LOG_LEVEL: 'info', ...extra };
}

async function startNimbus(dataDir, logFile, children) {
  const port = await freePort();
  const child = spawn(process.execPath, [path.join(ROOT, 'bin', 'nimbus'), 'serve'], {
    cwd: ROOT,
    env: nimbusEnv(dataDir, {
      NIMBUS_HTTPS_PORT: String(port),
      NIMBUS_HTTP_PORT: '0',
      NIMBUS_METRICS_PORT: '0',
    }),
    // Logs go to a real file (appended across both starts), as a deployment would write them.
    stdio: ['ignore', openSync(logFile, 'a'), 'inherit'],
  });
  children.add(child);
  child.once('exit', (code, signal) => {
    if (children.has(child)) fail(`Nimbus exited unexpectedly (code ${code}, signal ${signal})`);
  });
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      const health = await request(port, 'GET', '/healthz');
      if (health.status === 200) return { child, port };
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) fail('Nimbus did not answer /healthz within 30 s');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function startBare(dataDir, children) {
  const tls = path.join(dataDir, 'tls');
  const child = fork(SELF, ['--bare-server', path.join(tls, 'cert.pem'), path.join(tls, 'key.pem')], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  children.add(child);
  const [message] = await once(child, 'message');
  return { child, port: message.port };
}

async function stopChild(child, children) {
  children.delete(child);
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

function admin(dataDir, args) {
  const result = spawnSync(process.execPath, [path.join(ROOT, 'bin', 'nimbus'), 'admin', ...args, '--json'], {
    cwd: ROOT,
    env: nimbusEnv(dataDir),
    encoding: 'utf8',
  });
  if (result.status !== 0) fail(`admin ${args[0]} failed: ${result.stderr}`);
  return JSON.parse(result.stdout);
}

/** One request on its own connection; the certificate is self-signed, and this is loopback. */
function request(port, method, urlPath, headers = {}, body) {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = https.request(
      {
        host: HOST,
        port,
        method,
        path: urlPath,
        agent: false,
        rejectUnauthorized: false,
        headers: payload ? { ...headers, 'content-type': 'application/json' } : headers,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => {
          text += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: text }));
      },
    );
    req.once('error', reject);
    req.end(payload);
  });
}

async function rateLimitStatus(port, auth) {
  const res = await request(port, 'GET', '/v1/account/rate-limit', auth);
  if (res.status !== 200) fail(`GET /v1/account/rate-limit answered ${res.status}: ${res.body}`);
  return JSON.parse(res.body).data;
}

/** A key used (so cached), then deleted, must be refused by the very next request on the same server. */
async function revokedKeyIsRefused(port, auth) {
  const created = await request(port, 'POST', '/v1/account/api-keys', auth, {
    name: 'bench-revocation',
    permissions: ['account:read'],
  });
  if (created.status !== 201 && created.status !== 200) {
    fail(`POST /v1/account/api-keys answered ${created.status}: ${created.body}`);
  }
  const key = JSON.parse(created.body).data;
  const asKey = { authorization: `Bearer ${key.key}` };
  const used = await request(port, 'GET', '/v1/account', asKey);
  if (used.status !== 200) fail(`the new key was refused before it was deleted (${used.status})`);
  const deleted = await request(port, 'DELETE', `/v1/account/api-keys/${key.id}`, auth);
  if (deleted.status !== 200) fail(`DELETE /v1/account/api-keys answered ${deleted.status}: ${deleted.body}`);
  const after = await request(port, 'GET', '/v1/account', asKey);
  return { refused: after.status === 401, status: after.status };
}

/** Runs the load; with a server pid, also measures the CPU time that server process spent meanwhile. */
async function load(autocannon, label, { url, headers, connections, duration }, serverPid) {
  step(`${label}: ${connections} connections, ${duration} s`);
  const cpuBefore = serverPid ? cpuSeconds(serverPid) : null;
  const run = autocannon({ url, headers, connections, duration, pipelining: 1, timeout: 10 });
  // autocannon's own percentiles are whole milliseconds; on loopback both servers answer in less than
  // one, so every response time is kept here too (in ms, as a float) for sub-millisecond percentiles.
  const latencies = new LatencyLog();
  run.on('response', (_client, _status, _bytes, ms) => latencies.add(ms));
  const result = await run;
  const cpuAfter = serverPid ? cpuSeconds(serverPid) : null;
  result.serverCpuSeconds = cpuBefore !== null && cpuAfter !== null ? cpuAfter - cpuBefore : null;
  result.exactLatency = latencies.percentiles([50, 99]);
  const problems = [];
  if (result.non2xx > 0) problems.push(`${result.non2xx} non-2xx responses`);
  if (result.errors > 0) problems.push(`${result.errors} errors`);
  if (result.timeouts > 0) problems.push(`${result.timeouts} timeouts`);
  if (result.resets > 0) problems.push(`${result.resets} connection resets`);
  if (result['2xx'] === 0) problems.push('no 2xx responses at all');
  if (problems.length > 0) {
    fail(`${label}: ${problems.join(', ')} (status codes: ${JSON.stringify(result.statusCodeStats)})`);
  }
  return result;
}

/** Response times in a growing Float64Array (about 10 MB for a million responses). */
class LatencyLog {
  values = new Float64Array(1 << 20);
  length = 0;

  add(ms) {
    if (this.length === this.values.length) {
      const bigger = new Float64Array(this.values.length * 2);
      bigger.set(this.values);
      this.values = bigger;
    }
    this.values[this.length++] = ms;
  }

  /** Nearest-rank percentiles, in ms rounded to hundredths. */
  percentiles(ranks) {
    const sorted = this.values.slice(0, this.length).sort();
    const out = {};
    for (const rank of ranks) {
      const index = Math.min(this.length - 1, Math.max(0, Math.ceil((rank / 100) * this.length) - 1));
      out[rank] = this.length === 0 ? Number.NaN : Math.round(sorted[index] * 100) / 100;
    }
    return out;
  }
}

/**
 * User plus system CPU seconds of a process (Linux /proc; null elsewhere). Throughput depends on what
 * else the machine runs; the server's CPU time per request is the steadier figure of what a request costs.
 */
function cpuSeconds(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces) start at state; utime and stime are 14, 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return null;
  }
}

/** What a reader needs to weigh the ratio: the CPU cost per request, and whether the ceiling was real. */
function caveats({ bare, nimbus }) {
  if (bare.cpuUsPerRequest === null || nimbus.cpuUsPerRequest === null) return [];
  const notes = [
    `CPU per request: bare ${bare.cpuUsPerRequest.toFixed(1)} µs, Nimbus ${nimbus.cpuUsPerRequest.toFixed(1)} µs ` +
      `(cost ratio ${(bare.cpuUsPerRequest / nimbus.cpuUsPerRequest).toFixed(3)}).`,
  ];
  if (bare.cpuShare < 0.85) {
    notes.push(
      `The bare server used only ${Math.round(bare.cpuShare * 100)}% of a core: the load generator or other ` +
        'work on the machine held it back, so the throughput ratio flatters Nimbus; the CPU cost ratio does not.',
    );
  }
  return notes;
}

function summarize(result) {
  const seconds = result.duration;
  const cpu = result.serverCpuSeconds;
  return {
    rps: result.requests.total / seconds,
    requests: result.requests.total,
    p50: result.exactLatency[50],
    p99: result.exactLatency[99],
    // Share of one core the server used, and its CPU time per request in microseconds.
    cpuShare: cpu === null ? null : cpu / seconds,
    cpuUsPerRequest: cpu === null ? null : (cpu * 1e6) / result.requests.total,
  };
}

async function countAccessLogLines(logFile, accountId) {
  let count = 0;
  const lines = createInterface({ input: createReadStream(logFile), crlfDelay: Number.POSITIVE_INFINITY });
  for await (const line of lines) {
    // Cheap pre-filter, then a real parse: the line must be one JSON object at level info.
    if (!line.includes('"route":"/v1/account"')) continue;
    const entry = JSON.parse(line);
    if (
      entry.level === 30 &&
      entry.msg === 'request' &&
      entry.account === accountId &&
      entry.status === 200
    ) {
      count += 1;
    }
  }
  return count;
}

function writeResults({
  command,
  settings,
  figures,
  ratio,
  verdict,
  logged,
  revocation,
  loadAverage,
  notes,
}) {
  const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
  const autocannonVersion = JSON.parse(
    readFileSync(path.join(ROOT, 'node_modules', 'autocannon', 'package.json'), 'utf8'),
  ).version;
  const row = (name, f) =>
    `| ${name} | ${fmt(f.rps).trim()} | ${f.p50} | ${f.p99} | ${f.requests} | ${cpuText(f)} |`;
  const section = [
    SECTION_START,
    '## Authenticated `GET /v1/account` against bare `node:https` (issue #2)',
    '',
    `Run on ${new Date().toISOString().slice(0, 10)}: ${os.availableParallelism()} CPUs (nproc) ${cpu}, ` +
      `Node ${process.version}, ${os.type()} ${os.release()}, autocannon ${autocannonVersion}; ` +
      `1-minute load average ${loadAverage.toFixed(2)} when the run started.`,
    '',
    'Command (from the repository root; `npm run bench` runs the same with the defaults):',
    '',
    '```sh',
    command,
    '```',
    '',
    `Load: autocannon in the benchmark process, ${settings.connections} keep-alive TLS connections to ` +
      `127.0.0.1, ${settings.warmup} s warm-up then ${settings.duration} s measured, per server, one ` +
      'server at a time, each in its own process. The bare server answers a fixed small JSON body with ' +
      "Nimbus' own certificate. Nimbus runs the embedded profile (SQLite) with `NIMBUS_LOG_LEVEL=info`, " +
      'logging to a file; the request carries the bootstrap key, is authenticated (key cache at its ' +
      'default 5 s), rate-limited (limit raised to 100000000/h with `admin set-rate-limit`), checked ' +
      'for the `account:read` permission, answers with the account snapshot cached with the verified key (dropped on any change to the account), and writes an access-log ' +
      'line and two Prometheus series.',
    '',
    '| server | req/s | p50 (ms) | p99 (ms) | requests | server CPU while measured |',
    '|---|---:|---:|---:|---:|---:|',
    row('bare `node:https`, fixed JSON', figures.bare),
    row('Nimbus `GET /v1/account`', figures.nimbus),
    '',
    `**Ratio: ${ratio.toFixed(3)}** — target: the authenticated, rate-limited, logged request reaches at ` +
      `least **${TARGET_RATIO}×** the bare server's throughput: **${verdict}**.`,
    '',
    ...notes.flatMap((note) => [note, '']),
    `Checks made by the same run: every answer was 2xx (the run fails otherwise); ${logged} access-log ` +
      'lines at info for the measured account (at least one per measured request); the rate-limit budget ' +
      'went down by at least the number of measured requests; a key that had just been used (so was ' +
      `cached) and was then deleted was answered ${revocation.status} on its next request.`,
    SECTION_END,
  ].join('\n');
  const header = '# Benchmarks\n\nResults written by the scripts in `bench/`; rerun them to update.\n\n';
  const current = existsSync(RESULTS_FILE) ? readFileSync(RESULTS_FILE, 'utf8') : header;
  const start = current.indexOf(SECTION_START);
  const end = current.indexOf(SECTION_END);
  const next =
    start >= 0 && end > start
      ? current.slice(0, start) + section + current.slice(end + SECTION_END.length)
      : `${current.trimEnd()}\n\n${section}\n`;
  mkdirSync(path.dirname(RESULTS_FILE), { recursive: true });
  writeFileSync(RESULTS_FILE, next);
}

// ---------------------------------------------------------------------------------------------------
// Entry point. Child mode is the bare server: started by the parent with fork(), it reports its port over
// IPC. (Last in the file, so that everything above is initialised before main() runs.)
// ---------------------------------------------------------------------------------------------------
if (process.argv[2] === '--bare-server') {
  const [certFile, keyFile] = process.argv.slice(3);
  const body = Buffer.from(BARE_BODY);
  const server = https.createServer(
    { cert: readFileSync(certFile), key: readFileSync(keyFile) },
    (_req, res) => {
      res.writeHead(200, {
        'Content-Type': 'application/json; charset=utf-8',
        'Content-Length': body.length,
      });
      res.end(body);
    },
  );
  server.listen(0, HOST, () => process.send?.({ port: server.address().port }));
  process.on('SIGTERM', () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
} else {
  await main();
}
