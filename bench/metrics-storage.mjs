/**
 * Metric collection and storage (issue 15), on SQLite, driving dist/ in this process:
 *
 *   node bench/metrics-storage.mjs [--instances 10000] [--runs 30] [--day-instances 10] [--queries 200]
 *
 * - Collector cost: `--instances` running, monitored instances (rows seeded with better-sqlite3, each with
 *   a running simulator machine), and `--runs` collections 10 s of simulated time apart (a manual clock),
 *   each timed and its CPU measured (process.cpuUsage: the collector's own work, the simulator's sampling
 *   and SQLite's commits, all in this process). Share of a core = CPU per run / 10 s. Then one run that
 *   crosses an hour, which seals every instance's hour and merges its rollups.
 * - Bytes per instance-day: `--day-instances` instances collected for a whole simulated day (8,641 runs),
 *   then the stored bytes of their 24 sealed hour blocks and their day's rollup block.
 * - Query latency: one instance with 30 days of rollups and 24 h of 10 s samples; `--queries` times
 *   each of `GET …/metrics` over 24 h at 10 s and over 30 days at 5 min, through MetricsService (the
 *   route adds only serialisation).
 *
 * It needs dist/ built (npm run build); it does not build, so the dist of the checkout is what runs.
 */

import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { cleanUpOnExit, fmt, prepareRun, ROOT, runHeader, step, tempDir, writeSection } from './lib.mjs';

const { values: args } = parseArgs({
  options: {
    instances: { type: 'string', default: '10000' },
    runs: { type: 'string', default: '30' },
    'day-instances': { type: 'string', default: '10' },
    queries: { type: 'string', default: '200' },
  },
});
const INSTANCES = Number(args.instances);
const RUNS = Number(args.runs);
const DAY_INSTANCES = Number(args['day-instances']);
const QUERIES = Number(args.queries);
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

const dist = (file) => import(path.join(ROOT, 'dist', file));

cleanUpOnExit();
const { command, loadAverage } = await prepareRun('bench/metrics-storage.mjs', { build: false });
const { openStore, migrateToLatest } = await dist('store/db.js');
const { ManualClock } = await dist('domain/clock.js');
const { JobRunner } = await dist('jobs/runner.js');
const { SimulatedDriver } = await dist('drivers/simulator/simulator.js');
const { simulatedSample } = await dist('drivers/simulator/metrics.js');
const { MetricsCollector } = await dist('services/metrics-collector.js');
const { MetricsService } = await dist('services/metrics.js');
const { instanceTypeNamed } = await dist('domain/catalog.js');
const { metricsOf, toQuanta } = await dist('domain/metric-catalog.js');
const { emptyBlock, encodeBlock, putRow } = await dist('domain/metric-blocks.js');
const { RAW, ROLLUP, blockStartOf, mergeRollups, rawColumnId, rollupRows, slotsOf } =
  await dist('domain/metric-rollups.js');
const { upsertBlocks } = await dist('store/metrics.js');

/** A value for every NOT NULL column of a row, from the table's own definition. */
function filler(db, table, fixed) {
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

function insertAll(db, table, rows) {
  if (rows.length === 0) return;
  const names = Object.keys(rows[0]);
  const insert = db.prepare(
    `insert into ${table} (${names.join(', ')}) values (${names.map((n) => `@${n}`).join(', ')})`,
  );
  db.transaction(() => {
    for (const row of rows) insert.run(row);
  })();
}

const START = Date.parse('2026-03-02T00:00:05Z');

/** A migrated SQLite store with `count` running, monitored instances, each with a running simulated machine. */
async function seeded(count, prefix) {
  const dataDir = tempDir('nimbus-bench-metrics-');
  const store = openStore({ dataDir });
  await migrateToLatest(store.db);
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
  const collector = new MetricsCollector(store, clock, jobs, driver, { intervalMs: 10_000 });
  return { store, clock, collector, id };
}

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** One collection: wall ms and CPU ms. */
async function timedRun(collector) {
  const cpu = process.cpuUsage();
  const started = performance.now();
  await collector.run();
  const wall = performance.now() - started;
  const used = process.cpuUsage(cpu);
  return { wall, cpu: (used.user + used.system) / 1000 };
}

// --- Collector cost ------------------------------------------------------------------------------
step(`seeding ${fmt(INSTANCES)} running instances`);
const fleet = await seeded(INSTANCES, 'f');
const runs = [];
for (let i = 0; i < RUNS; i++) {
  runs.push(await timedRun(fleet.collector));
  fleet.clock.advance(10_000);
}
// The first run reads no open blocks from memory (fresh process): report it apart.
const [firstRun, ...steady] = runs;
const cpuSorted = steady.map((r) => r.cpu).sort((a, b) => a - b);
const wallSorted = steady.map((r) => r.wall).sort((a, b) => a - b);
const cpuMean = cpuSorted.reduce((a, b) => a + b, 0) / cpuSorted.length;
fleet.clock.set(new Date(blockStartOf(RAW, fleet.clock.nowMs()) + HOUR + 5_000));
const sealing = await timedRun(fleet.collector);
step(`collector: ${cpuMean.toFixed(0)} ms CPU per run, sealing run ${sealing.wall.toFixed(0)} ms`);
await fleet.store.close();

// --- Bytes per instance-day ----------------------------------------------------------------------
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

// --- Query latency -------------------------------------------------------------------------------
step('writing 30 days of rollups and 24 h of samples for one instance');
const one = await seeded(1, 'q');
const spec = {
  id: one.id(0),
  instanceType: instanceTypeNamed('compute-2x'),
  image: 'ubuntu-22.04',
  region: 'us-east-1',
  userData: null,
  tags: {},
};
const metrics = metricsOf(spec.instanceType);
const nowMs = blockStartOf(RAW, START) + 31 * DAY;
const rows = [];
let dayBlock = null;
let dayMs = null;
for (let hourMs = nowMs - 30 * DAY; hourMs < nowMs; hourMs += HOUR) {
  const block = emptyBlock(slotsOf(RAW), metrics.map(rawColumnId));
  for (let slot = 0; slot < slotsOf(RAW); slot++) {
    const sample = simulatedSample(spec, new Date(hourMs + slot * RAW.stepMs), true);
    putRow(block, slot, new Map(metrics.map((m) => [rawColumnId(m), toQuanta(m, sample[m])])));
  }
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
await upsertBlocks(
  one.store.db,
  rows.map((r) => ({
    instance_id: spec.id,
    resolution: r.resolution,
    block_start: new Date(r.startMs).toISOString(),
    account_id: 'acct_bench',
    sealed: true,
    points: r.block.present.length,
    data: encodeBlock(r.block, { seal: true }),
  })),
  new Date(nowMs).toISOString(),
);
one.clock.set(new Date(nowMs));
const service = new MetricsService(one.store, one.clock);
async function queryTimes(query) {
  const times = [];
  let points = 0;
  const cpu = process.cpuUsage();
  for (let i = 0; i < QUERIES; i++) {
    const started = performance.now();
    const answer = await service.history('acct_bench', spec.id, query);
    times.push(performance.now() - started);
    points = answer.series.reduce((s, x) => s + x.points.length, 0);
  }
  const used = process.cpuUsage(cpu);
  times.sort((a, b) => a - b);
  const cpuMs = (used.user + used.system) / 1000 / QUERIES;
  return { p50: percentile(times, 50), p99: percentile(times, 99), points, cpuMs };
}
const day10s = await queryTimes({
  start: new Date(nowMs - DAY).toISOString(),
  end: new Date(nowMs).toISOString(),
  step: 10,
});
const month5m = await queryTimes({
  start: new Date(nowMs - 30 * DAY).toISOString(),
  end: new Date(nowMs).toISOString(),
  step: 300,
});
await one.store.close();

const ms = (n) => n.toFixed(1);
writeSection('bench/metrics-storage.mjs', [
  '## Metrics: collector cost, bytes per instance-day, history queries (issue 15)',
  '',
  ...runHeader({ loadAverage, command, npmScript: 'bench:metrics-storage', generator: 'in-process' }),
  `Collector, ${fmt(INSTANCES)} running instances on SQLite (synchronous=FULL), a collection every 10 s:`,
  '',
  '| | per run | share of a core at 10 s |',
  '|---|---|---|',
  `| CPU, mean of ${steady.length} steady runs | ${ms(cpuMean)} ms | ${((cpuMean / 10_000) * 100).toFixed(1)}% |`,
  `| CPU p50 / max | ${ms(percentile(cpuSorted, 50))} / ${ms(cpuSorted.at(-1))} ms | |`,
  `| wall p50 / max | ${ms(percentile(wallSorted, 50))} / ${ms(wallSorted.at(-1))} ms | |`,
  `| first run (open blocks read from the store) | ${ms(firstRun.cpu)} ms CPU, ${ms(firstRun.wall)} ms wall | |`,
  `| run that seals the hour (${fmt(INSTANCES)} blocks deflated, rollups merged) | ${ms(sealing.cpu)} ms CPU, ${ms(sealing.wall)} ms wall | once an hour |`,
  '',
  `Stored per instance-day (compute-2x, 7 series, ${fmt(samples / DAY_INSTANCES)} samples each, mean of ${DAY_INSTANCES} instances collected for a simulated day):`,
  `${fmt(perDay)} bytes (10 s blocks ${fmt(rawBytes / DAY_INSTANCES)}, rollups ${fmt(rollupBytes / DAY_INSTANCES)}); the same samples as float64 take ${fmt(float64PerDay)} bytes.`,
  '',
  `History queries for one instance (MetricsService.history, ${QUERIES} each, SQLite):`,
  '',
  '| query | points | p50 | p99 | CPU per query (mean) |',
  '|---|---|---|---|---|',
  `| 24 h at 10 s | ${fmt(day10s.points)} | ${ms(day10s.p50)} ms | ${ms(day10s.p99)} ms | ${ms(day10s.cpuMs)} ms |`,
  `| 30 days at 5 min | ${fmt(month5m.points)} | ${ms(month5m.p50)} ms | ${ms(month5m.p99)} ms | ${ms(month5m.cpuMs)} ms |`,
  '',
]);
