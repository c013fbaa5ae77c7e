/**
 * What the benchmark scripts in bench/ share: building and starting Nimbus on a temporary data dir,
 * `bin/nimbus admin` commands, one-off HTTPS requests, the autocannon load with its checks and exact
 * latency percentiles, the server's CPU time from /proc, cleanup on every exit, and writing a script's
 * generated section of docs/benchmarks.md between its markers.
 *
 * Importing this module has no side effects: a script opts in to cleanup with cleanUpOnExit().
 */
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const HOST = '127.0.0.1';
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const RESULTS_FILE = path.join(ROOT, 'docs', 'benchmarks.md');
/** The rate limit (per hour, and burst) the benchmarks give the accounts they load. */
export const RAISED_LIMIT = 100_000_000;
// USER_HZ, the unit of /proc/<pid>/stat times: 100 on every Linux architecture Node supports.
const CLOCK_TICKS_PER_SECOND = 100;

// ---------------------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------------------
export function step(message) {
  process.stderr.write(`[bench] ${message}\n`);
}

export function fail(message) {
  process.stderr.write(`[bench] FAILED: ${message}\n`);
  process.exit(1);
}

export function positiveInt(value, name) {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) fail(`--${name} must be a positive whole number`);
  return n;
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export const fmt = (n) => Math.round(n).toLocaleString('en-US');

/** The nearest-rank percentile `p` (0–100) of the figures (sorted here; the list is left as it was). */
export function percentile(figures, p) {
  const sorted = [...figures].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/** The server's share of a core and its CPU time per request (µs, to `digits` decimals); n/a off Linux. */
export function cpuText(f, digits = 0) {
  if (f.cpuShare === null) return 'n/a';
  const us = f.cpuUsPerRequest.toLocaleString('en-US', {
    minimumFractionDigits: digits,
    maximumFractionDigits: digits,
  });
  return `${Math.round(f.cpuShare * 100)}% of a core, ${us} µs/request`;
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

// ---------------------------------------------------------------------------------------------------
// Cleanup: everything to undo on exit, however the process exits (fail() exits at once)
// ---------------------------------------------------------------------------------------------------
export const cleanup = { children: new Set(), tasks: [], dirs: new Set(), keep: false, done: false };

/** Kills the children, runs the tasks added with atCleanUp(), then removes the temporary dirs (or keeps them). */
export function cleanUp() {
  if (cleanup.done) return;
  cleanup.done = true;
  for (const child of cleanup.children) child.kill('SIGKILL');
  cleanup.children.clear();
  for (const task of cleanup.tasks) task();
  for (const dir of cleanup.dirs) {
    if (cleanup.keep) step(`kept ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
  }
}

/** Cleans up on every exit, failures and Ctrl-C included. */
export function cleanUpOnExit() {
  process.once('exit', cleanUp);
  for (const signal of ['SIGINT', 'SIGTERM']) process.once(signal, () => process.exit(130));
}

export function atCleanUp(task) {
  cleanup.tasks.push(task);
}

/** A temporary dir, removed on exit unless --keep. */
export function tempDir(prefix) {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  cleanup.dirs.add(dir);
  return dir;
}

export function removeDir(dir) {
  if (cleanup.keep) return;
  rmSync(dir, { recursive: true, force: true });
  cleanup.dirs.delete(dir);
}

// ---------------------------------------------------------------------------------------------------
// A run: the command line, the machine's load, autocannon and a fresh build
// ---------------------------------------------------------------------------------------------------
/**
 * The command as the results show it, the load average before the run, autocannon; then builds Nimbus
 * unless `build` is false (the caller runs the dist/ that is there).
 */
export async function prepareRun(script, { build: buildFirst = true } = {}) {
  const command = [`node ${script}`, ...process.argv.slice(2)].join(' ');
  // Other work on the machine moves the figures; the 1-minute load average before the run says how much.
  const loadAverage = os.loadavg()[0];
  const { default: autocannon } = await import('autocannon');

  if (buildFirst) {
    step('building Nimbus (npm run build)');
    const build = spawnSync('npm', ['run', '--silent', 'build'], { cwd: ROOT, stdio: 'inherit' });
    if (build.status !== 0) fail('npm run build failed');
  }
  return { command, loadAverage, autocannon };
}

/**
 * A worktree of `revision` in a temporary directory, with this checkout's node_modules, built: the
 * "before" of a benchmark that compares two builds (compare.mjs, keyless-docs.mjs).
 */
export function checkOutAndBuild(revision) {
  const dir = tempDir('nimbus-bench-base-');
  step(`checking out ${revision} into ${dir}`);
  const added = spawnSync('git', ['worktree', 'add', '--detach', dir, revision], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  if (added.status !== 0) fail(`git worktree add ${revision} failed: ${added.stderr}`);
  // Runs before the directory itself is removed, so that git forgets the worktree too.
  atCleanUp(() => spawnSync('git', ['worktree', 'remove', '--force', dir], { cwd: ROOT }));
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
  step(`building ${revision}`);
  const build = spawnSync('npm', ['run', '--silent', 'build'], { cwd: dir, stdio: 'inherit' });
  if (build.status !== 0) fail(`npm run build failed for ${revision}`);
  return dir;
}

// ---------------------------------------------------------------------------------------------------
// Nimbus: servers, admin commands, requests
// ---------------------------------------------------------------------------------------------------
/** Nimbus' environment: the benchmark's own NIMBUS_* values only, so the caller's cannot change what runs. */
function nimbusEnv(dataDir, extra = {}) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('NIMBUS_')));
  return { ...env, NIMBUS_DATA_DIR: dataDir, NIMBUS_LOG_LEVEL: 'info', ...extra };
}

/**
 * Starts `bin/nimbus serve` on a free port and waits for /healthz; `extra` adds NIMBUS_* settings, `root`
 * is the checkout whose build runs (this one by default), `nodeArgs` go to node itself (e.g. --cpu-prof,
 * which NODE_OPTIONS does not take).
 */
export async function startNimbus(dataDir, logFile, extra = {}, root = ROOT, nodeArgs = []) {
  const port = await freePort();
  const child = spawn(process.execPath, [...nodeArgs, path.join(root, 'bin', 'nimbus'), 'serve'], {
    cwd: root,
    env: nimbusEnv(dataDir, {
      ...extra,
      NIMBUS_HTTPS_PORT: String(port),
      NIMBUS_HTTP_PORT: '0',
      NIMBUS_METRICS_PORT: '0',
      NIMBUS_METADATA_PORT: '0',
    }),
    // Logs go to a real file (appended across restarts), as a deployment would write them.
    stdio: ['ignore', openSync(logFile, 'a'), 'inherit'],
  });
  cleanup.children.add(child);
  child.once('exit', (code, signal) => {
    if (cleanup.children.has(child)) fail(`Nimbus exited unexpectedly (code ${code}, signal ${signal})`);
  });
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      const health = await request(port, 'GET', '/healthz');
      if (health.status === 200) return { child, port };
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) fail('Nimbus did not answer /healthz within 60 s');
    await sleep(100);
  }
}

/** SIGTERM, then SIGKILL after 10 s; the child is no longer expected to run. */
export async function stopChild(child) {
  cleanup.children.delete(child);
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

/**
 * `bin/nimbus admin <args> --json` on the data dir; `extraEnv` adds NIMBUS_* settings, `root` is the
 * checkout whose build runs (this one by default).
 */
export function admin(dataDir, args, extraEnv = {}, root = ROOT) {
  const result = spawnSync(process.execPath, [path.join(root, 'bin', 'nimbus'), 'admin', ...args, '--json'], {
    cwd: root,
    env: nimbusEnv(dataDir, extraEnv),
    encoding: 'utf8',
  });
  if (result.status !== 0) fail(`admin ${args[0]} failed: ${result.stderr}`);
  return JSON.parse(result.stdout);
}

/** The bootstrap account's key (written by the first start), as a request header. */
export function bootstrapAuth(dataDir) {
  const key = readFileSync(path.join(dataDir, 'bootstrap-api-key'), 'utf8').trim();
  return { authorization: `Bearer ${key}` };
}

export async function accountIdOf(port, auth) {
  const res = await request(port, 'GET', '/v1/account', auth);
  if (res.status !== 200) fail(`GET /v1/account answered ${res.status}: ${res.body}`);
  return JSON.parse(res.body).data.id;
}

/**
 * Raises the account's rate limit to RAISED_LIMIT, and the given quotas ([name, limit] pairs), with the
 * admin command of the checkout at `root`.
 */
export function raiseLimits(dataDir, accountId, quotas = [], extraEnv = {}, root = ROOT) {
  const raised = admin(
    dataDir,
    [
      'set-rate-limit',
      '--account',
      accountId,
      '--per-hour',
      String(RAISED_LIMIT),
      '--burst',
      String(RAISED_LIMIT),
    ],
    extraEnv,
    root,
  );
  if (raised.per_hour !== RAISED_LIMIT || raised.burst !== RAISED_LIMIT) {
    fail(`admin set-rate-limit did not apply: ${JSON.stringify(raised)}`);
  }
  for (const [name, limit] of quotas) {
    const quota = admin(
      dataDir,
      ['set-quota', '--account', accountId, '--name', name, '--limit', String(limit)],
      extraEnv,
      root,
    );
    if (quota.limit !== limit) fail(`admin set-quota ${name} did not apply: ${JSON.stringify(quota)}`);
  }
}

/**
 * One request, on its own connection unless an `agent` that keeps connections alive is given; the
 * certificate is self-signed, and this is loopback.
 */
export function request(port, method, urlPath, headers = {}, body, agent = false) {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = https.request(
      {
        host: HOST,
        port,
        method,
        path: urlPath,
        agent,
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

// ---------------------------------------------------------------------------------------------------
// Load and its figures
// ---------------------------------------------------------------------------------------------------
/**
 * Runs the load; with a server pid, also measures the CPU time that server process spent meanwhile.
 * Every answer must have the `expected` status (and there must be some), with no errors, timeouts or
 * resets; requests.total is the number of those answers, perSecond their count in each second.
 */
export async function runLoad(
  autocannon,
  label,
  { url, method, headers, body, connections, duration },
  serverPid,
  expected,
) {
  step(`${label}: ${connections} connection${connections === 1 ? '' : 's'}, ${duration} s`);
  const cpuBefore = serverPid ? cpuSeconds(serverPid) : null;
  const run = autocannon({
    url,
    method: method ?? 'GET',
    headers,
    ...(body === undefined ? {} : { body }),
    connections,
    duration,
    pipelining: 1,
    timeout: 10,
  });
  // autocannon's own percentiles are whole milliseconds; on loopback a server may answer in less than
  // one, so every response time is kept here too (in ms, as a float) for sub-millisecond percentiles.
  const latencies = new LatencyLog();
  const statuses = new Map();
  // Answers per second of the run, to show whether the rate holds as the data grows.
  const began = performance.now();
  const perSecond = [];
  run.on('response', (_client, status, _bytes, ms) => {
    latencies.add(ms);
    statuses.set(status, (statuses.get(status) ?? 0) + 1);
    const second = Math.floor((performance.now() - began) / 1000);
    perSecond[second] = (perSecond[second] ?? 0) + 1;
  });
  const result = await run;
  const cpuAfter = serverPid ? cpuSeconds(serverPid) : null;
  result.serverCpuSeconds = cpuBefore !== null && cpuAfter !== null ? cpuAfter - cpuBefore : null;
  result.exactLatency = latencies.percentiles([50, 99]);
  const problems = [];
  const unexpected = [...statuses].filter(([status]) => status !== expected);
  if (unexpected.length > 0) problems.push(`answers other than ${expected}: ${JSON.stringify(unexpected)}`);
  if (result.errors > 0) problems.push(`${result.errors} errors`);
  if (result.timeouts > 0) problems.push(`${result.timeouts} timeouts`);
  if (result.resets > 0) problems.push(`${result.resets} connection resets`);
  if ((statuses.get(expected) ?? 0) === 0) problems.push(`no ${expected} answers at all`);
  if (problems.length > 0) fail(`${label}: ${problems.join(', ')}`);
  result.requests.total = statuses.get(expected);
  result.perSecond = Array.from({ length: duration }, (_, n) => perSecond[n] ?? 0);
  return result;
}

/** Response times in a growing Float64Array (8 bytes a response). */
class LatencyLog {
  values = new Float64Array(1 << 16);
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
export function cpuSeconds(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces) start at state; utime and stime are 14, 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return null;
  }
}

/** The figures of a runLoad() result: rates, exact percentiles and the server's CPU. */
export function summarize(result) {
  const seconds = result.duration;
  const cpu = result.serverCpuSeconds;
  const window = Math.min(5, Math.floor(result.perSecond.length / 2));
  const rate = (slice) => slice.reduce((sum, n) => sum + n, 0) / Math.max(1, slice.length);
  return {
    // The rate in the first and the last `window` seconds of the run.
    firstRate: rate(result.perSecond.slice(0, window)),
    lastRate: rate(result.perSecond.slice(result.perSecond.length - window)),
    window,
    rps: result.requests.total / seconds,
    requests: result.requests.total,
    p50: result.exactLatency[50],
    p99: result.exactLatency[99],
    ...serverCpu(cpu, seconds, result.requests.total),
  };
}

/**
 * The share of one core the server used over a run, and its CPU time per request in microseconds, from
 * its CPU seconds (cpuSeconds() after minus before; null when they could not be read).
 */
export function serverCpu(cpu, seconds, requests) {
  return {
    cpuShare: cpu === null ? null : cpu / seconds,
    cpuUsPerRequest: cpu === null ? null : (cpu * 1e6) / requests,
  };
}

// ---------------------------------------------------------------------------------------------------
// The machine: CPU pinning, and the CPU time the hypervisor took
// ---------------------------------------------------------------------------------------------------
/** With pinning, servers under test run on SERVER_CPU and the load generator on LOAD_CPU. */
export const SERVER_CPU = 0;
export const LOAD_CPU = 1;

/**
 * Whether servers and load generator can each have a CPU of their own (Linux taskset, two CPUs or more):
 * then neither takes the other's core, which removes most of the scheduler's run-to-run noise.
 */
export function canPin() {
  return os.availableParallelism() >= 2 && !spawnSync('taskset', ['-V']).error;
}

/** Moves every thread of a running process to `cpu`; threads it starts later stay there too. */
export function pinProcess(pid, cpu) {
  const pinned = spawnSync('taskset', ['-a', '-p', '-c', String(cpu), String(pid)], { encoding: 'utf8' });
  if (pinned.status !== 0) fail(`taskset could not pin process ${pid}: ${pinned.stderr}`);
}

/** Per CPU, the jiffies counted so far: all of them, and those stolen (run by the hypervisor for others). */
export function cpuTimes() {
  if (!existsSync('/proc/stat')) return null;
  const times = [];
  for (const line of readFileSync('/proc/stat', 'utf8').split('\n')) {
    const match = /^cpu(\d+) (.*)$/.exec(line);
    if (!match) continue;
    // user nice system idle iowait irq softirq steal guest guest_nice; guests are already in user.
    const fields = match[2].trim().split(/\s+/).slice(0, 8).map(Number);
    times[Number(match[1])] = { total: fields.reduce((sum, n) => sum + n, 0), steal: fields[7] ?? 0 };
  }
  return times;
}

/**
 * The share of each CPU's time the hypervisor gave to other guests between two cpuTimes() snapshots
 * (what a VM's figures lost to its neighbours), or null off Linux.
 */
export function stolenShares(before, after) {
  if (!before || !after) return null;
  return after.map((now, cpu) => {
    const total = now.total - before[cpu].total;
    return total > 0 ? (now.steal - before[cpu].steal) / total : 0;
  });
}

/** Above this share stolen on any CPU, a run says its figures are the host's rather than the server's. */
export const STEAL_WARNING_SHARE = 0.1;

/** "CPU0 4%, CPU1 6%", plus a warning when more than STEAL_WARNING_SHARE was taken; "n/a" off Linux. */
export function stolenText(shares) {
  if (!shares) return 'n/a';
  const text = shares.map((share, cpu) => `CPU${cpu} ${Math.round(share * 100)}%`).join(', ');
  return Math.max(...shares) > STEAL_WARNING_SHARE
    ? `${text} (over ${STEAL_WARNING_SHARE * 100}%: the figures vary with the host's other guests)`
    : text;
}

// ---------------------------------------------------------------------------------------------------
// docs/benchmarks.md
// ---------------------------------------------------------------------------------------------------
/** "autocannon 8.0.0": the installed version, as benchmark results name their load generator. */
export function autocannonVersion() {
  const manifest = path.join(ROOT, 'node_modules', 'autocannon', 'package.json');
  return `autocannon ${JSON.parse(readFileSync(manifest, 'utf8')).version}`;
}

/** The opening lines of a script's section: where and how it ran, and the command (`npm run <npmScript>`). */
export function runHeader({
  loadAverage,
  command,
  npmScript,
  machineNote = '',
  generator = autocannonVersion(),
}) {
  const cpus = os.cpus();
  const cpu = cpus[0]?.model ?? 'unknown CPU';
  return [
    // All of the machine's CPUs: nproc would count only those this process is pinned to.
    `Run on ${new Date().toISOString().slice(0, 10)}: ${cpus.length} CPUs ${cpu}, ` +
      `Node ${process.version}, ${os.type()} ${os.release()}, ${generator}; ` +
      `1-minute load average ${loadAverage.toFixed(2)} when the run started.${machineNote}`,
    '',
    `Command (from the repository root; \`npm run ${npmScript}\` runs the same with the defaults):`,
    '',
    '```sh',
    command,
    '```',
    '',
  ];
}

/**
 * Writes the lines as the script's section of docs/benchmarks.md, between its markers: in place of the
 * section already there, or appended; the rest of the file is left as it is.
 */
export function writeSection(script, lines) {
  const sectionStart = `<!-- ${script}: start (generated, do not edit by hand) -->`;
  const sectionEnd = `<!-- ${script}: end -->`;
  const section = [sectionStart, ...lines, sectionEnd].join('\n');
  const header = '# Benchmarks\n\nResults written by the scripts in `bench/`; rerun them to update.\n\n';
  const current = existsSync(RESULTS_FILE) ? readFileSync(RESULTS_FILE, 'utf8') : header;
  const start = current.indexOf(sectionStart);
  const end = current.indexOf(sectionEnd);
  const next =
    start >= 0 && end > start
      ? current.slice(0, start) + section + current.slice(end + sectionEnd.length)
      : `${current.trimEnd()}\n\n${section}\n`;
  mkdirSync(path.dirname(RESULTS_FILE), { recursive: true });
  writeFileSync(RESULTS_FILE, next);
  step(`wrote ${path.relative(ROOT, RESULTS_FILE)}`);
}

// ---------------------------------------------------------------------------------------------------
// Rows written straight into a SQLite file (better-sqlite3), for seeding
// ---------------------------------------------------------------------------------------------------
/** A value for every NOT NULL column of a row, from the table's own definition; `fixed` sets the rest. */
export function filler(db, table, fixed) {
  const columns = db.prepare(`pragma table_info(${table})`).all();
  return (i) =>
    Object.fromEntries(
      columns
        .filter((c) => c.notnull || c.name in fixed)
        .map((c) => {
          const value = fixed[c.name];
          if (typeof value === 'function') return [c.name, value(i)];
          if (value !== undefined) return [c.name, value];
          return [c.name, /int/i.test(c.type) ? 0 : `${c.name}-${i}`];
        }),
    );
}

/** Inserts the rows (all with the same columns) in one transaction. */
export function insertAll(db, table, rows) {
  if (rows.length === 0) return;
  const names = Object.keys(rows[0]);
  const insert = db.prepare(
    `insert into ${table} (${names.join(', ')}) values (${names.map((n) => `@${n}`).join(', ')})`,
  );
  db.transaction(() => {
    for (const row of rows) insert.run(row);
  })();
}
