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
 * Usage (from the repository root):
 *   node bench/billing.mjs [--instances 10000] [--transitions-per-day 2] [--accounts 10000]
 *     [--duration 20] [--connections 1] [--no-build] [--no-write] [--keep] [--cpu-prof DIR]
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import {
  accountIdOf,
  bootstrapAuth,
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
  const batch = db.transaction((rows) => {
    for (const row of rows) {
      const seq = Number(insert.run(row).lastInsertRowid);
      if (row.end_s === null) continue;
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
  await seedInstances({ dataDir, accountId: bigAccount, count: INSTANCES, log: step, monitoringShare: 0 });

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
function timedAdmin(dataDir, args) {
  const nodeArgs = PROFILE_DIR ? ['--cpu-prof', '--cpu-prof-dir', PROFILE_DIR] : [];
  const started = performance.now();
  const result = spawnSync(
    process.execPath,
    [...nodeArgs, path.join(ROOT, 'bin', 'nimbus'), 'admin', ...args, '--json'],
    {
      cwd: ROOT,
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
const dataDir = tempDir('nimbus-bench-billing-');
const logFile = path.join(dataDir, 'nimbus.log');
step(`data dir ${dataDir}`);
let nimbus = await startNimbus(dataDir, logFile, ENV);
const auth = bootstrapAuth(dataDir);
const bigAccount = await accountIdOf(nimbus.port, auth);
await stopChild(nimbus.child);
const seeded = await seed(dataDir, bigAccount);
raiseLimits(dataDir, bigAccount, [], ENV);

// 2 first: the server's billing job would close last month itself on start.
step(`closing ${seeded.lastMonth} for ${fmt(ACCOUNTS + 1)} accounts (admin close-period)`);
const close = timedAdmin(dataDir, ['close-period']);
if (close.output.invoices_opened < ACCOUNTS)
  fail(`close-period opened ${close.output.invoices_opened} invoices`);
const again = timedAdmin(dataDir, ['close-period']);
if (again.output.invoices_opened !== 0) fail('closing again opened invoices');
step(
  `closed in ${close.seconds.toFixed(1)} s (${close.output.invoices_opened} invoices); again: ${again.seconds.toFixed(1)} s`,
);

nimbus = await startNimbus(
  dataDir,
  logFile,
  ENV,
  ROOT,
  PROFILE_DIR ? ['--cpu-prof', '--cpu-prof-dir', PROFILE_DIR] : [],
);
const first = performance.now();
const probe = await request(nimbus.port, 'GET', '/v1/billing/usage', auth);
const firstMs = performance.now() - first;
if (probe.status !== 200) fail(`usage answered ${probe.status}: ${probe.body.slice(0, 300)}`);
const probed = JSON.parse(probe.body);
const usage = probed.data;
const totalLines = probed.pagination?.total_items ?? usage.line_items.length;
const lastPage = probed.pagination?.total_pages ?? 1;
const bytes = Buffer.byteLength(probe.body);
step(
  `first usage: ${firstMs.toFixed(0)} ms, ${fmt(usage.line_items.length)} of ${fmt(totalLines)} lines, ${fmt(bytes / 1024)} KiB`,
);

const measure = async (label, urlPath) => {
  const load = {
    url: `https://${HOST}:${nimbus.port}${urlPath}`,
    headers: auth,
    connections: CONNECTIONS,
  };
  // Warm-up: one whole answer (a 3 s run of autocannon counts none when an answer takes longer than that).
  const warm = await request(nimbus.port, 'GET', urlPath, auth);
  if (warm.status !== 200) fail(`${label}: warm-up answered ${warm.status}`);
  return {
    label,
    ...summarize(await runLoad(autocannon, label, { ...load, duration: DURATION }, nimbus.child.pid, 200)),
  };
};
const rows = [
  await measure('GET /v1/billing/usage', '/v1/billing/usage'),
  await measure(`GET /v1/billing/usage?page=${lastPage}`, `/v1/billing/usage?page=${lastPage}`),
  await measure('GET /v1/billing/usage?group_by=resource_type', '/v1/billing/usage?group_by=resource_type'),
  await measure('GET /v1/billing/usage?group_by=day', '/v1/billing/usage?group_by=day'),
  await measure('GET /v1/billing/usage.csv', '/v1/billing/usage.csv'),
];
await stopChild(nimbus.child);

const p99 = rows[0].p99;
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
  '',
  `Usage of the large account (this month so far): ${fmt(totalLines)} lines, ${fmt(usage.line_items.length)}`,
  `a page (${fmt(bytes / 1024)} KiB of JSON); the first request after the start took ${firstMs.toFixed(0)} ms.`,
  `${CONNECTIONS} connection${CONNECTIONS === 1 ? '' : 's'}, ${DURATION} s each after one warm-up request:`,
  '',
  '| request | requests/s | p50 (ms) | p99 (ms) | server CPU per request (ms) |',
  '|---|---|---|---|---|',
  ...rows.map(
    (r) =>
      `| \`${r.label}\` | ${r.rps.toFixed(1)} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ` +
      `${r.cpuUsPerRequest === null ? 'n/a' : (r.cpuUsPerRequest / 1000).toFixed(1)} |`,
  ),
  '',
  `p99 of \`GET /v1/billing/usage\`: ${p99.toFixed(1)} ms (target ≤ 100 ms): ${p99 <= 100 ? 'met' : 'missed'}.`,
  '',
  `Closing ${seeded.lastMonth} with \`nimbus admin close-period\` (${fmt(close.output.invoices_opened)} invoices`,
  `opened, the large account's included): ${close.seconds.toFixed(1)} s for the whole command (target ≤ 60 s:`,
  `${close.seconds <= 60 ? 'met' : 'missed'}); running it again, which finds the month closed and changes`,
  `nothing, took ${again.seconds.toFixed(1)} s (the process start and store opening inside the figure above).`,
];
process.stdout.write(`${lines.join('\n')}\n`);
if (!values['no-write']) writeSection(SCRIPT, lines);
process.exit(0);
