/**
 * Benchmark of issue #16 (billing), on SQLite (WAL, every commit fsynced), a built Nimbus on a fresh data
 * dir:
 *
 * 1. Usage of a large account: GET /v1/billing/usage (this month so far, one line per resource and price)
 *    for an account with --instances instances (10,000) and a month of transitions — each instance stops
 *    and starts about --transitions-per-day times a day over the last 30 days, one in ten is resized once,
 *    so its metered history (`meter_segments`) holds about 60 intervals per instance, the last one still
 *    open. Target: p99 ≤ 100 ms. Answers are pages of up to 1,000 lines: the first page and the last are
 *    measured, then group_by=resource_type and group_by=day, and the CSV (every line in one file).
 * 2. Closing a period for --accounts accounts (10,000): each used two instances that stopped and started
 *    once a day through last month, and a 50 GB volume the whole month; `nimbus admin close-period`
 *    (a process of its own, as an operator runs it) opens one invoice per account. Target: ≤ 60 s.
 *
 * Seeding is setup, not measured: the instances of the large account by bench/seed-instances.mjs, the
 * accounts and every metered interval straight into the SQLite file with better-sqlite3 (prepared
 * statements, one transaction per 50,000 rows), in the columns the lifecycle core writes them with
 * (resources/billing/meter-store.ts switchMeter: the interval, and the closed ones' seconds added to the month
 * totals), at the catalogue's prices. Nothing else of those accounts exists (billing reads only the
 * intervals, the totals, the accounts and their invoices).
 *
 * With --base <revision>, that revision is checked out and built too (bench/lib.mjs checkOutAndBuild), the
 * store is made and seeded by it, and a copy serves this working tree (its own migrations run on the
 * copy, as on an upgrade): both close the period and answer the same requests, one after the other in
 * the same run, so the two are compared on the same host under the same load.
 *
 * Usage (from the repository root):
 *   node bench/billing.mjs [--instances 10000] [--transitions-per-day 2] [--accounts 10000]
 *     [--duration 20] [--connections 1] [--base REV] [--no-build] [--no-write] [--keep] [--cpu-prof DIR]
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import {
  accountIdOf,
  bootstrapAuth,
  checkOutAndBuild,
  cleanUpOnExit,
  cleanup,
  fail,
  fmt,
  HOST,
  positiveInt,
  prepareRun,
  ROOT,
  raiseLimits,
  request,
  runHeader,
  runLoad,
  startNimbus,
  step,
  stopChild,
  summarize,
  tempDir,
  writeSection,
} from './lib.mjs';

const SCRIPT = 'bench/billing.mjs';
const ENV = { NIMBUS_SIM_SPEEDUP: '1000' };
const DAY_MS = 86_400_000;
const BATCH = 50_000;

const { values } = parseArgs({
  options: {
    instances: { type: 'string', default: '10000' },
    'transitions-per-day': { type: 'string', default: '2' },
    accounts: { type: 'string', default: '10000' },
    duration: { type: 'string', default: '20' },
    connections: { type: 'string', default: '1' },
    'no-build': { type: 'boolean', default: false },
    'no-write': { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
    'cpu-prof': { type: 'string' },
    base: { type: 'string' },
  },
});
const INSTANCES = positiveInt(values.instances, 'instances');
const PER_DAY = positiveInt(values['transitions-per-day'], 'transitions-per-day');
const ACCOUNTS = positiveInt(values.accounts, 'accounts');
const DURATION = positiveInt(values.duration, 'duration');
const CONNECTIONS = positiveInt(values.connections, 'connections');
const PROFILE_DIR = values['cpu-prof'] ? path.resolve(values['cpu-prof']) : null;
cleanup.keep = values.keep;
cleanUpOnExit();

const dist = (file) => import(pathToFileURL(path.join(ROOT, 'dist', file)).href);

/** mulberry32: a fixed-seed generator, so every run seeds the same history. */
function generator(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The whole seconds of [startS, endS) in each UTC month it touches (as resources/billing/meter-store.ts adds them). */
function monthSpans(startS, endS) {
  const spans = [];
  const first = new Date(startS * 1000);
  let month = Date.UTC(first.getUTCFullYear(), first.getUTCMonth(), 1) / 1000;
  while (month < endS) {
    const at = new Date(month * 1000);
    const next = Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1) / 1000;
    const seconds = Math.min(endS, next) - Math.max(startS, month);
    if (seconds > 0) spans.push({ monthS: month, seconds });
    month = next;
  }
  return spans;
}

/**
 * Writes intervals (objects in meter_segments' columns) in start order, BATCH rows per transaction, and
 * the closed ones' seconds into meter_month_totals, as closing each would have added them.
 */
function insertSegments(db, segments) {
  segments.sort((a, b) => a.start_s - b.start_s);
  const insert = db.prepare(
    `insert into meter_segments (account_id, resource_id, resource_type, resource_name, meter, region,
       instance_type, size_gb, unit, unit_price_micros, started_at, start_s, ended_at, end_s)
     values (@account_id, @resource_id, @resource_type, @resource_name, @meter, @region, @instance_type,
       @size_gb, @unit, @unit_price_micros, @started_at, @start_s, @ended_at, @end_s)`,
  );
  const addTotal = db.prepare(
    `insert into meter_month_totals (month_s, account_id, resource_id, price_key, resource_type, resource_name,
       meter, instance_type, size_gb, unit, unit_price_micros, seconds, first_seq)
     values (@month_s, @account_id, @resource_id, @price_key, @resource_type, @resource_name, @meter,
       @instance_type, @size_gb, @unit, @unit_price_micros, @seconds, @first_seq)
     on conflict (month_s, account_id, resource_id, price_key) do update set
       seconds = meter_month_totals.seconds + excluded.seconds,
       first_seq = min(meter_month_totals.first_seq, excluded.first_seq),
       resource_name = excluded.resource_name`,
  );
  // Since migration 0023 an open interval also marks the row of the month it began in (open_start_s).
  const marksOpen = db
    .prepare('select name from pragma_table_info(?)')
    .all('meter_month_totals')
    .some((column) => column.name === 'open_start_s');
  const mark = marksOpen
    ? db.prepare(
        `insert into meter_month_totals (month_s, account_id, resource_id, price_key, resource_type, resource_name,
           meter, instance_type, size_gb, unit, unit_price_micros, seconds, first_seq, open_start_s)
         values (@month_s, @account_id, @resource_id, @price_key, @resource_type, @resource_name, @meter,
           @instance_type, @size_gb, @unit, @unit_price_micros, 0, @first_seq, @start_s)
         on conflict (month_s, account_id, resource_id, price_key) do update set
           first_seq = min(meter_month_totals.first_seq, excluded.first_seq),
           resource_name = excluded.resource_name, open_start_s = excluded.open_start_s`,
      )
    : null;
  const batch = db.transaction((rows) => {
    for (const row of rows) {
      const seq = Number(insert.run(row).lastInsertRowid);
      if (row.end_s === null) {
        if (mark) {
          const monthS = monthSpans(row.start_s, row.start_s + 1)[0].monthS;
          const priceKey = `${row.meter}|${row.instance_type ?? ''}|${row.size_gb ?? ''}|${row.unit_price_micros}`;
          mark.run({ ...row, month_s: monthS, price_key: priceKey, first_seq: seq });
        }
        continue;
      }
      const priceKey = `${row.meter}|${row.instance_type ?? ''}|${row.size_gb ?? ''}|${row.unit_price_micros}`;
      for (const { monthS, seconds } of monthSpans(row.start_s, row.end_s)) {
        addTotal.run({ ...row, month_s: monthS, price_key: priceKey, seconds, first_seq: seq });
      }
    }
  });
  for (let from = 0; from < segments.length; from += BATCH) batch(segments.slice(from, from + BATCH));
}

/**
 * The metered history of one instance from `fromMs` to `toMs`: running and stopped in turn, about
 * `perDay` changes a day (exponential gaps), optionally one resize to `resizeTo` half way; the last
 * interval is left open when `openEnd`.
 */
function instanceHistory({
  accountId,
  id,
  name,
  region,
  type,
  resizeTo,
  fromMs,
  toMs,
  perDay,
  random,
  openEnd,
}) {
  const out = [];
  let at = fromMs;
  let running = random() < 0.7;
  let current = type;
  const resizeAt = resizeTo ? fromMs + (toMs - fromMs) / 2 : Number.POSITIVE_INFINITY;
  while (at < toMs) {
    const gap = Math.max(60_000, Math.round(-Math.log(1 - random()) * (DAY_MS / perDay)));
    let end = Math.min(toMs, at + gap);
    if (at < resizeAt && end > resizeAt) end = resizeAt;
    const last = end >= toMs;
    out.push({
      account_id: accountId,
      resource_id: id,
      resource_type: 'instance',
      resource_name: name,
      meter: running ? 'instance_compute' : 'instance_storage',
      region,
      instance_type: current.name,
      size_gb: running ? null : current.storage_gb,
      unit: running ? 'hour' : 'GB-month',
      unit_price_micros: running ? current.price_per_hour_micros : 100_000,
      started_at: new Date(at).toISOString(),
      start_s: Math.floor(at / 1000),
      ended_at: last && openEnd ? null : new Date(end).toISOString(),
      end_s: last && openEnd ? null : Math.floor(end / 1000),
    });
    if (end === resizeAt && resizeTo) current = resizeTo;
    else running = !running;
    at = end;
  }
  return out;
}

async function seed(dataDir, bigAccount) {
  const { seedInstances } = await import(pathToFileURL(path.join(ROOT, 'bench', 'seed-instances.mjs')).href);
  const { newId } = await dist('platform/domain/ids.js');
  const { INSTANCE_TYPES } = await dist('resources/catalog/catalog.js');
  const types = new Map(INSTANCE_TYPES.map((type) => [type.name, type]));
  const started = performance.now();
  await seedInstances({
    dataDir,
    accountId: bigAccount,
    count: INSTANCES,
    log: step,
    monitoringShare: 0,
    root: baseRoot ?? ROOT,
  });

  const db = new Database(path.join(dataDir, 'nimbus.db'));
  const random = generator(16_2026);
  const now = Date.now();
  const thisMonth = Date.UTC(new Date(now).getUTCFullYear(), new Date(now).getUTCMonth(), 1);
  const lastMonth = Date.UTC(new Date(now).getUTCFullYear(), new Date(now).getUTCMonth() - 1, 1);
  try {
    db.pragma('journal_mode = OFF');
    db.pragma('synchronous = OFF');
    db.pragma('cache_size = -1048576');
    const indexes = db
      .prepare(
        "select name, sql from sqlite_master where type = 'index' and sql is not null and tbl_name = 'meter_segments'",
      )
      .all();
    for (const index of indexes) db.exec(`drop index "${index.name}"`);

    // 1. The large account: a month of transitions of each of its instances, up to now.
    const instances = db
      .prepare('select id, name, region, instance_type from instances where account_id = ?')
      .all(bigAccount);
    const cpuTypes = INSTANCE_TYPES.filter((type) => type.gpu === null);
    let segments = [];
    for (const instance of instances) {
      const type = types.get(instance.instance_type);
      segments.push(
        ...instanceHistory({
          accountId: bigAccount,
          id: instance.id,
          name: instance.name,
          region: instance.region,
          type,
          resizeTo: random() < 0.1 ? cpuTypes[Math.floor(random() * cpuTypes.length)] : null,
          fromMs: now - 30 * DAY_MS,
          toMs: now,
          perDay: PER_DAY,
          random,
          openEnd: true,
        }),
      );
    }
    const bigSegments = segments.length;
    insertSegments(db, segments);
    step(`seeded ${fmt(bigSegments)} intervals of ${fmt(instances.length)} instances (the large account)`);

    // 2. The accounts whose last month is closed: two instances stopping and starting daily, a volume.
    const template = db.prepare('select * from accounts where id = ?').get(bigAccount);
    const columns = Object.keys(template);
    const insertAccount = db.prepare(
      `insert into accounts (${columns.join(', ')}) values (${columns.map((c) => `@${c}`).join(', ')})`,
    );
    const accountIds = [];
    const addAccounts = db.transaction((from, to) => {
      for (let n = from; n < to; n++) {
        const id = newId('account', new Date(lastMonth - DAY_MS));
        insertAccount.run({
          ...template,
          id,
          name: `Billing bench ${n}`,
          email: `billing-bench-${n}@example.com`,
          plan: 'professional',
          status: 'active',
        });
        accountIds.push(id);
      }
    });
    for (let from = 0; from < ACCOUNTS; from += BATCH) addAccounts(from, Math.min(ACCOUNTS, from + BATCH));
    segments = [];
    let accountSegments = 0;
    const small = [types.get('compute-1x'), types.get('compute-2x')];
    const flush = () => {
      accountSegments += segments.length;
      insertSegments(db, segments);
      segments = [];
    };
    for (const accountId of accountIds) {
      for (const type of small) {
        segments.push(
          ...instanceHistory({
            accountId,
            id: newId('instance', new Date(lastMonth)),
            name: `${type.name}-worker`,
            region: 'us-east-1',
            type,
            resizeTo: null,
            fromMs: lastMonth,
            toMs: thisMonth,
            perDay: 2,
            random,
            openEnd: false,
          }),
        );
      }
      segments.push({
        account_id: accountId,
        resource_id: newId('volume', new Date(lastMonth)),
        resource_type: 'volume',
        resource_name: 'data',
        meter: 'volume_storage',
        region: 'us-east-1',
        instance_type: null,
        size_gb: 50,
        unit: 'GB-month',
        unit_price_micros: 100_000,
        started_at: new Date(lastMonth).toISOString(),
        start_s: lastMonth / 1000,
        ended_at: null,
        end_s: null,
      });
      if (segments.length >= BATCH) flush();
    }
    flush();
    step(`seeded ${fmt(ACCOUNTS)} accounts with ${fmt(accountSegments)} intervals last month`);
    for (const index of indexes) db.exec(index.sql);
    db.exec('analyze');
    db.pragma('journal_mode = WAL');
    return {
      seconds: (performance.now() - started) / 1000,
      bigSegments,
      accountSegments,
      lastMonth: new Date(lastMonth).toISOString().slice(0, 7),
    };
  } finally {
    db.close();
  }
}

/** `nimbus admin …` timed as a process of its own (with --cpu-prof when asked). */
function timedAdmin(dataDir, args, root = ROOT) {
  const nodeArgs = PROFILE_DIR ? ['--cpu-prof', '--cpu-prof-dir', PROFILE_DIR] : [];
  const started = performance.now();
  const result = spawnSync(
    process.execPath,
    [...nodeArgs, path.join(root, 'bin', 'nimbus'), 'admin', ...args, '--json'],
    {
      cwd: root,
      env: {
        ...Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('NIMBUS_'))),
        ...ENV,
        NIMBUS_DATA_DIR: dataDir,
      },
      encoding: 'utf8',
    },
  );
  const seconds = (performance.now() - started) / 1000;
  if (result.status !== 0) fail(`admin ${args[0]} failed: ${result.stderr}`);
  return { seconds, output: JSON.parse(result.stdout) };
}

const { command, loadAverage, autocannon } = await prepareRun(SCRIPT, { build: !values['no-build'] });
if (PROFILE_DIR) mkdirSync(PROFILE_DIR, { recursive: true });
const baseRoot = values.base ? checkOutAndBuild(values.base) : null;
const dataDir = tempDir('nimbus-bench-billing-');
step(`data dir ${dataDir}`);
// The store is made (and seeded) by the oldest build that serves it: the base's, when there is one.
const nimbus = await startNimbus(dataDir, path.join(dataDir, 'nimbus.log'), ENV, baseRoot ?? ROOT);
const auth = bootstrapAuth(dataDir);
const bigAccount = await accountIdOf(nimbus.port, auth);
await stopChild(nimbus.child);
const seeded = await seed(dataDir, bigAccount);
raiseLimits(dataDir, bigAccount, [], ENV, baseRoot ?? ROOT);

/** Each build measured: its checkout and its data dir (the base's a copy of the seeded one). */
const builds = [{ name: 'this tree', root: ROOT, dataDir }];
if (baseRoot) {
  const baseDir = tempDir('nimbus-bench-billing-base-');
  cpSync(dataDir, baseDir, { recursive: true });
  builds.unshift({ name: `base (${values.base})`, root: baseRoot, dataDir: baseDir });
}

// 2 first: the server's billing job would close last month itself on start.
for (const build of builds) {
  step(`${build.name}: closing ${seeded.lastMonth} for ${fmt(ACCOUNTS + 1)} accounts (admin close-period)`);
  build.close = timedAdmin(build.dataDir, ['close-period'], build.root);
  if (build.close.output.invoices_opened < ACCOUNTS)
    fail(`close-period opened ${build.close.output.invoices_opened} invoices`);
  build.again = timedAdmin(build.dataDir, ['close-period'], build.root);
  if (build.again.output.invoices_opened !== 0) fail('closing again opened invoices');
  step(
    `closed in ${build.close.seconds.toFixed(1)} s (${build.close.output.invoices_opened} invoices); again: ${build.again.seconds.toFixed(1)} s`,
  );
}

for (const build of builds) {
  build.server = await startNimbus(
    build.dataDir,
    path.join(build.dataDir, 'nimbus.log'),
    ENV,
    build.root,
    PROFILE_DIR ? ['--cpu-prof', '--cpu-prof-dir', PROFILE_DIR] : [],
  );
  const first = performance.now();
  const probe = await request(build.server.port, 'GET', '/v1/billing/usage', auth);
  build.firstMs = performance.now() - first;
  if (probe.status !== 200) fail(`usage answered ${probe.status}: ${probe.body.slice(0, 300)}`);
  build.probed = JSON.parse(probe.body);
  build.bytes = Buffer.byteLength(probe.body);
}
const probed = builds[0].probed;
const usage = probed.data;
const totalLines = probed.pagination?.total_items ?? usage.line_items.length;
const lastPage = probed.pagination?.total_pages ?? 1;
const bytes = builds[0].bytes;
// The builds must answer alike (the as-of second may differ between the two requests, so not the amounts).
for (const build of builds.slice(1)) {
  const other = build.probed;
  const shape = (answer) =>
    JSON.stringify([
      answer.pagination,
      answer.data.line_items.map((line) => [line.resource_id, line.meter, line.description]),
    ]);
  if (shape(other) !== shape(probed)) fail(`${build.name} answered other lines than ${builds[0].name}`);
}
step(
  `first usage: ${builds.map((b) => `${b.name} ${b.firstMs.toFixed(0)} ms`).join(', ')}; ${fmt(usage.line_items.length)} of ${fmt(totalLines)} lines, ${fmt(bytes / 1024)} KiB`,
);

const measure = async (build, label, urlPath) => {
  const load = {
    url: `https://${HOST}:${build.server.port}${urlPath}`,
    headers: auth,
    connections: CONNECTIONS,
  };
  // Warm-up: one whole answer (a 3 s run of autocannon counts none when an answer takes longer than that).
  const warm = await request(build.server.port, 'GET', urlPath, auth);
  if (warm.status !== 200) fail(`${label}: warm-up answered ${warm.status}`);
  return {
    label,
    build: build.name,
    ...summarize(
      await runLoad(
        autocannon,
        `${build.name}: ${label}`,
        { ...load, duration: DURATION },
        build.server.child.pid,
        200,
      ),
    ),
  };
};
const requests = [
  ['GET /v1/billing/usage', '/v1/billing/usage'],
  [`GET /v1/billing/usage?page=${lastPage}`, `/v1/billing/usage?page=${lastPage}`],
  ['GET /v1/billing/usage?group_by=resource_type', '/v1/billing/usage?group_by=resource_type'],
  ['GET /v1/billing/usage?group_by=day', '/v1/billing/usage?group_by=day'],
  ['GET /v1/billing/usage.csv', '/v1/billing/usage.csv'],
];
// Each request on each build in turn, so whatever else loads the host falls on both alike.
const rows = [];
for (const [label, urlPath] of requests) {
  for (const build of builds) rows.push(await measure(build, label, urlPath));
}
for (const build of builds) await stopChild(build.server.child);

const mine = rows.filter((r) => r.build === 'this tree');
const p99 = mine[0].p99;
const close = builds.at(-1).close;
const again = builds.at(-1).again;
const lines = [
  '## Billing: usage of a large account, closing a period (issue #16)',
  '',
  ...runHeader({ loadAverage, command, npmScript: 'bench:billing' }),
  `SQLite (WAL, synchronous=FULL), a fresh data dir. The large account has ${fmt(INSTANCES)} instances`,
  `(bench/seed-instances.mjs) and ${fmt(seeded.bigSegments)} metered intervals over the last 30 days`,
  `(each instance stops and starts about ${PER_DAY}× a day, one in ten is resized once; the last interval`,
  `of each is still open). ${fmt(ACCOUNTS)} other accounts used two instances (stopping and starting`,
  `daily) and a 50 GB volume through ${seeded.lastMonth}: ${fmt(seeded.accountSegments)} intervals.`,
  `Seeding took ${seeded.seconds.toFixed(0)} s (not measured).`,
  ...(baseRoot
    ? [
        `The store was made and seeded by ${values.base}; this tree served a copy of it (its migrations ran`,
        'on the copy). Each request was measured on each build in turn, in the same run.',
      ]
    : []),
  '',
  `Usage of the large account (this month so far): ${fmt(totalLines)} lines, ${fmt(usage.line_items.length)}`,
  `a page (${fmt(bytes / 1024)} KiB of JSON); the first request after the start took ${builds.map((b) => `${b.firstMs.toFixed(0)} ms (${b.name})`).join(', ')}.`,
  `${CONNECTIONS} connection${CONNECTIONS === 1 ? '' : 's'}, ${DURATION} s each after one warm-up request:`,
  '',
  '| request | build | requests/s | p50 (ms) | p99 (ms) | server CPU per request (ms) |',
  '|---|---|---|---|---|---|',
  ...rows.map(
    (r) =>
      `| \`${r.label}\` | ${r.build} | ${r.rps.toFixed(1)} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ` +
      `${r.cpuUsPerRequest === null ? 'n/a' : (r.cpuUsPerRequest / 1000).toFixed(1)} |`,
  ),
  '',
  `p99 of \`GET /v1/billing/usage\` (this tree): ${p99.toFixed(1)} ms (target ≤ 100 ms): ${p99 <= 100 ? 'met' : 'missed'}.`,
  '',
  ...builds.map(
    (b) =>
      `Closing ${seeded.lastMonth} with \`nimbus admin close-period\`, ${b.name}: ${fmt(b.close.output.invoices_opened)} invoices, ` +
      `${b.close.seconds.toFixed(1)} s for the whole command; again (nothing to do): ${b.again.seconds.toFixed(1)} s.`,
  ),
  '',
  `Target for the close: ≤ 60 s (this tree: ${close.seconds <= 60 ? 'met' : 'missed'}; ${again.seconds.toFixed(1)} s of it is`,
  'the process start and store opening, as the run that finds the month closed shows).',
];
process.stdout.write(`${lines.join('\n')}\n`);
if (!values['no-write']) writeSection(SCRIPT, lines);
process.exit(0);
