/**
 * Benchmarks of issue #3 (instances), in one run with one load generator (autocannon, in this process):
 *
 * 1. Create throughput: `POST /v1/instances` (202) with durable commits, on SQLite (WAL,
 *    synchronous=FULL, as the server always opens it) and on PostgreSQL (a fresh database created for the
 *    run on the server given by --pg-url and dropped at the end). The bootstrap account's rate limit and
 *    its `instances`/`vcpus` quotas are raised with `bin/nimbus admin`, and us-east-1 gets a /8 public
 *    pool (NIMBUS_PUBLIC_IP_POOLS), so nothing runs out. Each create also enqueues the instance's boot job,
 *    and the simulator runs at NIMBUS_SIM_SPEEDUP=1000 (boot 8 ms), so boots run in the same server during
 *    the load, as they would in reality; the run reports how many had booted when the load stopped and
 *    how long the rest took.
 * 2. List latency with 1,000,000 instances in ONE account on SQLite: the account is created by a first
 *    start of the server, the rows are seeded by bench/seed-instances.mjs (the schema by the store's own
 *    migrations, instance_counts kept exactly), then the restarted server is measured for page 1, the
 *    middle page (page 25,000 of limit 20: the deepest any page gets, since a page is read from the nearer
 *    end) and the last page, sorted by created_at (the default, desc) and by name (asc), plus
 *    status=running (page 1 and its middle page). Every case's page is first checked against the same
 *    page computed here with plain SQL, and total_items against the seeded count. Then the server's RSS
 *    (/proc VmRSS, and the peak VmHWM), and a check that total_items comes from instance_counts: a counter
 *    bumped by one in the database shows up in total_items at once. Last, creates with the million
 *    instances in the store, one at a time: one by the seeded account (409 once its private network in
 *    the region is full) and 20 by a second account in us-east-1.
 * 3. Store analysis, with the server stopped: each case is run once more in this process through the
 *    repository's own store code (dist/resources/instances/store.js listInstances) on a logging Kysely, which shows
 *    every SQL statement a list request runs; each is timed alone with better-sqlite3 and its EXPLAIN
 *    QUERY PLAN recorded.
 *
 * Latency is measured closed-loop with --list-connections (default 1), so p50/p99 are what one request
 * costs, not queueing behind others; creates use --create-connections (default 10) for throughput.
 * Everything goes to stdout and to docs/benchmarks.md, between this script's markers.
 *
 * Usage (from the repository root; needs PostgreSQL unless --no-postgres):
 *   node bench/instances.mjs [--create-duration S] [--create-connections N] [--list-duration S]
 *     [--list-connections N] [--warmup S] [--count N] [--pg-url URL] [--no-postgres] [--skip-create]
 *     [--skip-list] [--no-write] [--keep]
 *   --no-write  print only; --keep  leave the temporary data dirs (the PostgreSQL database is dropped anyway)
 * Exits 1 when a check fails (a non-2xx answer, a wrong page, counts that do not match), 0 otherwise: the
 * verdicts on the targets are reported, not enforced. The server is killed, the database dropped and the
 * temporary dirs removed on every exit, failures and Ctrl-C included.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import {
  accountIdOf,
  admin,
  atCleanUp,
  bootstrapAuth,
  cleanUp,
  cleanUpOnExit,
  cleanup,
  cpuText,
  fail,
  fmt,
  HOST,
  positiveInt,
  prepareRun,
  RAISED_LIMIT,
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

const SCRIPT = 'bench/instances.mjs';
const SIM_SPEEDUP = 1000;
const CREATE_POOL = 'us-east-1=10.0.0.0/8';
const CREATE_BODY = {
  name: 'bench',
  instance_type: 'compute-1x',
  region: 'us-east-1',
  image: 'ubuntu-24.04',
};
const LIMIT = 20;
// The account's quotas the benchmarks raise (with its rate limit), so nothing runs out.
const QUOTAS = [
  ['instances', 10_000_000],
  ['vcpus', RAISED_LIMIT],
];
const TARGETS = { firstPageP99: 5, anyPageP99: 50, rssMb: 300 };

// The PostgreSQL databases to drop on exit, however the process exits (fail() exits at once).
const databases = new Set();
cleanUpOnExit();
atCleanUp(() => {
  for (const { url, name } of databases) dropDatabaseSync(url, name);
});

async function main() {
  const { values } = parseArgs({
    options: {
      'create-duration': { type: 'string', default: '20' },
      'create-connections': { type: 'string', default: '10' },
      'list-duration': { type: 'string', default: '10' },
      'list-connections': { type: 'string', default: '1' },
      warmup: { type: 'string', default: '3' },
      count: { type: 'string', default: '1000000' },
      'pg-url': { type: 'string', default: 'postgres://postgres@127.0.0.1:5432' },
      'no-postgres': { type: 'boolean', default: false },
      'skip-create': { type: 'boolean', default: false },
      'skip-list': { type: 'boolean', default: false },
      'no-write': { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
    },
  });
  cleanup.keep = values.keep;
  const settings = {
    createDuration: positiveInt(values['create-duration'], 'create-duration'),
    createConnections: positiveInt(values['create-connections'], 'create-connections'),
    listDuration: positiveInt(values['list-duration'], 'list-duration'),
    listConnections: positiveInt(values['list-connections'], 'list-connections'),
    warmup: positiveInt(values.warmup, 'warmup'),
    count: positiveInt(values.count, 'count'),
  };
  const { command, loadAverage, autocannon } = await prepareRun(SCRIPT);

  const results = { create: [], list: null };
  if (!values['skip-create']) {
    results.create.push(await createBenchmark(autocannon, settings, { kind: 'sqlite' }));
    if (!values['no-postgres']) {
      results.create.push(
        await createBenchmark(autocannon, settings, { kind: 'postgres', url: values['pg-url'] }),
      );
    }
  }
  if (!values['skip-list']) results.list = await listBenchmark(autocannon, settings);

  process.stdout.write(`\n${report(results, settings).join('\n')}\n`);
  if (!values['no-write']) {
    writeResults({ command, settings, results, loadAverage });
  }
  cleanUp();
}

// ---------------------------------------------------------------------------------------------------
// 1. Create throughput
// ---------------------------------------------------------------------------------------------------
async function createBenchmark(autocannon, settings, store) {
  const dataDir = tempDir(`nimbus-bench-create-${store.kind}-`);
  const env = { NIMBUS_SIM_SPEEDUP: String(SIM_SPEEDUP), NIMBUS_PUBLIC_IP_POOLS: CREATE_POOL };
  let durability = 'SQLite WAL, synchronous=FULL (every commit fsynced)';
  if (store.kind === 'postgres') {
    const name = `nimbus_bench_${process.pid}_${Date.now().toString(36)}`;
    await createDatabase(store.url, name);
    env.NIMBUS_DATABASE_URL = databaseUrl(store.url, name);
    // PostgreSQL requires a configured master key, the same for the server and the admin commands.
    env.NIMBUS_SECRET_KEY = randomBytes(32).toString('base64');
    const pgSettings = await pgQuery(env.NIMBUS_DATABASE_URL, [
      'show server_version',
      'show fsync',
      'show synchronous_commit',
      'show wal_sync_method',
    ]);
    durability =
      `PostgreSQL ${pgSettings[0].split(' ')[0]}, fsync=${pgSettings[1]}, synchronous_commit=${pgSettings[2]}, ` +
      `wal_sync_method=${pgSettings[3]}; a fresh database, pool of 10 connections`;
  }
  step(`create benchmark on ${store.kind} (data dir ${dataDir})`);
  const logFile = path.join(dataDir, 'nimbus.log');
  let nimbus = await startNimbus(dataDir, logFile, env);
  const auth = bootstrapAuth(dataDir);
  const accountId = await accountIdOf(nimbus.port, auth);
  const adminEnv =
    store.kind === 'postgres'
      ? { NIMBUS_DATABASE_URL: env.NIMBUS_DATABASE_URL, NIMBUS_SECRET_KEY: env.NIMBUS_SECRET_KEY }
      : {};
  raiseLimits(dataDir, accountId, QUOTAS, adminEnv);
  // Restarted, so no key cached before the limits were raised is still served.
  await stopChild(nimbus.child);
  nimbus = await startNimbus(dataDir, logFile, env);

  const url = `https://${HOST}:${nimbus.port}/v1/instances`;
  const load = {
    url,
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify(CREATE_BODY),
    connections: settings.createConnections,
  };
  await runLoad(
    autocannon,
    `${store.kind} create warm-up`,
    { ...load, duration: settings.warmup },
    null,
    202,
  );
  // Creates cut off by the end of a load may still commit: totals are read once those have settled.
  await sleep(1000);
  const before = await totals(nimbus.port, auth);
  const measured = await runLoad(
    autocannon,
    `${store.kind} create`,
    { ...load, duration: settings.createDuration },
    nimbus.child.pid,
    202,
  );
  // The boots: how many had finished when the load stopped, and how long the rest took.
  const stopped = performance.now();
  const atEnd = await totals(nimbus.port, auth);
  let now = atEnd;
  let drainSeconds = 0;
  while (now.all > now.running) {
    if (now.error > 0) fail(`${now.error} instances went to error`);
    if (performance.now() - stopped > 300_000)
      fail(`${now.all - now.running} instances not running after 300 s`);
    await sleep(100);
    now = await totals(nimbus.port, auth);
    drainSeconds = (performance.now() - stopped) / 1000;
  }
  // Creates cut off by the end of the load may still commit: the count is read once those have settled.
  await sleep(Math.max(0, 1000 - (performance.now() - stopped)));
  const after = await totals(nimbus.port, auth);
  const created = after.all - before.all;
  // Every 202 is an instance; a request cut off by the end of the load may have created one unanswered.
  if (created < measured.requests.total || created > measured.requests.total + settings.createConnections) {
    fail(`${measured.requests.total} creates answered 202 but the account grew by ${created}`);
  }
  await stopChild(nimbus.child);
  if (store.kind === 'postgres')
    await dropDatabase(store.url, new URL(env.NIMBUS_DATABASE_URL).pathname.slice(1));
  removeDir(dataDir);
  return {
    kind: store.kind,
    durability,
    ...summarize(measured),
    startedWith: before.all,
    endedWith: after.all,
    atEnd,
    drainSeconds,
  };
}

async function totals(port, auth) {
  const count = async (query) => {
    const res = await request(port, 'GET', `/v1/instances?limit=1${query}`, auth);
    if (res.status !== 200) fail(`GET /v1/instances${query} answered ${res.status}: ${res.body}`);
    return JSON.parse(res.body).pagination.total_items;
  };
  return {
    all: await count(''),
    running: await count('&status=running'),
    error: await count('&status=error'),
  };
}

// ---------------------------------------------------------------------------------------------------
// 2. List latency at 1,000,000 instances
// ---------------------------------------------------------------------------------------------------
async function listBenchmark(autocannon, settings) {
  const dataDir = tempDir('nimbus-bench-list-');
  const logFile = path.join(dataDir, 'nimbus.log');
  step(`list benchmark (data dir ${dataDir})`);
  let nimbus = await startNimbus(dataDir, logFile);
  const auth = bootstrapAuth(dataDir);
  const accountId = await accountIdOf(nimbus.port, auth);
  raiseLimits(dataDir, accountId, QUOTAS);
  await stopChild(nimbus.child);

  step(`seeding ${settings.count.toLocaleString('en-US')} instances`);
  const { seedInstances } = await import(pathToFileURL(path.join(ROOT, 'bench', 'seed-instances.mjs')).href);
  const seed = await seedInstances({ dataDir, accountId, count: settings.count, log: step });
  step(`seeded in ${seed.seconds.toFixed(1)} s`);
  const dbFile = path.join(dataDir, 'nimbus.db');
  const dbBytes = fileSize(dbFile);

  nimbus = await startNimbus(dataDir, logFile);
  const { default: Database } = await import('better-sqlite3');
  const check = new Database(dbFile, { readonly: true });
  const running = seed.byStatus.running ?? 0;
  const cases = listCases(seed.total, running);
  try {
    // Every case answers the right page: the same ids, in the same order, as plain SQL finds them.
    for (const c of cases) {
      const res = await request(nimbus.port, 'GET', c.path, auth);
      if (res.status !== 200) fail(`${c.path} answered ${res.status}: ${res.body}`);
      const body = JSON.parse(res.body);
      if (body.pagination.total_items !== c.total) {
        fail(`${c.path}: total_items ${body.pagination.total_items}, expected ${c.total}`);
      }
      const expected = check
        .prepare(
          `select id from instances where account_id = ?${c.status ? ' and status = ?' : ''}
           order by ${c.sort} ${c.order}, id ${c.order} limit ? offset ?`,
        )
        .all(accountId, ...(c.status ? [c.status] : []), LIMIT, (c.page - 1) * LIMIT)
        .map((r) => r.id);
      const got = body.data.map((i) => i.id);
      if (got.length !== expected.length || got.some((id, n) => id !== expected[n])) {
        fail(
          `${c.path}: wrong page (got ${got.slice(0, 3).join(',')}…, expected ${expected.slice(0, 3).join(',')}…)`,
        );
      }
    }
    step('every case answers the right page and total_items');

    for (const c of cases) {
      const load = {
        url: `https://${HOST}:${nimbus.port}${c.path}`,
        headers: auth,
        connections: settings.listConnections,
      };
      await runLoad(autocannon, `${c.label} warm-up`, { ...load, duration: settings.warmup }, null, 200);
      c.result = summarize(
        await runLoad(
          autocannon,
          c.label,
          { ...load, duration: settings.listDuration },
          nimbus.child.pid,
          200,
        ),
      );
    }
    const memory = processMemory(nimbus.child.pid);

    // total_items comes from instance_counts: a counter moved by one here shows at once, no row added.
    const writer = new Database(dbFile);
    const bump = (delta) =>
      writer
        .prepare(
          "update instance_counts set count = count + ? where account_id = ? and region = 'us-east-1' and status = 'running'",
        )
        .run(delta, accountId);
    bump(1);
    let shown;
    try {
      const res = await request(nimbus.port, 'GET', '/v1/instances?limit=1', auth);
      shown = JSON.parse(res.body).pagination.total_items;
    } finally {
      bump(-1);
      writer.close();
    }
    const countersUsed = shown === seed.total + 1;
    if (!countersUsed)
      fail(`total_items did not follow instance_counts (${shown}, expected ${seed.total + 1})`);
    const probe = await createProbe(nimbus.port, dataDir, auth);
    await stopChild(nimbus.child);

    const analysis = await analyse(dbFile, accountId, cases);
    check.close();
    removeDir(dataDir);
    return { seed, dbBytes, cases, memory, countersUsed, probe, analysis };
  } finally {
    if (check.open) check.close();
  }
}

/**
 * Creates with a million instances in the store, one at a time: by the seeded account (its private
 * network in the region is full), and by a second account in the region that holds the most instances.
 */
async function createProbe(port, dataDir, auth) {
  step('create probe: POST /v1/instances with the seeded instances in the store');
  const body = CREATE_BODY;
  const timed = async (headers) => {
    const t = performance.now();
    const res = await request(port, 'POST', '/v1/instances', headers, body);
    return { status: res.status, ms: performance.now() - t, body: res.body };
  };
  const full = await timed(auth);
  // 409 once the account's private network in the region (a /16) is full, as it is at a million.
  if (full.status !== 409 && full.status !== 202) {
    fail(`a create in the seeded account answered ${full.status}: ${full.body}`);
  }
  const other = admin(dataDir, ['create-account', '--email', 'probe@bench.local', '--plan', 'enterprise']);
  const otherAuth = { authorization: `Bearer ${other.api_key}` };
  const times = [];
  for (let i = 0; i < 20; i++) {
    const res = await timed(otherAuth);
    if (res.status !== 202) fail(`a create by the second account answered ${res.status}: ${res.body}`);
    times.push(res.ms);
  }
  times.sort((a, b) => a - b);
  return {
    fullStatus: full.status,
    fullMs: full.ms,
    fullMessage: JSON.parse(full.body).error?.message ?? 'created',
    creates: times.length,
    p50: times[Math.floor(times.length / 2)],
    max: times[times.length - 1],
  };
}

function listCases(total, running) {
  const lastPage = (n) => Math.max(1, Math.ceil(n / LIMIT));
  const middle = (n) => Math.max(1, Math.ceil(lastPage(n) / 2));
  const make = (label, { sort, order, status, page, firstPage }) => {
    const params = new URLSearchParams();
    if (status) params.set('status', status);
    if (sort !== 'created_at') params.set('sort', sort);
    if (order !== 'desc') params.set('order', order);
    if (page !== 1) params.set('page', String(page));
    const query = params.toString();
    return {
      label,
      sort,
      order,
      status,
      page,
      firstPage,
      total: status ? running : total,
      path: `/v1/instances${query ? `?${query}` : ''}`,
    };
  };
  const created = { sort: 'created_at', order: 'desc' };
  const name = { sort: 'name', order: 'asc' };
  return [
    make('created_at desc, page 1', { ...created, page: 1, firstPage: true }),
    make(`created_at desc, page ${middle(total)} (middle)`, { ...created, page: middle(total) }),
    make(`created_at desc, page ${lastPage(total)} (last)`, { ...created, page: lastPage(total) }),
    make('name asc, page 1', { ...name, page: 1, firstPage: true }),
    make(`name asc, page ${middle(total)} (middle)`, { ...name, page: middle(total) }),
    make(`name asc, page ${lastPage(total)} (last)`, { ...name, page: lastPage(total) }),
    make('status=running, page 1', { ...created, status: 'running', page: 1, firstPage: true }),
    make(`status=running, page ${middle(running)} (middle)`, {
      ...created,
      status: 'running',
      page: middle(running),
    }),
  ];
}

/** VmRSS and the peak VmHWM of a process, in MB (Linux /proc). */
function processMemory(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN);
  return { rssMb: kb('VmRSS') / 1024, peakMb: kb('VmHWM') / 1024 };
}

// ---------------------------------------------------------------------------------------------------
// 3. What each list request runs in the store, and how SQLite plans it
// ---------------------------------------------------------------------------------------------------
async function analyse(dbFile, accountId, cases) {
  step('store analysis: the SQL of each case through dist/resources/instances/store.js, timed and explained');
  const { Kysely, SqliteDialect } = await import('kysely');
  const { default: Database } = await import('better-sqlite3');
  const { listInstances } = await import(
    pathToFileURL(path.join(ROOT, 'dist', 'store', 'instances.js')).href
  );
  const database = new Database(dbFile, { readonly: true });
  let captured = [];
  const db = new Kysely({
    dialect: new SqliteDialect({ database }),
    log: (event) => captured.push({ sql: event.query.sql, parameters: event.query.parameters }),
  });
  try {
    for (const c of cases) {
      captured = [];
      await listInstances(db, accountId, c.status ? { status: c.status } : {}, {
        page: c.page,
        limit: LIMIT,
        sort: c.sort,
        order: c.order,
      });
      const shape = captured.map(({ sql }) =>
        sql.includes('"instance_counts"') ? 'total' : sql.includes('"page_id"') ? 'page' : 'rows',
      );
      if (shape.join() !== 'total,page,rows')
        fail(`${c.label}: unexpected statements: ${JSON.stringify(captured)}`);
      c.statements = captured.map(({ sql, parameters }) => {
        const statement = database.prepare(sql);
        statement.all(...parameters);
        const times = [];
        for (let i = 0; i < 25; i++) {
          const t = performance.now();
          statement.all(...parameters);
          times.push(performance.now() - t);
        }
        times.sort((a, b) => a - b);
        const plan = database
          .prepare(`explain query plan ${sql}`)
          .all(...parameters)
          .map((row) => row.detail);
        // total_items must not come from counting the instances.
        if (/count\(/i.test(sql) && /from "instances"/.test(sql))
          fail(`a list request counts instances: ${sql}`);
        return {
          sql: sql.replace(/\s+/g, ' '),
          parameters,
          ms: times[Math.floor(times.length / 2)],
          plan,
        };
      });
    }
  } finally {
    await db.destroy();
  }
  return true;
}

// ---------------------------------------------------------------------------------------------------
// PostgreSQL: a fresh database per run, dropped at the end (synchronously too, from the exit handler)
// ---------------------------------------------------------------------------------------------------
function databaseUrl(base, name) {
  const url = new URL(base);
  url.pathname = `/${name}`;
  return url.toString();
}

async function pgQuery(url, statements) {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const out = [];
    for (const statement of statements) {
      const res = await client.query(statement);
      out.push(res.rows[0] ? Object.values(res.rows[0])[0] : null);
    }
    return out;
  } finally {
    await client.end();
  }
}

async function createDatabase(base, name) {
  databases.add({ url: base, name });
  await pgQuery(databaseUrl(base, 'postgres'), [`create database "${name}"`]);
}

async function dropDatabase(base, name) {
  await pgQuery(databaseUrl(base, 'postgres'), [`drop database if exists "${name}" with (force)`]);
  for (const entry of databases) if (entry.name === name) databases.delete(entry);
}

function dropDatabaseSync(base, name) {
  const code = `import pg from 'pg';
    const client = new pg.Client({ connectionString: process.argv[1] });
    await client.connect();
    await client.query('drop database if exists "${name}" with (force)');
    await client.end();`;
  const result = spawnSync(
    process.execPath,
    ['--input-type=module', '-e', code, databaseUrl(base, 'postgres')],
    { cwd: ROOT, encoding: 'utf8', timeout: 30_000 },
  );
  if (result.status !== 0)
    process.stderr.write(`[bench] could not drop database ${name}: ${result.stderr}\n`);
}

// ---------------------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------------------
function fileSize(file) {
  let bytes = 0;
  for (const suffix of ['', '-wal'])
    if (existsSync(`${file}${suffix}`)) bytes += statSync(`${file}${suffix}`).size;
  return bytes;
}

// ---------------------------------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------------------------------
function verdicts(list) {
  const firstPages = list.cases.filter((c) => c.firstPage);
  const worstFirst = Math.max(...firstPages.map((c) => c.result.p99));
  const worstAny = Math.max(...list.cases.map((c) => c.result.p99));
  return {
    worstFirst,
    worstAny,
    firstMet: worstFirst <= TARGETS.firstPageP99,
    anyMet: worstAny <= TARGETS.anyPageP99,
    rssMet: list.memory.rssMb <= TARGETS.rssMb,
  };
}

const met = (ok) => (ok ? 'met' : 'NOT met');

/** The distinct statements the cases ran, with the parameter lists shortened. */
function statementShapes(cases) {
  const shapes = new Set();
  for (const c of cases) {
    for (const s of c.statements) {
      shapes.add(
        s.sql
          .replace(/\(\?(, \?)+\)/, '(?, … 20 ids)')
          .replace(/order by .* limit/, 'order by <sort> <asc|desc>, "id" <asc|desc> limit'),
      );
    }
  }
  return [...shapes];
}

function report({ create, list }) {
  const lines = [];
  for (const c of create) {
    lines.push(
      `create ${c.kind.padEnd(8)} ${fmt(c.rps)} instances/s  p50 ${c.p50} ms  p99 ${c.p99} ms  ` +
        `(${c.requests} created, ${c.atEnd.running} of ${c.atEnd.all} running at the end of the load, ` +
        `rest booted ${c.drainSeconds.toFixed(1)} s later; first ${c.window} s ${fmt(c.firstRate)}/s, last ${c.window} s ` +
        `${fmt(c.lastRate)}/s; server ${cpuText(c)})`,
    );
  }
  if (list) {
    lines.push(`seeded ${fmt(list.seed.total)} instances in ${list.seed.seconds.toFixed(1)} s`);
    for (const c of list.cases) {
      lines.push(
        `list ${c.label.padEnd(40)} p50 ${c.result.p50} ms  p99 ${c.result.p99} ms  ${fmt(c.result.rps)} req/s`,
      );
      for (const s of c.statements ?? []) {
        lines.push(`    ${s.ms.toFixed(2)} ms  ${s.sql.slice(0, 120)}  [${s.plan.join('; ')}]`);
      }
    }
    const v = verdicts(list);
    const p = list.probe;
    lines.push(
      `create at ${fmt(list.seed.total)}: seeded account ${p.fullStatus} in ${p.fullMs.toFixed(0)} ms (${p.fullMessage}); ` +
        `second account, ${p.creates} creates one at a time: p50 ${p.p50.toFixed(0)} ms, max ${p.max.toFixed(0)} ms`,
    );
    lines.push(
      `RSS ${list.memory.rssMb.toFixed(0)} MB (peak ${list.memory.peakMb.toFixed(0)} MB); ` +
        `page-1 p99 ≤ ${TARGETS.firstPageP99} ms: ${met(v.firstMet)} (worst ${v.worstFirst}); ` +
        `any page p99 ≤ ${TARGETS.anyPageP99} ms: ${met(v.anyMet)} (worst ${v.worstAny}); ` +
        `RSS ≤ ${TARGETS.rssMb} MB: ${met(v.rssMet)}; total_items from instance_counts: ${list.countersUsed}`,
    );
  }
  return lines;
}

function writeResults({ command, settings, results, loadAverage }) {
  const out = [
    '## Instances: create throughput and list latency at 1,000,000 instances (issue #3)',
    '',
    ...runHeader({
      loadAverage,
      command,
      npmScript: 'bench:instances',
      machineNote: ' Server, load generator and (for the PostgreSQL figures) PostgreSQL share the 2 cores.',
    }),
  ];
  const { create, list } = results;
  if (create.length > 0) {
    out.push(
      '### Create throughput (`POST /v1/instances`, durable commits)',
      '',
      `autocannon, ${settings.createConnections} keep-alive TLS connections, ${settings.warmup} s warm-up then ` +
        `${settings.createDuration} s measured, each store on a fresh data dir (and a fresh PostgreSQL database). ` +
        'Body: `compute-1x` in `us-east-1`, `ubuntu-24.04`. The bootstrap account has its rate limit ' +
        `and its \`instances\`/\`vcpus\` quotas raised with \`bin/nimbus admin\`; \`NIMBUS_PUBLIC_IP_POOLS=${CREATE_POOL}\`. ` +
        'Each create runs in one transaction (account lock, quota counts, address allocation, root volume, ' +
        `instance, event, boot job) and answers 202; with \`NIMBUS_SIM_SPEEDUP=${SIM_SPEEDUP}\` the boot job ` +
        '(provision, boot 8 ms, mark running, event) runs in the same server during the load. Logging at info to a file.',
      '',
      '| store | durability | instances/s | first → last 5 s | p50 (ms) | p99 (ms) | created while measured | running when the load stopped | all running after | server CPU |',
      '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|',
      ...create.map(
        (c) =>
          `| ${c.kind === 'sqlite' ? 'SQLite' : 'PostgreSQL'} | ${c.durability} | **${fmt(c.rps)}** | ` +
          `${fmt(c.firstRate)} → ${fmt(c.lastRate)}/s | ${c.p50} | ${c.p99} | ${c.requests} | ` +
          `${c.atEnd.running} of ${c.atEnd.all} | ${c.drainSeconds.toFixed(1)} s | ${cpuText(c)} |`,
      ),
      '',
      '"first → last 5 s": the rate in the first and the last 5 s of the measured window; "running when the ' +
        'load stopped": instances whose boot had completed, of all instances, when the load ended (the warm-up ' +
        'instances included); "all running after": how long after the load the last boot finished (0 when none was left).',
      '',
    );
  }
  if (list) {
    const v = verdicts(list);
    out.push(
      `### List latency with ${fmt(list.seed.total)} instances in one account (SQLite)`,
      '',
      `Seeded by \`bench/seed-instances.mjs\` in ${list.seed.seconds.toFixed(1)} s ` +
        `(${fmt(list.seed.total)} instances, ${fmt(list.seed.tagRows)} tag rows, ${fmt(list.seed.distinctNames)} distinct names; ` +
        `statuses ${Object.entries(list.seed.byStatus)
          .map(([s, n]) => `${s} ${fmt(n)}`)
          .join(
            ', ',
          )}; database ${(list.dbBytes / 2 ** 20).toFixed(0)} MB), then the server restarted on it. ` +
        `autocannon, ${settings.listConnections} keep-alive TLS connection(s) (closed loop: the latency of one ` +
        `request, not queueing), ${settings.warmup} s warm-up then ${settings.listDuration} s per case, limit ${LIMIT}. ` +
        'Before the load, every case was checked to answer the same page as plain SQL `ORDER BY … LIMIT … OFFSET …` and the seeded total_items.',
      '',
      '| case | request | p50 (ms) | p99 (ms) | req/s | server CPU | target (p99) |',
      '|---|---|---:|---:|---:|---:|---|',
      ...list.cases.map((c) => {
        const target = c.firstPage ? TARGETS.firstPageP99 : TARGETS.anyPageP99;
        return (
          `| ${c.label} | \`GET ${c.path}\` | ${c.result.p50} | ${c.result.p99} | ${fmt(c.result.rps)} | ${cpuText(c.result)} | ` +
          `≤ ${target} ms: ${met(c.result.p99 <= target)} |`
        );
      }),
      '',
      `Server RSS after the list runs: **${list.memory.rssMb.toFixed(0)} MB** (peak VmHWM ${list.memory.peakMb.toFixed(0)} MB).`,
      '',
      `Creates with ${fmt(list.seed.total)} instances in the store (same server, after the list runs, one request at a ` +
        `time): by the seeded account, **${list.probe.fullStatus}** in ${list.probe.fullMs.toFixed(0)} ms ` +
        `("${list.probe.fullMessage}"); by a second (enterprise) account in us-east-1, which holds ` +
        `${fmt(list.seed.byRegion?.['us-east-1'] ?? 0)} of the seeded instances: p50 **${list.probe.p50.toFixed(0)} ms**, ` +
        `max ${list.probe.max.toFixed(0)} ms over ${list.probe.creates} creates.`,
      '',
      'Targets:',
      '',
      `- page-1 p99 ≤ ${TARGETS.firstPageP99} ms at 1,000,000 instances: **${met(v.firstMet)}** (worst page-1 p99 ${v.worstFirst} ms)`,
      `- any page p99 ≤ ${TARGETS.anyPageP99} ms: **${met(v.anyMet)}** (worst p99 ${v.worstAny} ms)`,
      `- total_items without a full count per request: **${met(list.countersUsed)}**: it is the sum of the account's ` +
        '`instance_counts` rows (below); a counter moved by one in the database showed in total_items at once, with no row added',
      `- RSS ≤ ${TARGETS.rssMb} MB: **${met(v.rssMet)}**`,
      '',
      '#### What each request runs in the store',
      '',
      'Each case run once more through `listInstances` (dist/resources/instances/store.js) on a logging Kysely over the same ' +
        'file, with the server stopped; each statement then timed alone with better-sqlite3 (median of 25, warm ' +
        'cache, default page cache) and explained (`EXPLAIN QUERY PLAN`). Every case runs exactly three statements, ' +
        'and none of them counts instances:',
      '',
      ...statementShapes(list.cases).map((shape) => `- \`${shape}\``),
      '',
      '| case | total_items from instance_counts: plan, alone | page of ids: order, offset | plan | alone (ms) | rows by id: plan, alone |',
      '|---|---|---|---|---:|---|',
      ...list.cases.map((c) => {
        const [total, page, rows] = c.statements;
        const [order, offset] = [page.sql.match(/order by (.*) limit/)[1], page.parameters.at(-1)];
        return (
          `| ${c.label} | ${total.plan.join('; ')}, ${total.ms.toFixed(2)} ms | ${order.replace(/"/g, '')}, offset ${fmt(offset)} | ` +
          `${page.plan.join('; ')} | **${page.ms.toFixed(2)}** | ${rows.plan.join('; ')}, ${rows.ms.toFixed(2)} ms |`
        );
      }),
      '',
    );
  }
  writeSection(SCRIPT, out);
}

await main();
