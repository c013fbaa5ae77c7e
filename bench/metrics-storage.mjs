/**
 * Metric collection and storage (issue 15), on SQLite, driving dist/ in this process:
 *
 *   node bench/metrics-storage.mjs [--instances 10000] [--runs 30] [--fill-minutes 30] [--day-instances 10]
 *                                  [--queries 200] [--only collector,day,queries,https]
 *
 * - Collector cost: `--instances` running, monitored instances (rows seeded with better-sqlite3, each with
 *   a running simulator machine) whose open hour block already holds `--fill-minutes` of 10 s samples
 *   (the cost of a collection grows with the block it rewrites, so the middle of the hour is the hour's
 *   mean), then `--runs` collections 10 s of simulated time apart (a manual clock), each timed and its
 *   CPU measured with process.cpuUsage: the collector's own work, the simulator's sampling and SQLite's
 *   commits, all in this process. The driver's share (sampleMetricsMany, from its call to its answer;
 *   nothing else runs meanwhile) is taken apart. The first run reads the open blocks from the store and
 *   is reported apart. Then the hour ends: the runs that seal it (each hour block deflated, its rollups
 *   merged into the day's block, 2,000 blocks a run) are timed until none is left, and the hour's mean
 *   share of a core is worked out from both.
 * - Bytes per instance-day: `--day-instances` instances collected for a whole simulated day (8,641 runs),
 *   then the stored bytes of their 24 sealed hour blocks and their day's rollup block.
 * - Query latency: one instance with 30 days of rollups and 24 h of 10 s samples; `--queries` times
 *   each of `GET …/metrics` over 24 h at 10 s and over 30 days at 5 min, in this process as the route
 *   does it (MetricsService.history, then the body written by resources/metrics/history-body.ts), CPU and wall.
 * - The same two queries end to end (`https`): a `nimbus serve` of this checkout on its own data dir,
 *   one instance created through the API (monitoring off, so the collector leaves it alone) whose blocks
 *   this process writes into the server's database, then `--queries` requests of each over HTTPS on a
 *   kept-alive connection: time to the last byte of the 2.2 MB answer, and the server's CPU per request.
 *
 * It needs dist/ built (npm run build); it does not build, so the dist of the checkout is what runs.
 */

import https from 'node:https';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import {
  accountIdOf,
  bootstrapAuth,
  cleanUpOnExit,
  cpuSeconds,
  filler,
  fmt,
  insertAll,
  prepareRun,
  ROOT,
  request,
  runHeader,
  startNimbus,
  step,
  stopChild,
  tempDir,
  writeSection,
} from './lib.mjs';

const { values: args } = parseArgs({
  options: {
    instances: { type: 'string', default: '10000' },
    runs: { type: 'string', default: '30' },
    'fill-minutes': { type: 'string', default: '30' },
    only: { type: 'string', default: 'collector,day,queries,https' },
    'day-instances': { type: 'string', default: '10' },
    queries: { type: 'string', default: '200' },
  },
});
const INSTANCES = Number(args.instances);
const RUNS = Number(args.runs);
const DAY_INSTANCES = Number(args['day-instances']);
const QUERIES = Number(args.queries);
const FILL_MINUTES = Number(args['fill-minutes']);
const ONLY = new Set(args.only.split(','));
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

const dist = (file) => import(path.join(ROOT, 'dist', file));

cleanUpOnExit();
const { command, loadAverage } = await prepareRun('bench/metrics-storage.mjs', { build: false });
const { openStore, migrateToLatest } = await dist('platform/store/db.js');
const { MIGRATIONS } = await dist('resources.js');
const { ManualClock } = await dist('platform/domain/clock.js');
const { JobRunner } = await dist('platform/jobs/runner.js');
const { SimulatedDriver } = await dist('drivers/simulator/simulator.js');
const { simulatedSample } = await dist('drivers/simulator/metrics.js');
const { MetricsCollector } = await dist('resources/metrics/collector.js');
const { MetricsService } = await dist('resources/metrics/service.js');
const { instanceTypeNamed } = await dist('resources/catalog/catalog.js');
const { metricsOf, toQuanta } = await dist('resources/metrics/catalog.js');
const { metricsHistoryBody } = await dist('resources/metrics/history-body.js');
const { emptyBlock, encodeBlock, putRow } = await dist('resources/metrics/blocks.js');
const { RAW, ROLLUP, blockStartOf, mergeRollups, rawColumnId, rollupRows, slotsOf } = await dist(
  'resources/metrics/rollups.js',
);
const { upsertBlocks } = await dist('resources/metrics/store.js');

const START = Date.parse('2026-03-02T00:00:05Z');

/** A migrated SQLite store with `count` running, monitored instances, each with a running simulated machine. */
async function seeded(count, prefix) {
  const dataDir = tempDir('nimbus-bench-metrics-');
  const store = openStore({ dataDir });
  await migrateToLatest(store.db, MIGRATIONS);
  const clock = new ManualClock(new Date(START));
  const driver = await SimulatedDriver.open({ db: store.db, clock, speedup: 1 });
  const raw = new Database(path.join(dataDir, 'nimbus.db'));
  raw.pragma('foreign_keys = OFF');
  const at = new Date(START - DAY).toISOString();
  insertAll(raw, 'accounts', [
    filler(raw, 'accounts', { id: 'acct_bench', created_at: at, updated_at: at })(0),
  ]);
  const id = (i) => `ins_${prefix}${String(i).padStart(8, '0')}`;
  const instance = filler(raw, 'instances', {
    id,
    account_id: 'acct_bench',
    status: 'running',
    monitoring: 1,
    instance_type: 'compute-2x',
    region: 'us-east-1',
    image: 'ubuntu-22.04',
    tags: '{}',
    ssh_key_ids: '[]',
    public_ip: (i) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
    private_ip: (i) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
    created_at: at,
    updated_at: at,
  });
  insertAll(
    raw,
    'instances',
    Array.from({ length: count }, (_, i) => instance(i)),
  );
  const machine = filler(raw, 'sim_machines', {
    id,
    instance_type: 'compute-2x',
    image: 'ubuntu-22.04',
    state: 'running',
    state_since: at,
    boot_started_at: at,
    created_at: at,
  });
  insertAll(
    raw,
    'sim_machines',
    Array.from({ length: count }, (_, i) => machine(i)),
  );
  raw.close();
  const jobs = new JobRunner(store, clock, { automatic: false });
  // The driver as the collector sees it, with the CPU time of its sampling counted.
  const sampling = { cpuMs: 0 };
  const measured = Object.create(driver);
  measured.sampleMetricsMany = async (specs, at) => {
    const cpu = process.cpuUsage();
    try {
      return await driver.sampleMetricsMany(specs, at);
    } finally {
      const used = process.cpuUsage(cpu);
      sampling.cpuMs += (used.user + used.system) / 1000;
    }
  };
  const collector = new MetricsCollector(store, clock, jobs, measured, { intervalMs: 10_000 });
  return { store, clock, collector, id, sampling };
}

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

const mean = (values) => values.reduce((a, b) => a + b, 0) / values.length;

/** One collection: wall ms, CPU ms, and the driver's CPU ms within it. */
async function timedRun(fleet) {
  const driverBefore = fleet.sampling.cpuMs;
  const cpu = process.cpuUsage();
  const started = performance.now();
  await fleet.collector.run();
  const wall = performance.now() - started;
  const used = process.cpuUsage(cpu);
  return { wall, cpu: (used.user + used.system) / 1000, driver: fleet.sampling.cpuMs - driverBefore };
}

/** A compute-2x machine's spec, for the simulator's samples. */
function specOf(id) {
  return {
    id,
    instanceType: instanceTypeNamed('compute-2x'),
    image: 'ubuntu-22.04',
    region: 'us-east-1',
    userData: null,
    tags: {},
  };
}

/** A raw hour block of `spec`'s simulated samples from `hourMs`, `slots` of them. */
function hourBlock(spec, hourMs, slots) {
  const metrics = metricsOf(spec.instanceType);
  const block = emptyBlock(slotsOf(RAW), metrics.map(rawColumnId));
  for (let slot = 0; slot < slots; slot++) {
    const sample = simulatedSample(spec, new Date(hourMs + slot * RAW.stepMs), true);
    putRow(block, slot, new Map(metrics.map((m) => [rawColumnId(m), toQuanta(m, sample[m])])));
  }
  return block;
}

const ms = (n) => n.toFixed(1);
const lines = [
  '## Metrics: collector cost, bytes per instance-day, history queries (issue 15)',
  '',
  ...runHeader({ loadAverage, command, npmScript: 'bench:metrics-storage', generator: 'in-process' }),
  "Other work shared the machine (see the load average), so wall times include waiting for a CPU; CPU times are this process's own.",
  '',
];

// --- Collector cost ------------------------------------------------------------------------------
if (ONLY.has('collector')) {
  step(`seeding ${fmt(INSTANCES)} running instances, ${FILL_MINUTES} minutes into their hour`);
  const fleet = await seeded(INSTANCES, 'f');
  const hourMs = blockStartOf(RAW, START);
  // Open blocks holding the hour so far: 100 machines' simulated samples, each instance given one of them.
  const templates = Array.from({ length: 100 }, (_, t) =>
    encodeBlock(hourBlock(specOf(`ins_template${t}`), hourMs, FILL_MINUTES * 6)),
  );
  await upsertBlocks(
    fleet.store.db,
    Array.from({ length: INSTANCES }, (_, i) => ({
      instance_id: fleet.id(i),
      resolution: 'raw',
      block_start: new Date(hourMs).toISOString(),
      account_id: 'acct_bench',
      sealed: false,
      points: FILL_MINUTES * 6,
      data: templates[i % templates.length],
    })),
    new Date(START).toISOString(),
  );
  fleet.clock.set(new Date(hourMs + FILL_MINUTES * 60_000 + 5_000));
  const runs = [];
  for (let i = 0; i < RUNS; i++) {
    runs.push(await timedRun(fleet));
    fleet.clock.advance(10_000);
  }
  const [firstRun, ...steady] = runs;
  const cpuSorted = steady.map((r) => r.cpu).sort((a, b) => a - b);
  const wallSorted = steady.map((r) => r.wall).sort((a, b) => a - b);
  const cpuMean = mean(cpuSorted);
  const driverMean = mean(steady.map((r) => r.driver));
  const stored = await fleet.store.db
    .selectFrom('metric_blocks')
    .select((eb) => eb.fn.avg(eb.fn('length', ['data'])).as('bytes'))
    .where('resolution', '=', 'raw')
    .executeTakeFirst();

  // The hour ends: runs until every block of it is sealed.
  fleet.clock.set(new Date(hourMs + 3_600_000 + 5_000));
  const sealing = [];
  for (;;) {
    sealing.push(await timedRun(fleet));
    fleet.clock.advance(10_000);
    const left = await fleet.store.db
      .selectFrom('metric_blocks')
      .select((eb) => eb.fn.countAll().as('n'))
      .where('resolution', '=', 'raw')
      .where('sealed', '=', 0)
      .where('block_start', '<', new Date(hourMs + 3_600_000).toISOString())
      .executeTakeFirst();
    if (Number(left.n) === 0 || sealing.length > 20) break;
  }
  const sealCpu = sealing.reduce((sum, r) => sum + r.cpu, 0);
  const hourCpu = cpuMean * (360 - sealing.length) + sealCpu;
  step(
    `collector: ${cpuMean.toFixed(0)} ms CPU per run (driver ${driverMean.toFixed(0)}), sealing ${sealCpu.toFixed(0)} ms`,
  );
  await fleet.store.close();
  const share = (cpuMs) => `${((cpuMs / 10_000) * 100).toFixed(2)}%`;
  lines.push(
    `Collector, ${fmt(INSTANCES)} running instances on SQLite (synchronous=FULL), a collection every 10 s, measured ${FILL_MINUTES} minutes into the hour (open blocks of ${FILL_MINUTES * 6} samples, ${fmt(Number(stored.bytes))} bytes each on average, rewritten every run):`,
    '',
    '| | CPU per run | share of a core at 10 s |',
    '|---|---|---|',
    `| **collection, mean of ${steady.length} runs** | **${ms(cpuMean)} ms** | **${share(cpuMean)}** |`,
    `| of which the driver's sampling (simulator: one query per 500 machines, then its simulated values) | ${ms(driverMean)} ms | ${share(driverMean)} |`,
    `| of which the collector and the store (pages read, open blocks appended and written, commits) | ${ms(cpuMean - driverMean)} ms | ${share(cpuMean - driverMean)} |`,
    `| CPU p50 / max | ${ms(percentile(cpuSorted, 50))} / ${ms(cpuSorted.at(-1))} ms | |`,
    `| wall p50 / max | ${ms(percentile(wallSorted, 50))} / ${ms(wallSorted.at(-1))} ms | |`,
    `| first run of a process (open blocks read from the store) | ${ms(firstRun.cpu)} ms (${ms(firstRun.wall)} ms wall) | once per lease |`,
    `| the ${sealing.length} runs that seal the hour (${fmt(INSTANCES)} blocks deflated, rollups merged), in all | ${ms(sealCpu)} ms (${ms(sealing.reduce((s, r) => s + r.wall, 0))} ms wall) | once an hour |`,
    `| **the hour's mean** | ${ms(hourCpu / 360)} ms | **${share(hourCpu / 360)}** (target ≤ 10%) |`,
    '',
  );
}

// --- Bytes per instance-day ----------------------------------------------------------------------
if (ONLY.has('day')) {
  step(`collecting a simulated day for ${DAY_INSTANCES} instances`);
  const day = await seeded(DAY_INSTANCES, 'd');
  const dayStart = blockStartOf(ROLLUP, START);
  day.clock.set(new Date(dayStart));
  for (let t = 0; t <= DAY; t += 10_000) {
    await day.collector.run();
    day.clock.advance(10_000);
  }
  const stored = await day.store.db
    .selectFrom('metric_blocks')
    .select(['resolution', 'block_start', 'data', 'sealed', 'points'])
    .where('block_start', '<', new Date(dayStart + DAY).toISOString())
    .execute();
  const rawBytes = stored.filter((b) => b.resolution === 'raw').reduce((s, b) => s + b.data.length, 0);
  const rollupBytes = stored.filter((b) => b.resolution === 'rollup').reduce((s, b) => s + b.data.length, 0);
  const samples = stored.filter((b) => b.resolution === 'raw').reduce((s, b) => s + b.points, 0);
  const perDay = (rawBytes + rollupBytes) / DAY_INSTANCES;
  const float64PerDay = (samples / DAY_INSTANCES) * 7 * 8;
  await day.store.close();
  lines.push(
    `Stored per instance-day (compute-2x, 7 series, ${fmt(samples / DAY_INSTANCES)} samples each, mean of ${DAY_INSTANCES} instances collected for a simulated day):`,
    `**${fmt(perDay)} bytes** (10 s blocks ${fmt(rawBytes / DAY_INSTANCES)}, rollups ${fmt(rollupBytes / DAY_INSTANCES)}; target ≤ 100 KB); the same samples as float64 take ${fmt(float64PerDay)} bytes.`,
    '',
  );
}

// --- Query latency -------------------------------------------------------------------------------
/** Sealed hour blocks for the 25 hours before `nowMs` and a day rollup block for each of the 31 days before. */
function historyBlocks(spec, nowMs) {
  const rows = [];
  let dayBlock = null;
  let dayMs = null;
  for (let hourMs = blockStartOf(RAW, nowMs) - 30 * DAY; hourMs < nowMs; hourMs += HOUR) {
    const block = hourBlock(spec, hourMs, slotsOf(RAW));
    const thisDay = blockStartOf(ROLLUP, hourMs);
    if (dayMs !== null && thisDay !== dayMs) {
      rows.push({ resolution: 'rollup', startMs: dayMs, block: dayBlock });
      dayBlock = null;
    }
    dayMs = thisDay;
    dayBlock = mergeRollups(dayBlock, rollupRows(block, hourMs, thisDay));
    if (hourMs >= nowMs - DAY - HOUR) rows.push({ resolution: 'raw', startMs: hourMs, block });
  }
  rows.push({ resolution: 'rollup', startMs: dayMs, block: dayBlock });
  return (accountId) =>
    rows.map((r) => ({
      instance_id: spec.id,
      resolution: r.resolution,
      block_start: new Date(r.startMs).toISOString(),
      account_id: accountId,
      sealed: true,
      points: r.block.present.length,
      data: encodeBlock(r.block, { seal: true }),
    }));
}

/**
 * The last 24 h at 10 s. Over HTTPS the server's clock has moved on by the time it reads the range, and a
 * range starting more than 24 h before its now is answered from rollups: there it starts a minute later.
 */
const dayQuery = (nowMs, marginMs = 0) => ({
  start: new Date(nowMs - DAY + marginMs).toISOString(),
  end: new Date(nowMs).toISOString(),
  step: 10,
});
const monthQuery = (nowMs) => ({
  start: new Date(nowMs - 30 * DAY).toISOString(),
  end: new Date(nowMs).toISOString(),
  step: 300,
});

if (ONLY.has('queries')) {
  step('writing 30 days of rollups and 24 h of samples for one instance');
  const one = await seeded(1, 'q');
  const nowMs = blockStartOf(RAW, START) + 31 * DAY;
  await upsertBlocks(
    one.store.db,
    historyBlocks(specOf(one.id(0)), nowMs)('acct_bench'),
    new Date(nowMs).toISOString(),
  );
  one.clock.set(new Date(nowMs));
  const service = new MetricsService(one.store, one.clock);
  async function queryTimes(query) {
    const times = [];
    const serviceTimes = [];
    let points = 0;
    let bytes = 0;
    const cpu = process.cpuUsage();
    for (let i = 0; i < QUERIES; i++) {
      const started = performance.now();
      const answer = await service.history('acct_bench', one.id(0), query);
      serviceTimes.push(performance.now() - started);
      const body = metricsHistoryBody({
        success: true,
        data: answer,
        metadata: { request_id: `req_${i}`, timestamp: new Date().toISOString() },
      });
      times.push(performance.now() - started);
      points = answer.series.reduce((s, x) => s + x.times.length, 0);
      bytes = body.length;
    }
    const used = process.cpuUsage(cpu);
    times.sort((a, b) => a - b);
    serviceTimes.sort((a, b) => a - b);
    const cpuMs = (used.user + used.system) / 1000 / QUERIES;
    return {
      p50: percentile(times, 50),
      p99: percentile(times, 99),
      serviceP50: percentile(serviceTimes, 50),
      points,
      bytes,
      cpuMs,
    };
  }
  const day10s = await queryTimes(dayQuery(nowMs));
  const month5m = await queryTimes(monthQuery(nowMs));
  const day10sOne = await queryTimes({ ...dayQuery(nowMs), metrics: 'cpu_percent' });
  const month5mOne = await queryTimes({ ...monthQuery(nowMs), metrics: 'cpu_percent' });
  await one.store.close();
  step(`queries: 24 h ${ms(day10s.cpuMs)} ms CPU, 30 days ${ms(month5m.cpuMs)} ms CPU`);
  const row = (label, q) =>
    `| ${label} | ${fmt(q.points)} (${fmt(q.bytes / 1024)} KB of JSON) | **${ms(q.cpuMs)} ms** | ${ms(q.p50)} ms | **${ms(q.p99)} ms** | ${ms(q.serviceP50)} ms |`;
  lines.push(
    `History queries for one instance, in this process as the route answers them (MetricsService.history, then the body written by resources/metrics/history-body.ts), ${QUERIES} each, SQLite:`,
    '',
    '| query | points | CPU per query (mean) | wall p50 | wall p99 (target ≤ 20 ms) | wall p50, history alone |',
    '|---|---|---|---|---|---|',
    row('24 h at 10 s, all 7 series', day10s),
    row('30 days at 5 min, all 7 series', month5m),
    row('24 h at 10 s, one series (`metrics=cpu_percent`)', day10sOne),
    row('30 days at 5 min, one series', month5mOne),
    '',
  );
}

if (ONLY.has('https')) {
  step('the same queries over HTTPS to nimbus serve');
  const dataDir = tempDir('nimbus-bench-metrics-https-');
  const nimbus = await startNimbus(dataDir, path.join(dataDir, 'nimbus.log'));
  const auth = bootstrapAuth(dataDir);
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
  const created = await request(nimbus.port, 'POST', '/v1/instances', auth, {
    name: 'history',
    instance_type: 'compute-2x',
    region: 'us-east-1',
    image: 'ubuntu-22.04',
    monitoring: false,
  });
  if (created.status !== 202) throw new Error(`create answered ${created.status}: ${created.body}`);
  const instance = JSON.parse(created.body).data;
  const accountId = await accountIdOf(nimbus.port, auth);
  const nowMs = Date.now();
  const store = openStore({ dataDir });
  await upsertBlocks(
    store.db,
    historyBlocks(specOf(instance.id), nowMs)(accountId),
    new Date(nowMs).toISOString(),
  );
  await store.close();
  async function httpsTimes(query) {
    const url = `/v1/instances/${instance.id}/metrics?${new URLSearchParams({ ...query, step: String(query.step) })}`;
    const times = [];
    let points = 0;
    const cpuBefore = cpuSeconds(nimbus.child.pid);
    for (let i = 0; i < QUERIES; i++) {
      const started = performance.now();
      const res = await request(nimbus.port, 'GET', url, auth, undefined, agent);
      times.push(performance.now() - started);
      if (res.status !== 200) throw new Error(`history answered ${res.status}: ${res.body.slice(0, 300)}`);
      if (i === 0) points = JSON.parse(res.body).data.series.reduce((s, x) => s + x.points.length, 0);
    }
    const cpu = cpuSeconds(nimbus.child.pid) - cpuBefore;
    times.sort((a, b) => a - b);
    return { p50: percentile(times, 50), p99: percentile(times, 99), points, cpuMs: (cpu * 1000) / QUERIES };
  }
  // The server's clock is the real one: the ranges end now.
  const day10s = await httpsTimes(dayQuery(Date.now(), 60_000));
  const month5m = await httpsTimes(monthQuery(Date.now()));
  const day10sOne = await httpsTimes({ ...dayQuery(Date.now(), 60_000), metrics: 'cpu_percent' });
  const month5mOne = await httpsTimes({ ...monthQuery(Date.now()), metrics: 'cpu_percent' });
  await stopChild(nimbus.child);
  const row = (label, q) =>
    `| ${label} | ${fmt(q.points)} | **${ms(q.cpuMs)} ms** | ${ms(q.p50)} ms | **${ms(q.p99)} ms** |`;
  lines.push(
    `The same over HTTPS: \`nimbus serve\` (SQLite) and one kept-alive connection from this process, ${QUERIES} requests each; time to the last byte, and the server's CPU per request (from /proc, 10 ms ticks):`,
    '',
    '| query | points | server CPU per request | p50 | p99 (target ≤ 20 ms) |',
    '|---|---|---|---|---|',
    row('24 h at 10 s, all 7 series', day10s),
    row('30 days at 5 min, all 7 series', month5m),
    row('24 h at 10 s, one series', day10sOne),
    row('30 days at 5 min, one series', month5mOne),
    '',
  );
}

writeSection('bench/metrics-storage.mjs', lines);
