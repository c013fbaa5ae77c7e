/**
 * Benchmark of issue 18 (tests and benchmarks): durable creates per second with 64 concurrent clients,
 * and whether the boots keep pace.
 *
 * Three configurations, each on a fresh data dir (and a fresh PostgreSQL database), a built Nimbus with
 * NIMBUS_SIM_SPEEDUP=1000 (a boot takes 8 ms of simulated time, so the boot jobs run during the load):
 * - sqlite: one `bin/nimbus serve`, SQLite WAL with synchronous=FULL (group commit);
 * - postgres-1: one server on PostgreSQL and Redis;
 * - postgres-2: two servers on one PostgreSQL database and one Redis, the clients split over both.
 *
 * The creating account is the bootstrap one (enterprise) with its rate limit and its `instances`/`vcpus`
 * quotas raised; the public pool is 100.64.0.0/10. Per configuration: a warm-up, then POST /v1/instances
 * over --connections keep-alive TLS connections for --duration seconds (autocannon), every answer 202;
 * every second meanwhile, the instances still `starting` (the boot backlog), and after the load how long
 * the last boots took. Server CPU is the user+system time of the Nimbus processes (PostgreSQL's own is
 * not in it). --cpu-prof writes a V8 CPU profile of the SQLite server and prints its top functions by
 * self time. With --only, the section keeps the table rows (and the profile) of the configurations not
 * run from its previous run, marked as such, so the SQLite and PostgreSQL rows can be run apart.
 *
 * Usage (from the repository root):
 *   node bench/create-throughput.mjs [--duration 10] [--connections 64] [--warmup-creates 64]
 *     [--only sqlite,postgres-1,postgres-2] [--pg-url postgres://postgres@127.0.0.1:5432]
 *     [--redis-url redis://127.0.0.1:6379] [--cpu-prof] [--no-build] [--no-write] [--keep]
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { parseArgs } from 'node:util';
import {
  accountIdOf,
  atCleanUp,
  bootstrapAuth,
  cleanUp,
  cleanUpOnExit,
  cleanup,
  cpuSeconds,
  fail,
  fmt,
  HOST,
  positiveInt,
  prepareRun,
  RAISED_LIMIT,
  RESULTS_FILE,
  ROOT,
  raiseLimits,
  removeDir,
  request,
  runHeader,
  runLoad,
  sleep,
  startNimbus,
  step,
  stopChild,
  summarize,
  tempDir,
  writeSection,
} from './lib.mjs';

const SCRIPT = 'bench/create-throughput.mjs';
const CONFIGURATIONS = ['sqlite', 'postgres-1', 'postgres-2'];
const TARGETS = { sqlite: 1_000, 'postgres-1': null, 'postgres-2': 500 };
const CREATE_BODY = JSON.stringify({
  name: 'burst',
  instance_type: 'compute-1x',
  region: 'us-east-1',
  image: 'ubuntu-24.04',
});
const QUOTAS = [
  ['instances', 10_000_000],
  ['vcpus', RAISED_LIMIT],
];

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '10' },
    connections: { type: 'string', default: '64' },
    'warmup-creates': { type: 'string', default: '64' },
    only: { type: 'string', default: CONFIGURATIONS.join(',') },
    'pg-url': { type: 'string', default: 'postgres://postgres@127.0.0.1:5432' },
    'redis-url': { type: 'string', default: 'redis://127.0.0.1:6379' },
    'cpu-prof': { type: 'boolean', default: false },
    'no-build': { type: 'boolean', default: false },
    'no-write': { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
  },
});
const DURATION = positiveInt(values.duration, 'duration');
const CONNECTIONS = positiveInt(values.connections, 'connections');
const WARMUP_CREATES = positiveInt(values['warmup-creates'], 'warmup-creates');
const ONLY = values.only.split(',').filter(Boolean);
for (const name of ONLY) if (!CONFIGURATIONS.includes(name)) fail(`unknown configuration ${name}`);
cleanup.keep = values.keep;
cleanUpOnExit();

// ---------------------------------------------------------------------------------------------------
// PostgreSQL: a fresh database per configuration, dropped at the end
// ---------------------------------------------------------------------------------------------------
function databaseUrl(name) {
  const url = new URL(values['pg-url']);
  url.pathname = `/${name}`;
  return url.toString();
}

function psql(statement) {
  const result = spawnSync(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `import pg from 'pg';
       const client = new pg.Client({ connectionString: process.argv[1] });
       await client.connect();
       const res = await client.query(process.argv[2]);
       process.stdout.write(JSON.stringify(res.rows));
       await client.end();`,
      databaseUrl('postgres'),
      statement,
    ],
    { cwd: ROOT, encoding: 'utf8', timeout: 30_000 },
  );
  if (result.status !== 0) fail(`PostgreSQL: ${statement}: ${result.stderr}`);
  return JSON.parse(result.stdout);
}

// ---------------------------------------------------------------------------------------------------
// One configuration
// ---------------------------------------------------------------------------------------------------
async function count(port, auth, query) {
  const res = await request(port, 'GET', `/v1/instances?limit=1${query}`, auth);
  if (res.status !== 200) fail(`GET /v1/instances${query} answered ${res.status}: ${res.body}`);
  return JSON.parse(res.body).pagination.total_items;
}

async function measure(autocannon, name) {
  const replicas = name === 'postgres-2' ? 2 : 1;
  const dataDir = tempDir(`nimbus-bench-burst-${name}-`);
  const env = { NIMBUS_SIM_SPEEDUP: '1000', NIMBUS_PUBLIC_IP_POOLS: 'us-east-1=100.64.0.0/10' };
  let database = null;
  let durability = 'SQLite WAL, synchronous=FULL, group commit';
  if (name !== 'sqlite') {
    database = `nimbus_burst_${process.pid}_${Date.now().toString(36)}`;
    psql(`create database "${database}"`);
    atCleanUp(() => psql(`drop database if exists "${database}" with (force)`));
    env.NIMBUS_DATABASE_URL = databaseUrl(database);
    // PostgreSQL requires a configured master key, the same for both servers and the admin commands.
    env.NIMBUS_SECRET_KEY = randomBytes(32).toString('base64');
    env.NIMBUS_REDIS_URL = values['redis-url'];
    const [settings] = psql(
      "select current_setting('server_version') as v, current_setting('fsync') as f, current_setting('synchronous_commit') as s",
    );
    durability = `PostgreSQL ${settings.v}, fsync=${settings.f}, synchronous_commit=${settings.s}; Redis; pools of 10 (requests) and 5 (background work) per server`;
  }
  step(`${name}: data dir ${dataDir}`);
  const logFile = path.join(dataDir, 'nimbus.log');
  const first = await startNimbus(dataDir, logFile, env);
  const auth = bootstrapAuth(dataDir);
  const accountId = await accountIdOf(first.port, auth);
  await stopChild(first.child);
  const adminEnv = env.NIMBUS_DATABASE_URL
    ? { NIMBUS_DATABASE_URL: env.NIMBUS_DATABASE_URL, NIMBUS_SECRET_KEY: env.NIMBUS_SECRET_KEY }
    : {};
  raiseLimits(dataDir, accountId, QUOTAS, adminEnv);
  const profileDir = values['cpu-prof'] && name === 'sqlite' ? path.join(dataDir, 'profile') : null;
  const nodeArgs = profileDir ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : [];
  const servers = [];
  // Each replica on the same database and Redis (the second on a data dir of its own, same key file).
  for (let replica = 0; replica < replicas; replica++) {
    servers.push(await startNimbus(dataDir, logFile, env, ROOT, nodeArgs));
  }
  const perServer = Math.ceil(CONNECTIONS / replicas);
  const loadOn = (server, duration) => ({
    url: `https://${HOST}:${server.port}/v1/instances`,
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: CREATE_BODY,
    connections: perServer,
    duration,
  });
  // Warm-up: the first creates on each server (connections, statement caches, address scopes).
  step(`${name}: warm-up, ${WARMUP_CREATES} creates per server`);
  await Promise.all(
    servers.map(async (server) => {
      const agent = new https.Agent({ keepAlive: true, maxSockets: 8 });
      const replies = await Promise.all(
        Array.from({ length: WARMUP_CREATES }, () =>
          request(server.port, 'POST', '/v1/instances', auth, JSON.parse(CREATE_BODY), agent),
        ),
      );
      agent.destroy();
      const refused = replies.filter((reply) => reply.status !== 202);
      if (refused.length > 0) {
        fail(`${name} warm-up: ${refused.length} creates answered ${refused[0].status}: ${refused[0].body}`);
      }
    }),
  );
  await waitForBoots(servers[0].port, auth, 60_000);
  const before = await count(servers[0].port, auth, '');
  const cpuBefore = servers.map((server) => cpuSeconds(server.child.pid));

  // The backlog: instances still starting, once a second during the load.
  const backlog = [];
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      await sleep(1000);
      if (sampling) backlog.push(await count(servers[0].port, auth, '&status=starting'));
    }
  })();
  const results = await Promise.all(
    servers.map((server, i) =>
      runLoad(autocannon, `${name} create ${i + 1}`, loadOn(server, DURATION), server.child.pid, 202),
    ),
  );
  sampling = false;
  await sampler;
  const stopped = performance.now();
  const startingAtEnd = await count(servers[0].port, auth, '&status=starting');
  await waitForBoots(servers[0].port, auth, 300_000);
  const drainSeconds = (performance.now() - stopped) / 1000;
  await sleep(500);
  const created = (await count(servers[0].port, auth, '')) - before;
  // The whole cost of a create: its request and its boot (some boots ran after the load).
  const cpuWithBoots = servers.reduce(
    (sum, server, i) => sum + cpuSeconds(server.child.pid) - cpuBefore[i],
    0,
  );
  const answered = results.reduce((sum, r) => sum + r.requests.total, 0);
  if (created < answered || created > answered + CONNECTIONS) {
    fail(`${name}: ${answered} creates answered 202 but the account grew by ${created}`);
  }
  for (const server of servers) await stopChild(server.child);
  const profile = profileDir ? summarizeProfile(profileDir) : null;
  if (database) psql(`drop database if exists "${database}" with (force)`);
  removeDir(dataDir);
  return combine(name, replicas, durability, results, {
    backlog,
    startingAtEnd,
    drainSeconds,
    profile,
    cpuUsWithBoots: (cpuWithBoots * 1e6) / created,
  });
}

async function waitForBoots(port, auth, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const starting = await count(port, auth, '&status=starting');
    if (starting === 0) return;
    if ((await count(port, auth, '&status=error')) > 0) fail('instances went to error');
    if (Date.now() > deadline) fail(`${starting} instances still starting after ${timeoutMs / 1000} s`);
    await sleep(200);
  }
}

/** One row from the replicas' loads: their rates add up, latencies are the worse replica's. */
function combine(name, replicas, durability, results, extra) {
  const parts = results.map(summarize);
  const requests = parts.reduce((sum, p) => sum + p.requests, 0);
  const loadCpuSeconds = results.reduce((sum, r) => sum + (r.serverCpuSeconds ?? 0), 0);
  return {
    name,
    replicas,
    durability,
    rps: parts.reduce((sum, p) => sum + p.rps, 0),
    firstRate: parts.reduce((sum, p) => sum + p.firstRate, 0),
    lastRate: parts.reduce((sum, p) => sum + p.lastRate, 0),
    p50: Math.max(...parts.map((p) => p.p50)),
    p99: Math.max(...parts.map((p) => p.p99)),
    requests,
    cpuShare: loadCpuSeconds / DURATION,
    cpuUsPerCreate: (loadCpuSeconds * 1e6) / requests,
    ...extra,
  };
}

/** The V8 profile's functions by self time (top 15) and the share of the samples each took. */
function summarizeProfile(dir) {
  const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
  if (!file) return null;
  const profile = JSON.parse(readFileSync(path.join(dir, file), 'utf8'));
  const selfByNode = new Map();
  for (const sample of profile.samples) selfByNode.set(sample, (selfByNode.get(sample) ?? 0) + 1);
  const byFunction = new Map();
  const byPart = new Map();
  let total = 0;
  for (const node of profile.nodes) {
    const hits = selfByNode.get(node.id) ?? 0;
    if (hits === 0) continue;
    total += hits;
    const { functionName, url, lineNumber } = node.callFrame;
    // From the repository root; a package under a node_modules symlinked in from elsewhere (a
    // worktree's) by its path inside node_modules; `node:` modules as they are.
    const source = url.startsWith('file://')
      ? path.relative(ROOT, url.slice('file://'.length)).replace(/^(?:\.\.\/)+.*?(node_modules\/)/, '$1')
      : url;
    const where = url ? `${source}:${lineNumber + 1}` : '';
    const label = `${functionName || '(anonymous)'}${where ? ` ${where}` : ''}`;
    byFunction.set(label, (byFunction.get(label) ?? 0) + hits);
    const part = partOf(functionName, url);
    byPart.set(part, (byPart.get(part) ?? 0) + hits);
  }
  const ranked = (map, top) =>
    [...map]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([label, hits]) => ({ label, share: hits / total }));
  return { functions: ranked(byFunction, 15), parts: ranked(byPart, 12) };
}

/** Which part of the server a function belongs to, for the profile's summary. */
function partOf(functionName, url) {
  if (url.endsWith('dist/platform/store/group-commit.js')) {
    if (functionName === 'run') return 'SQLite statements (better-sqlite3, run by store/group-commit)';
    if (functionName === 'commitNow') return "a batch's COMMIT (waits for the fsync)";
    if (functionName === 'exec') return 'BEGIN / SAVEPOINT / RELEASE (and ROLLBACK)';
    return 'store/group-commit (batching, statement cache)';
  }
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (pkg) return `package ${pkg[1]}`;
  const own = /\/dist\/([^/]+)\//.exec(url);
  if (own) return `Nimbus dist/${own[1]}/`;
  if (url.startsWith('node:')) return 'Node.js internals (HTTP, TLS, streams, modules)';
  if (!url) return functionName.startsWith('(') ? functionName : 'native (TLS writes, crypto, timers, …)';
  return 'other';
}

// ---------------------------------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------------------------------
function report(rows) {
  const lines = [
    `POST /v1/instances, ${CONNECTIONS} keep-alive TLS connections (split evenly over the replicas), ${WARMUP_CREATES} warm-up creates per server, then ${DURATION} s measured; NIMBUS_SIM_SPEEDUP=1000, so every create's boot job runs in the servers during the load. "starting" is the boot backlog sampled once a second during the load (each sample is a request to a loaded server, so there are fewer than one a second). CPU per create "with its boot" is the servers' CPU from the start of the load until the last boot finished, per instance created.`,
    '',
    '| configuration | durability | creates/s | first → last | p50 (ms) | p99 (ms) | server CPU | CPU per create: during the load / with its boot | starting during the load | starting at end → all running after | target |',
    '|---|---|---:|---:|---:|---:|---:|---:|---|---:|---|',
  ];
  for (const row of rows) {
    const target = TARGETS[row.name];
    lines.push(
      `| ${row.name} (${row.replicas} server${row.replicas > 1 ? 's' : ''}) | ${row.durability} | **${fmt(row.rps)}** | ${fmt(row.firstRate)} → ${fmt(row.lastRate)}/s | ${row.p50} | ${row.p99} | ${Math.round(row.cpuShare * 100)}% of a core | ${fmt(row.cpuUsPerCreate)} / ${fmt(row.cpuUsWithBoots)} µs | ${row.backlog.join(', ')} | ${row.startingAtEnd} → ${row.drainSeconds.toFixed(1)} s | ${target === null ? 'none' : `≥ ${fmt(target)}/s: ${row.rps >= target ? 'met' : '**not met**'}`} |`,
    );
  }
  for (const row of rows) {
    if (!row.profile) continue;
    lines.push(
      '',
      `CPU profile of the ${row.name} server over its whole life (--cpu-prof: start, warm-up, load, the boots after), self time by part:`,
      '',
      '| part | share of samples |',
      '|---|---:|',
    );
    for (const { label, share } of row.profile.parts)
      lines.push(`| ${label} | ${(share * 100).toFixed(1)}% |`);
    lines.push('', 'Top functions by self time:', '', '| function | share of samples |', '|---|---:|');
    for (const { label, share } of row.profile.functions) {
      lines.push(`| \`${label}\` | ${(share * 100).toFixed(1)}% |`);
    }
  }
  return lines;
}

/**
 * From the section as it stands: the table rows of the configurations not run now, and the profile
 * block that follows the table (it is the SQLite server's) when SQLite is not run now.
 */
function keptFromLastRun() {
  const kept = { rows: [], profile: [], runLine: null };
  if (!existsSync(RESULTS_FILE)) return kept;
  const text = readFileSync(RESULTS_FILE, 'utf8');
  const start = text.indexOf(`<!-- ${SCRIPT}: start`);
  const end = text.indexOf(`<!-- ${SCRIPT}: end -->`);
  if (start < 0 || end < start) return kept;
  const lines = text.slice(start, end).split('\n');
  kept.runLine = lines.find((line) => line.startsWith('Run on ')) ?? null;
  for (const name of CONFIGURATIONS.filter((c) => !ONLY.includes(c))) {
    const row = lines.find((line) => line.startsWith(`| ${name} (`));
    if (row)
      kept.rows.push(
        row.includes('(kept from')
          ? row
          : row.replace(/^\| ([^|]*?) \|/, '| $1 (kept from the previous run) |'),
      );
  }
  if (!ONLY.includes('sqlite')) {
    const first = lines.findIndex((line) => line.startsWith('CPU profile of the sqlite server'));
    if (first >= 0)
      kept.profile = lines.slice(first).filter((line, i, all) => i < all.length - 1 || line !== '');
  }
  return kept;
}

async function main() {
  const { command, loadAverage, autocannon } = await prepareRun(SCRIPT, { build: !values['no-build'] });
  const kept = keptFromLastRun();
  const rows = [];
  for (const name of ONLY) {
    rows.push(await measure(autocannon, name));
    process.stdout.write(`${report(rows.slice(-1)).slice(2).join('\n')}\n`);
  }
  const lines = report(rows);
  process.stdout.write(`\n${lines.join('\n')}\n`);
  if (kept.rows.length > 0) {
    // The kept rows go where their configuration stands in the table's order.
    const table = lines.findIndex((line) => line.startsWith('|---'));
    const order = (line) => CONFIGURATIONS.findIndex((c) => line.startsWith(`| ${c} (`));
    const body = [...lines.slice(table + 1).filter((line) => order(line) >= 0), ...kept.rows].sort(
      (a, b) => order(a) - order(b),
    );
    const after = lines.slice(table + 1).filter((line) => order(line) < 0);
    lines.splice(table + 1, lines.length, ...body, ...after);
    lines.push(
      '',
      `Rows marked "kept from the previous run" were not run this time (--only ${ONLY.join(',')}); they come from the section's previous run${kept.runLine ? ` (${kept.runLine.replace(/^Run on /, '').replace(/\.$/, '')})` : ''}.`,
    );
    if (kept.profile.length > 0) lines.push('', ...kept.profile);
  }
  if (!values['no-write']) {
    writeSection(SCRIPT, [
      '## Create throughput with 64 clients (issue 18)',
      '',
      ...runHeader({
        loadAverage,
        command,
        npmScript: 'bench:create-throughput',
        machineNote:
          ' The host was shared with other agents working at the same time: servers, load generator and PostgreSQL share its 2 cores with them.',
      }),
      ...lines,
      '',
    ]);
  }
  cleanUp();
}

await main();
