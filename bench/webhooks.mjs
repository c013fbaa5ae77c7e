/**
 * Benchmark of issue #12: webhook deliveries per second from one Nimbus to a local HTTPS receiver, and the
 * lag from an event's commit to its receipt, on SQLite with every state change durable (the store always
 * opens SQLite with synchronous=FULL).
 *
 * Set-up: a built Nimbus (embedded profile, a fresh data dir, NIMBUS_SIM_SPEEDUP=1000) with
 * NIMBUS_WEBHOOK_ALLOW_PRIVATE=1 and NIMBUS_WEBHOOK_CA_FILE naming the receiver's self-signed
 * certificate. The receiver (bench/webhook-receiver.mjs) is a separate process, so its CPU is not the
 * server's; with two CPUs or more the server is pinned to CPU 0 and the receiver and this process to
 * CPU 1. The bootstrap account gets a raised rate limit and webhook quota, a few running instances, and
 * then --subscriptions subscriptions to `instance.updated`, each to its own path on the receiver.
 *
 * Load: `PATCH /v1/instances/{id}` with a new name (one `instance.updated` event, fanned out to every
 * subscription in the same transaction) at --rate events per second, open loop (sent on schedule whether
 * or not earlier ones were answered, over --connections keep-alive connections), for --duration seconds;
 * first a --warmup round, then --rounds measured rounds on the same server, each drained before the next.
 * Events come through the real API, so each costs a durable commit of its own; a few subscriptions
 * multiply them into the deliveries asked for without asking the store for more commits than events.
 * The defaults (20 subscriptions, 110 events/s) offer 2,200 deliveries/s, 10% over the target, so that a
 * server that keeps up shows at least the target.
 *
 * Figures per round, from the receiver's clock:
 * - sustained deliveries/s: deliveries received from --settle seconds after the load began until it
 *   ended, over that window (the rate the server kept up while events kept coming);
 * - drain: from the load's last answered event to the last delivery received (how far behind it was);
 * - lag p50/p99/max: receipt time minus the event's `timestamp` in the body. That timestamp is taken just
 *   before the event's transaction commits, so the lag includes that commit (a few ms with fsync);
 * - server CPU over the round (load plus drain), per delivery, and the share of that time its event loop
 *   waited for a CPU held by other work (schedstat);
 * - the server's fsync/fdatasync calls over the round (perf's syscall tracepoints, where perf works): one
 *   per durable commit.
 * Before and after the rounds, a durable one-row commit to a SQLite file on the same disk is timed, apart
 * from Nimbus, to show what the disk gave at the time.
 * Checks (the run fails otherwise): every PATCH answered 200; every delivery of every event arrived at
 * least once (repeats, which at-least-once allows, are counted); at the end, through the API, every
 * subscription's delivery log holds exactly the events sent, all `succeeded`, none pending or failed.
 *
 * Usage (from the repository root):
 *   node bench/webhooks.mjs [--subscriptions N] [--rate EVENTS_PER_S] [--duration S] [--rounds N]
 *     [--warmup S] [--settle S] [--connections N] [--cpu-prof DIR] [--no-build] [--no-write] [--keep]
 *   --no-write  print only; --keep  leave the temporary dirs; --cpu-prof DIR  write a V8 CPU profile of
 *   the server (whole run) into DIR; --no-build  run the dist/ that is there instead of building first.
 * Bounded: at most rounds × (duration + 120 s of drain); stops by itself; loopback only.
 */
import { fork, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { parseArgs } from 'node:util';
import {
  accountIdOf,
  bootstrapAuth,
  canPin,
  cleanUpOnExit,
  cleanup,
  cpuSeconds,
  cpuTimes,
  fail,
  fmt,
  HOST,
  LOAD_CPU,
  pinProcess,
  positiveInt,
  prepareRun,
  ROOT,
  raiseLimits,
  request,
  runHeader,
  SERVER_CPU,
  sleep,
  startNimbus,
  step,
  stolenShares,
  stolenText,
  stopChild,
  tempDir,
  writeSection,
} from './lib.mjs';

const SCRIPT = 'bench/webhooks.mjs';
const TARGET_PER_SECOND = 2_000;
const MAX_DRAIN_MS = 120_000;
const INSTANCE_BODY = {
  name: 'hook',
  instance_type: 'compute-1x',
  region: 'us-east-1',
  image: 'ubuntu-24.04',
};

const { values: args } = parseArgs({
  options: {
    subscriptions: { type: 'string', default: '20' },
    rate: { type: 'string', default: '110' },
    duration: { type: 'string', default: '20' },
    rounds: { type: 'string', default: '3' },
    warmup: { type: 'string', default: '5' },
    settle: { type: 'string', default: '2' },
    connections: { type: 'string', default: '8' },
    'cpu-prof': { type: 'string' },
    'no-build': { type: 'boolean', default: false },
    'no-write': { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
  },
});
const settings = {
  subscriptions: positiveInt(args.subscriptions, 'subscriptions'),
  rate: positiveInt(args.rate, 'rate'),
  duration: positiveInt(args.duration, 'duration'),
  rounds: positiveInt(args.rounds, 'rounds'),
  warmup: positiveInt(args.warmup, 'warmup'),
  settle: Number(args.settle),
  connections: positiveInt(args.connections, 'connections'),
};
if (!(settings.settle >= 0 && settings.settle < settings.duration))
  fail('--settle must be 0 or more and below --duration');
cleanup.keep = args.keep;
cleanUpOnExit();

const run = await prepareRun(SCRIPT, { build: !args['no-build'] });
const pinned = canPin();

// --- the receiver, in its own process --------------------------------------------------------------
const receiverDir = tempDir('nimbus-bench-receiver-');
const receiver = fork(path.join(ROOT, 'bench', 'webhook-receiver.mjs'), [receiverDir], {
  stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
});
cleanup.children.add(receiver);
receiver.once('exit', (code, signal) => {
  if (cleanup.children.has(receiver)) fail(`the receiver exited (code ${code}, signal ${signal})`);
});
const [ready] = await once(receiver, 'message');
if (ready?.type !== 'ready') fail(`the receiver said ${JSON.stringify(ready)}`);

/** What the receiver got since the last take. */
async function take() {
  receiver.send({ type: 'take' });
  for (;;) {
    const [message] = await once(receiver, 'message');
    if (message?.type === 'taken') return message;
  }
}

// --- Nimbus ------------------------------------------------------------------------------------------
const dataDir = tempDir('nimbus-bench-webhooks-');
const extra = {
  NIMBUS_WEBHOOK_ALLOW_PRIVATE: '1',
  NIMBUS_WEBHOOK_CA_FILE: ready.caFile,
  NIMBUS_SIM_SPEEDUP: '1000',
};
const nodeArgs = args['cpu-prof'] ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(args['cpu-prof'])}`] : [];
step('starting Nimbus (SQLite, fresh data dir)');
const nimbus = await startNimbus(dataDir, path.join(dataDir, 'nimbus.log'), extra, ROOT, nodeArgs);
if (pinned) {
  pinProcess(nimbus.child.pid, SERVER_CPU);
  pinProcess(receiver.pid, LOAD_CPU);
  pinProcess(process.pid, LOAD_CPU);
}
const auth = bootstrapAuth(dataDir);
const accountId = await accountIdOf(nimbus.port, auth);
raiseLimits(dataDir, accountId, [['webhooks', Math.max(100, settings.subscriptions)]]);

async function call(method, urlPath, body, expected) {
  const res = await request(nimbus.port, method, urlPath, auth, body);
  if (res.status !== expected) fail(`${method} ${urlPath} answered ${res.status}: ${res.body}`);
  return JSON.parse(res.body);
}

// Instances first, running, so their own events come before any subscription exists.
const instanceCount = settings.connections * 2;
step(`creating ${instanceCount} instances`);
const instanceIds = [];
for (let n = 0; n < instanceCount; n++) {
  instanceIds.push(
    (await call('POST', '/v1/instances', { ...INSTANCE_BODY, name: `hook-${n}` }, 202)).data.id,
  );
}
for (const deadline = Date.now() + 60_000; ; await sleep(100)) {
  const list = await call('GET', '/v1/instances?status=running&limit=100', undefined, 200);
  if (list.pagination.total_items === instanceCount) break;
  if (Date.now() > deadline) fail('the instances did not all boot within 60 s');
}

step(`subscribing the receiver ${settings.subscriptions} times to instance.updated`);
const webhookIds = [];
for (let n = 0; n < settings.subscriptions; n++) {
  const created = await call(
    'POST',
    '/v1/webhooks',
    {
      url: `https://${HOST}:${ready.port}/hooks/${n}`,
      events: ['instance.updated'],
      secret: `bench-secret-${n}-0123456789abcdef`,
    },
    201,
  );
  webhookIds.push(created.data.id);
}

// --- the load: PATCHes on schedule --------------------------------------------------------------------
const agent = new https.Agent({
  keepAlive: true,
  maxSockets: settings.connections,
  rejectUnauthorized: false,
});
let renamed = 0;

function patch(instanceId) {
  const payload = JSON.stringify({ name: `hook-renamed-${renamed++}` });
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: HOST,
        port: nimbus.port,
        method: 'PATCH',
        path: `/v1/instances/${instanceId}`,
        agent,
        headers: {
          ...auth,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(payload),
        },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode));
      },
    );
    req.once('error', reject);
    req.end(payload);
  });
}

/**
 * Sends `rate` events a second for `seconds`, on schedule; resolves when every one is answered, with
 * the wall-clock start and end (ms) and the count answered 200 (anything else fails the run).
 */
async function produce(seconds) {
  const total = settings.rate * seconds;
  const pending = [];
  const started = performance.timeOrigin + performance.now();
  const t0 = performance.now();
  let sent = 0;
  let lastAnswer = started;
  const statuses = new Map();
  while (sent < total) {
    const due = Math.min(total, Math.floor(((performance.now() - t0) / 1000) * settings.rate) + 1);
    for (; sent < due; sent++) {
      pending.push(
        patch(instanceIds[sent % instanceIds.length]).then((status) => {
          statuses.set(status, (statuses.get(status) ?? 0) + 1);
          lastAnswer = performance.timeOrigin + performance.now();
        }),
      );
    }
    await sleep(5);
  }
  const sendingEnded = performance.timeOrigin + performance.now();
  await Promise.all(pending);
  const other = [...statuses].filter(([status]) => status !== 200);
  if (other.length > 0) fail(`PATCH answers other than 200: ${JSON.stringify(other)}`);
  return { started, sendingEnded, ended: lastAnswer, events: statuses.get(200) ?? 0 };
}

/** Waits until `expected` distinct deliveries arrived (or MAX_DRAIN_MS passed); returns all arrivals. */
async function drain(expected, since) {
  const got = { at: [], lag: [], ids: [], malformed: 0 };
  const seen = new Set();
  for (;;) {
    const part = await take();
    got.at.push(...part.at);
    got.lag.push(...part.lag);
    got.ids.push(...part.ids);
    got.malformed += part.malformed;
    for (const id of part.ids) seen.add(id);
    if (seen.size >= expected) break;
    if (performance.timeOrigin + performance.now() - since > MAX_DRAIN_MS) {
      fail(`only ${seen.size} of ${expected} deliveries arrived within ${MAX_DRAIN_MS / 1000} s of the load`);
    }
    await sleep(50);
  }
  if (got.malformed > 0) fail(`${got.malformed} deliveries had a body without a timestamp`);
  if (seen.size !== expected) fail(`${seen.size} distinct deliveries arrived, ${expected} expected`);
  return { ...got, distinct: seen.size };
}

// Each durable SQLite commit is one fdatasync (WAL, synchronous=FULL), so counting the server's syncs
// with perf's syscall tracepoints (cheap, unlike strace) counts its commits; null where perf cannot.
const PERF_EVENTS = 'syscalls:sys_enter_fdatasync,syscalls:sys_enter_fsync';
const canCountSyncs =
  spawnSync('perf', ['stat', '-x,', '-e', PERF_EVENTS, '--', 'true'], { encoding: 'utf8' }).status === 0;

/**
 * How long the process' main thread (the event loop) has waited for a CPU while it could run, in
 * seconds (Linux schedstat; null elsewhere): other work on the machine taking its core.
 */
function runQueueWait(pid) {
  try {
    return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[1]) / 1e9;
  } catch {
    return null;
  }
}

/** Starts counting a process' fsync/fdatasync calls; `stop()` resolves with the count (or null). */
function countSyncs(pid) {
  if (!canCountSyncs) return { stop: async () => null };
  const perf = spawn('perf', ['stat', '-x,', '-e', PERF_EVENTS, '-p', String(pid)], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  cleanup.children.add(perf);
  let text = '';
  perf.stderr.setEncoding('utf8');
  perf.stderr.on('data', (chunk) => {
    text += chunk;
  });
  return {
    stop: async () => {
      cleanup.children.delete(perf);
      const exited = once(perf, 'exit');
      perf.kill('SIGINT');
      await exited;
      const counts = text
        .split('\n')
        .map((line) => line.split(','))
        .filter((fields) => fields[2]?.startsWith('syscalls:'))
        .map((fields) => Number(fields[0]));
      return counts.length > 0 && counts.every(Number.isFinite) ? counts.reduce((a, b) => a + b, 0) : null;
    },
  };
}

/**
 * What a durable commit costs on this disk right now, apart from Nimbus: the median time of `count`
 * one-row commits to a SQLite file opened as the store opens it (WAL, synchronous=FULL), in ms.
 */
async function commitProbe(dir, count = 100) {
  const { default: Database } = await import('better-sqlite3');
  const db = new Database(path.join(dir, 'probe.db'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec('create table if not exists t (id integer primary key, v text)');
  const insert = db.prepare('insert into t (v) values (?)');
  const times = [];
  for (let n = 0; n < count; n++) {
    const t0 = performance.now();
    db.transaction(() => insert.run('x'.repeat(200)))();
    times.push(performance.now() - t0);
  }
  db.close();
  return percentile(
    times.sort((a, b) => a - b),
    50,
  );
}

function percentile(sorted, rank) {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((rank / 100) * sorted.length) - 1))];
}

async function round(label, seconds) {
  await take();
  const cpuBefore = cpuSeconds(nimbus.child.pid);
  const stealBefore = cpuTimes();
  const syncs = countSyncs(nimbus.child.pid);
  const waitBefore = runQueueWait(nimbus.child.pid);
  step(`${label}: ${settings.rate} events/s × ${settings.subscriptions} subscriptions for ${seconds} s`);
  const load = await produce(seconds);
  const expected = load.events * settings.subscriptions;
  const got = await drain(expected, load.ended);
  const cpuAfter = cpuSeconds(nimbus.child.pid);
  const syncCount = await syncs.stop();
  const waitAfter = runQueueWait(nimbus.child.pid);
  const stolen = stolenShares(stealBefore, cpuTimes());
  const windowStart = load.started + settings.settle * 1000;
  const inWindow = got.at.filter((t) => t >= windowStart && t <= load.sendingEnded).length;
  const lastArrival = Math.max(...got.at);
  const lags = Float64Array.from(got.lag).sort();
  const perSecond = [];
  for (const t of got.at) {
    const second = Math.floor((t - load.started) / 1000);
    if (second >= 0 && second < seconds) perSecond[second] = (perSecond[second] ?? 0) + 1;
  }
  const cpu = cpuBefore !== null && cpuAfter !== null ? cpuAfter - cpuBefore : null;
  const busySeconds = (lastArrival - load.started) / 1000;
  const result = {
    label,
    events: load.events,
    eventRate: load.events / ((load.ended - load.started) / 1000),
    expected,
    received: got.at.length,
    duplicates: got.at.length - got.distinct,
    sustained: inWindow / ((load.sendingEnded - windowStart) / 1000),
    drainMs: Math.max(0, lastArrival - load.ended),
    p50: percentile(lags, 50),
    p99: percentile(lags, 99),
    max: lags[lags.length - 1],
    perSecond: Array.from({ length: seconds }, (_, n) => perSecond[n] ?? 0),
    cpuShare: cpu === null ? null : cpu / busySeconds,
    cpuUsPerDelivery: cpu === null ? null : (cpu * 1e6) / got.at.length,
    stolen,
    syncs: syncCount,
    cpuWaitShare: waitBefore === null || waitAfter === null ? null : (waitAfter - waitBefore) / busySeconds,
  };
  step(
    `${label}: ${fmt(result.sustained)} deliveries/s sustained, drain ${fmt(result.drainMs)} ms, ` +
      `lag p50 ${result.p50.toFixed(1)} ms p99 ${result.p99.toFixed(1)} ms, ` +
      `events ${result.eventRate.toFixed(1)}/s, ${result.duplicates} repeats, ` +
      `${result.syncs ?? 'n/a'} fsyncs`,
  );
  return result;
}

const probeDir = tempDir('nimbus-bench-probe-');
const commitBefore = await commitProbe(probeDir);
step(`a durable one-row SQLite commit on this disk: ${commitBefore.toFixed(2)} ms (median of 100)`);
await round('warm-up', settings.warmup);
const rounds = [];
for (let n = 1; n <= settings.rounds; n++) rounds.push(await round(`round ${n}`, settings.duration));

const commitAfter = await commitProbe(probeDir);

// --- the delivery log agrees: everything sent, succeeded, once ------------------------------------------
step('checking every subscription’s delivery log');
const eventsSent = renamed;
for (const id of webhookIds) {
  const count = async (status) =>
    (await call('GET', `/v1/webhooks/${id}/deliveries?status=${status}&limit=1`, undefined, 200)).pagination
      .total_items;
  const [succeeded, pending, failed] = [
    await count('succeeded'),
    await count('pending'),
    await count('failed'),
  ];
  if (succeeded !== eventsSent || pending !== 0 || failed !== 0) {
    fail(`${id}: ${succeeded} succeeded, ${pending} pending, ${failed} failed of ${eventsSent} events`);
  }
}
agent.destroy();
await stopChild(nimbus.child);
cleanup.children.delete(receiver);
receiver.disconnect();

// --- results ----------------------------------------------------------------------------------------
const bySustained = [...rounds].sort((a, b) => a.sustained - b.sustained);
const median = bySustained[Math.floor((bySustained.length - 1) / 2)];
const medianOf = (pick) => {
  const values = rounds.map(pick).sort((a, b) => a - b);
  return values[Math.floor((values.length - 1) / 2)];
};
const offered = settings.rate * settings.subscriptions;
const keptUp = (r) => r.drainMs < 1000 && r.sustained >= TARGET_PER_SECOND;
const met = keptUp(median);
const ms = (n) => n.toFixed(1);
const syncCell = (r) =>
  r.syncs === null ? 'n/a' : `${fmt(r.syncs)} (${((100 * r.syncs) / r.received).toFixed(1)})`;
const cpuCell = (r) =>
  r.cpuShare === null ? 'n/a' : `${Math.round(r.cpuShare * 100)}%, ${fmt(r.cpuUsPerDelivery)} µs/delivery`;

const lines = [
  '## Webhook deliveries per second to a local HTTPS receiver (issue #12)',
  '',
  ...runHeader({
    loadAverage: run.loadAverage,
    command: run.command,
    npmScript: 'bench:webhooks',
    generator: 'an open-loop HTTPS client in the benchmark process',
    machineNote: pinned
      ? ' Nimbus pinned to CPU 0; the receiver and the load on CPU 1 (taskset). The machine is shared with other work, so rounds vary.'
      : ' Not pinned (taskset unavailable or one CPU). The machine is shared with other work, so rounds vary.',
  }),
  `Load: \`PATCH /v1/instances/{id}\` (a new name: one \`instance.updated\` event, committed with its fan-out) at ${settings.rate} events/s, open loop over ${settings.connections} keep-alive TLS connections, spread over ${instanceCount} running instances; ${settings.subscriptions} subscriptions to \`instance.updated\`, each to its own path on one receiver, so **${fmt(offered)} deliveries/s offered**. A ${settings.warmup} s warm-up, then ${settings.rounds} rounds of ${settings.duration} s on the same server, each drained before the next. The receiver is a \`node:https\` server in its own process answering 204. Nimbus runs the embedded profile on a fresh data dir: SQLite in WAL mode with synchronous=FULL, so every commit (event and fan-out, claim, attempt outcome) is fsynced before it counts; \`NIMBUS_WEBHOOK_ALLOW_PRIVATE=1\`, \`NIMBUS_WEBHOOK_CA_FILE\` the receiver's certificate, logging at info to a file.`,
  '',
  `"sustained": deliveries received from ${settings.settle} s after the load began until it ended, per second; "drain": from the last event answered to the last delivery received; "lag": receipt minus the event's \`timestamp\` (taken just before the event's transaction commits), over every delivery of the round; "server fsyncs": fsync and fdatasync calls of the Nimbus process over the round and its drain (perf's syscall tracepoints), one per durable commit: one per event made by the load, the rest the delivery worker's; "server CPU": Nimbus' CPU time over the same time; "event loop waiting for a CPU": the share of that time Nimbus' main thread was ready to run while other work held its core (schedstat).`,
  '',
  '| round | events/s | deliveries | sustained deliveries/s | per second, first → last 5 s | drain (ms) | lag p50 (ms) | lag p99 (ms) | lag max (ms) | repeats | server fsyncs (per 100 deliveries) | server CPU | event loop waiting for a CPU | steal |',
  '|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|---:|---|',
  ...rounds.map((r) => {
    const first = r.perSecond.slice(0, 5);
    const last = r.perSecond.slice(-5);
    const avg = (xs) => fmt(xs.reduce((s, n) => s + n, 0) / Math.max(1, xs.length));
    return `| ${r.label.replace('round ', '')} | ${r.eventRate.toFixed(1)} | ${fmt(r.received)} | **${fmt(r.sustained)}** | ${avg(first)} → ${avg(last)} | ${fmt(r.drainMs)} | ${ms(r.p50)} | ${ms(r.p99)} | ${ms(r.max)} | ${r.duplicates} | ${syncCell(r)} | ${cpuCell(r)} | ${r.cpuWaitShare === null ? 'n/a' : `${Math.round(r.cpuWaitShare * 100)}%`} | ${stolenText(r.stolen)} |`;
  }),
  '',
  `A durable one-row commit to a SQLite file on the same disk, apart from Nimbus (median of 100): ${commitBefore.toFixed(2)} ms before the rounds, ${commitAfter.toFixed(2)} ms after them. Every commit holds up the whole server, since better-sqlite3 runs on the event loop.`,
  '',
  `Medians of the ${rounds.length} rounds: **${fmt(medianOf((r) => r.sustained))} deliveries/s** sustained, lag p50 **${ms(medianOf((r) => r.p50))} ms**, p99 **${ms(medianOf((r) => r.p99))} ms**, drain ${fmt(medianOf((r) => r.drainMs))} ms.`,
  '',
  `Target: at least ${fmt(TARGET_PER_SECOND)} deliveries/s sustained (kept up: the median round delivers at least that while the load runs and is drained within 1 s of its end): **${met ? 'met' : 'not met'}**${offered < TARGET_PER_SECOND ? ` (only ${fmt(offered)}/s were offered)` : ''}.`,
  '',
  `Checks made by the same run: every PATCH answered 200; every delivery of every event reached the receiver (${rounds.reduce((s, r) => s + r.duplicates, 0)} repeats in all); afterwards each subscription's delivery log, read through the API, held ${fmt(eventsSent)} deliveries (warm-up included), all \`succeeded\`, none pending or failed.`,
  '',
];
process.stdout.write(`${lines.join('\n')}\n`);
if (!args['no-write']) writeSection(SCRIPT, lines);
process.exit(0);
