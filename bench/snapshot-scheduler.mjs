/**
 * The snapshot scheduler's cost per run (issue 13), on SQLite: 100,000 volumes with backup schedules,
 * of which 1% are due.
 *
 *   node bench/snapshot-scheduler.mjs [--schedules 100000] [--due-share 0.01] [--rounds 5] [--idle-runs 200]
 *     [--no-build]
 *
 * It builds Nimbus (npm run build) and drives the scheduler of dist/ in this process: the store, the job
 * runner (stepped: nothing runs by itself), the lifecycle core, the snapshot service and the scheduler,
 * as src/composition.ts wires them. The rows are seeded with better-sqlite3 directly (prepared
 * statements, one transaction): an account, `--schedules` data volumes with a daily schedule each, and
 * their `backup_schedules` rows, next slots spread over the coming day; then, per round, `--due-share`
 * of them are moved into the past.
 *
 * Measured, each with the wall time of `SnapshotScheduler.run()`:
 * - an idle run: nothing due (what a run costs the 99% that are not due: reading the index's first
 *   entry and no row of it beyond);
 * - a due round: 1% due, each making its scheduled snapshot (slot taken, snapshot, event, retention job,
 *   one commit per slot), until a run says the next is in the future; the snapshots, events and jobs a
 *   round made are removed before the next;
 * - the same due rounds on a store holding only the due schedules, to show the 99,000 not due cost
 *   nothing.
 */
import { randomInt } from 'node:crypto';
import path from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { cleanUpOnExit, fmt, prepareRun, ROOT, runHeader, step, tempDir, writeSection } from './lib.mjs';

const { values: args } = parseArgs({
  options: {
    schedules: { type: 'string', default: '100000' },
    'due-share': { type: 'string', default: '0.01' },
    rounds: { type: 'string', default: '5' },
    'idle-runs': { type: 'string', default: '200' },
    'no-build': { type: 'boolean', default: false },
  },
});
const SCHEDULES = Number(args.schedules);
const DUE = Math.round(SCHEDULES * Number(args['due-share']));
const ROUNDS = Number(args.rounds);
const IDLE_RUNS = Number(args['idle-runs']);
const DAY_MS = 86_400_000;

const dist = (file) => import(path.join(ROOT, 'dist', file));

cleanUpOnExit();
const { command, loadAverage } = await prepareRun('bench/snapshot-scheduler.mjs', {
  build: !args['no-build'],
});
const { openStore, migrateToLatest } = await dist('platform/store/db.js');
// The migration history: dist/resources.js (the one list of resources); dist/migrations.js in older --base builds.
const { MIGRATIONS } = await dist('resources.js').catch(() => dist('migrations.js'));
const { newId } = await dist('platform/domain/ids.js');
const { systemClock } = await dist('platform/domain/clock.js');
const { JobRunner } = await dist('platform/jobs/runner.js');
const { Lifecycle } = await dist('platform/lifecycle/lifecycle.js');
const { QuotaService } = await dist('platform/quotas/quotas.js');
const { BILLING_METERING } = await dist('resources/billing/meter-store.js');
const { subscribeToEvents } = await dist('platform/events/outbox.js');
const { quotaSettings } = await dist('resources/account/store.js');
const { fanOutToWebhooks } = await dist('resources/webhooks/fan-out.js');
const { SnapshotService } = await dist('resources/snapshots/service.js');
const { SnapshotScheduler } = await dist('resources/snapshots/scheduler.js');

/** A store with `total` scheduled volumes of one account; returns the scheduler and a handle on the rows. */
async function seededStore(total) {
  const dataDir = tempDir('nimbus-bench-schedules-');
  const store = openStore({ dataDir });
  await migrateToLatest(store.db, MIGRATIONS);
  const raw = new Database(path.join(dataDir, 'nimbus.db'));
  raw.pragma('journal_mode = WAL');
  const now = Date.now();
  const at = new Date(now).toISOString();
  const accountId = newId('account');
  raw
    .prepare(
      `insert into accounts (id, name, email, company, billing_email, plan, status, rate_limit_per_hour,
       rate_limit_burst, created_at, updated_at) values (?, 'bench', 'bench@example.com', null, null,
       'enterprise', 'active', null, null, ?, ?)`,
    )
    .run(accountId, at, at);
  raw
    .prepare(`insert into account_quotas (account_id, name, "limit") values (?, 'snapshots', 1000000000)`)
    .run(accountId);
  const volume = raw.prepare(
    `insert into volumes (id, account_id, name, region, size_gb, status, kind, instance_id, created_at,
     updated_at, version, tags, device_name, attached_at, filesystem, pending_action, backup_schedule,
     restore_snapshot_id, restore_started_at)
     values (?, ?, ?, 'us-east-1', 10, 'available', 'data', null, ?, ?, 1, '{}', null, null, null, null, ?, null, null)`,
  );
  const schedule = raw.prepare(
    `insert into backup_schedules (source_id, account_id, source_kind, frequency, retention, next_due_at, created_at)
     values (?, ?, 'volume', 'daily', 7, ?, ?)`,
  );
  const ids = [];
  raw.transaction(() => {
    for (let i = 0; i < total; i++) {
      const id = newId('volume');
      ids.push(id);
      volume.run(id, accountId, `vol-${i}`, at, at, JSON.stringify({ frequency: 'daily', retention: 7 }));
      schedule.run(id, accountId, new Date(now + 60_000 + randomInt(DAY_MS - 60_000)).toISOString(), at);
    }
  })();
  raw.exec('analyze');

  const jobs = new JobRunner(store, systemClock, { automatic: false });
  // As the composition root has it: each event recorded looks for the webhooks it goes to.
  subscribeToEvents(fanOutToWebhooks);
  const quotas = new QuotaService(store, quotaSettings);
  const lifecycle = new Lifecycle(store, systemClock, jobs, { quotas, metering: BILLING_METERING });
  const noInstances = () => Promise.reject(new Error('the scheduler makes no instance'));
  const snapshots = new SnapshotService(store, systemClock, lifecycle, quotas, null, noInstances);
  const scheduler = new SnapshotScheduler(store, systemClock, jobs, lifecycle, snapshots);
  const setDue = raw.prepare(`update backup_schedules set next_due_at = ? where source_id = ?`);
  return {
    scheduler,
    /** Moves `count` schedules (the first ones) a minute into the past. */
    makeDue(count) {
      const past = new Date(Date.now() - 60_000).toISOString();
      raw.transaction(() => {
        for (const id of ids.slice(0, count)) setDue.run(past, id);
      })();
    },
    /** Removes what due rounds made, so every round starts from the same store. */
    reset() {
      raw.exec(`delete from snapshots; delete from events; delete from jobs; delete from webhook_deliveries`);
    },
    async close() {
      raw.close();
      await store.close();
    },
  };
}

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
const ms = (ns) => Number(ns) / 1e6;

async function timeRun(scheduler) {
  const start = process.hrtime.bigint();
  const next = await scheduler.run();
  return { ms: ms(process.hrtime.bigint() - start), next };
}

async function idleRuns(handle) {
  const times = [];
  for (let i = 0; i < IDLE_RUNS; i++) times.push((await timeRun(handle.scheduler)).ms);
  times.sort((a, b) => a - b);
  return { p50: percentile(times, 50), p99: percentile(times, 99), max: times.at(-1) };
}

/** Rounds of `DUE` due schedules: the runs each round took until none was due, and their total. */
async function dueRounds(handle) {
  const rounds = [];
  for (let round = 0; round < ROUNDS; round++) {
    // Group commit (platform/store/group-commit.ts) may still hold a batch open for a turn of the event
    // loop (the job runner's wake): the raw connection writes once it has committed.
    await new Promise((resolve) => setTimeout(resolve, 50));
    handle.reset();
    handle.makeDue(DUE);
    let total = 0;
    let runs = 0;
    for (;;) {
      const { ms: took, next } = await timeRun(handle.scheduler);
      total += took;
      runs += 1;
      if (next === null || next.getTime() > Date.now()) break;
    }
    rounds.push({ total, runs });
  }
  const totals = rounds.map((r) => r.total).sort((a, b) => a - b);
  return { median: percentile(totals, 50), min: totals[0], max: totals.at(-1), runs: rounds[0].runs };
}

step(`seeding ${fmt(SCHEDULES)} scheduled volumes`);
const big = await seededStore(SCHEDULES);
step(`${IDLE_RUNS} idle runs (nothing due)`);
const idle = await idleRuns(big);
step(`${ROUNDS} rounds of ${fmt(DUE)} due among ${fmt(SCHEDULES)}`);
const dueBig = await dueRounds(big);
await big.close();

step(`seeding ${fmt(DUE)} scheduled volumes (only the due ones)`);
const small = await seededStore(DUE);
const idleSmall = await idleRuns(small);
step(`${ROUNDS} rounds of ${fmt(DUE)} due among ${fmt(DUE)}`);
const dueSmall = await dueRounds(small);
await small.close();

const f = (n) => n.toFixed(2);
const lines = [
  `## Snapshot scheduler: ${fmt(SCHEDULES)} volumes on schedules, ${fmt(DUE)} due (issue #13)`,
  '',
  ...runHeader({ loadAverage, command, npmScript: 'bench:snapshot-scheduler', generator: 'in-process' }),
  "SQLite (WAL, synchronous=FULL), the scheduler of `dist/` driven in the benchmark's own process",
  '(`SnapshotScheduler.run()`, stepped job runner). Wall time per run, in milliseconds.',
  '',
  '| store holds | what a run finds | p50 | p99 | max |',
  '|---|---|---|---|---|',
  `| ${fmt(SCHEDULES)} schedules | nothing due (${IDLE_RUNS} runs) | ${f(idle.p50)} | ${f(idle.p99)} | ${f(idle.max)} |`,
  `| ${fmt(DUE)} schedules | nothing due (${IDLE_RUNS} runs) | ${f(idleSmall.p50)} | ${f(idleSmall.p99)} | ${f(idleSmall.max)} |`,
  '',
  `| store holds | ${fmt(DUE)} due: all their snapshots made | median of ${ROUNDS} rounds | fastest | slowest | per snapshot (median) |`,
  '|---|---|---|---|---|---|',
  `| ${fmt(SCHEDULES)} schedules | ${dueBig.runs} run(s) | ${f(dueBig.median)} | ${f(dueBig.min)} | ${f(dueBig.max)} | ${f(dueBig.median / DUE)} |`,
  `| ${fmt(DUE)} schedules | ${dueSmall.runs} run(s) | ${f(dueSmall.median)} | ${f(dueSmall.min)} | ${f(dueSmall.max)} | ${f(dueSmall.median / DUE)} |`,
  '',
  `What a run reads of the schedules is the due part of the \`next_due_at\` index and its first entry:`,
  `with nothing due, a run costs about the same (p50 ${f(idle.p50)} ms against ${f(idleSmall.p50)} ms) whether`,
  `the store holds ${fmt(SCHEDULES)} schedules or ${fmt(DUE)}. The due work is per snapshot (slot, snapshot,`,
  'event, two jobs; one commit per transaction of up to 100 slots): here',
  `${f(dueBig.median / DUE)} ms each among ${fmt(SCHEDULES)} and ${f(dueSmall.median / DUE)} ms among ${fmt(DUE)} (point lookups in`,
  'larger B-trees, and the noise of a shared machine), so a transaction of 100 takes about',
  `${fmt((dueBig.median / DUE) * 100)} ms and the ${fmt(DUE)} due (1%) about ${fmt(dueBig.median)} ms in all, in ${dueBig.runs} runs of the job.`,
  'The target of 50 ms per tick holds for what the schedules that are not due cost a run; it does',
  'not hold for making 1,000 snapshots in one tick, which costs what the snapshots cost. Other',
  "engineers' test runs shared this 2-CPU machine (see the load average above), which moves the",
  'slowest rounds most.',
  '',
];
console.log(lines.join('\n'));
writeSection('bench/snapshot-scheduler.mjs', lines);
