/**
 * Live metric streams at scale (issue 15): many concurrent WSS streams at 1 Hz on ONE server process.
 *
 *   node bench/metrics-streams.mjs [--streams 10000] [--accounts 100] [--instances 20] [--clients 4]
 *                                  [--interval 1] [--duration 60] [--warmup 10] [--baseline 20] [--no-build]
 *
 * The server is a child `bin/nimbus serve` of this checkout (built first unless --no-build) on a fresh
 * SQLite data dir, with the simulator at NIMBUS_SIM_SPEEDUP=1000 (boots take 8 ms), us-east-1's public
 * pool widened to 100.64.0.0/16 (NIMBUS_PUBLIC_IP_POOLS; the default /24 holds 254) and every other
 * setting at its default: NIMBUS_METRICS_MAX_STREAMS=100 streams per account, the professional plan's
 * rate limit (burst 200, 10,000 an hour), the collector sampling every running instance every 10 s.
 *
 * The fleet is spread as a real one would be, within those limits: `--accounts` professional accounts
 * (made with the accounts service in this process, as `nimbus admin create-account` makes them), each
 * creating `--instances` compute-2x instances through the API, and each account opening
 * streams / accounts streams (at most its cap of 100), spread evenly over its instances: with the
 * defaults, 100 accounts × 100 streams over 2,000 instances, five viewers an instance. Each account
 * makes about 125 requests in all (creates, a few lists, one per stream), inside its burst.
 *
 * The clients are `--clients` other processes (bench/metrics-streams-client.mjs, the `ws` package),
 * each holding its share of the streams. A stream authenticates with the Authorization header; once all
 * are open (at the default interval, 5 s), each subscribes at `--interval` seconds. Once every stream is
 * subscribed and `--warmup` seconds have passed,
 * the clients record for `--duration` seconds the lag of every metrics message from its sample time
 * (the message's `timestamp`) to its arrival; meanwhile the server's CPU time (from /proc) and its RSS
 * (sampled each second) are taken. The server's CPU is also taken for `--baseline` seconds before any
 * stream opens (the collector and the jobs of a server with that fleet and no streams), so the streams'
 * own share is the difference.
 *
 * File descriptors: the server holds one per stream. Node raises its soft limit to the hard limit when
 * it starts, so the hard limit (ulimit -Hn) must exceed the stream count; the script checks it.
 */
import { execFileSync, fork } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import {
  cleanUpOnExit,
  cleanup,
  cpuSeconds,
  fail,
  fmt,
  positiveInt,
  prepareRun,
  ROOT,
  request,
  runHeader,
  sleep,
  startNimbus,
  step,
  stopChild,
  tempDir,
  writeSection,
} from './lib.mjs';

const { values: args } = parseArgs({
  options: {
    streams: { type: 'string', default: '10000' },
    accounts: { type: 'string', default: '100' },
    instances: { type: 'string', default: '20' },
    clients: { type: 'string', default: '4' },
    interval: { type: 'string', default: '1' },
    duration: { type: 'string', default: '60' },
    warmup: { type: 'string', default: '10' },
    baseline: { type: 'string', default: '20' },
    'no-build': { type: 'boolean', default: false },
    /** Writes the server's CPU profile (node --cpu-prof) into this dir. */
    'cpu-prof': { type: 'string' },
    keep: { type: 'boolean', default: false },
  },
});
const STREAMS = positiveInt(args.streams, 'streams');
const ACCOUNTS = positiveInt(args.accounts, 'accounts');
const INSTANCES = positiveInt(args.instances, 'instances');
const CLIENTS = positiveInt(args.clients, 'clients');
const INTERVAL = positiveInt(args.interval, 'interval');
const DURATION = positiveInt(args.duration, 'duration');
const WARMUP = positiveInt(args.warmup, 'warmup');
const BASELINE = positiveInt(args.baseline, 'baseline');
const MAX_STREAMS_PER_ACCOUNT = 100;
const STREAMS_PER_ACCOUNT = Math.ceil(STREAMS / ACCOUNTS);
if (STREAMS_PER_ACCOUNT > MAX_STREAMS_PER_ACCOUNT) {
  fail(
    `${STREAMS} streams over ${ACCOUNTS} accounts is more than the ${MAX_STREAMS_PER_ACCOUNT} an account may hold`,
  );
}
cleanup.keep = args.keep;

const hardLimit = Number(execFileSync('sh', ['-c', 'ulimit -Hn'], { encoding: 'utf8' }).trim());
if (Number.isFinite(hardLimit) && hardLimit < STREAMS + 1_000) {
  fail(`the hard limit on open files is ${hardLimit}; ${STREAMS} streams need at least ${STREAMS + 1_000}`);
}

cleanUpOnExit();
const { command, loadAverage } = await prepareRun('bench/metrics-streams.mjs', { build: !args['no-build'] });
const dist = (file) => import(path.join(ROOT, 'dist', file));

// --- The server and its fleet ---------------------------------------------------------------------
const dataDir = tempDir('nimbus-bench-streams-');
const logFile = path.join(dataDir, 'nimbus.log');
step('starting nimbus serve');
const nimbus = await startNimbus(
  dataDir,
  logFile,
  {
    NIMBUS_SIM_SPEEDUP: '1000',
    // The default pool of us-east-1 is a documentation /24 (254 addresses).
    NIMBUS_PUBLIC_IP_POOLS: 'us-east-1=100.64.0.0/16',
  },
  ROOT,
  args['cpu-prof'] ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(args['cpu-prof'])}`] : [],
);
const agent = new https.Agent({ keepAlive: true, maxSockets: 16 });

step(`creating ${ACCOUNTS} professional accounts`);
const accounts = [];
{
  const { loadConfig } = await dist('platform/config.js');
  const { openBackends } = await dist('composition.js');
  const env = { NIMBUS_DATA_DIR: dataDir, NIMBUS_LOG_LEVEL: 'warn' };
  const backends = await openBackends(loadConfig(env), { steppedJobs: true });
  for (let i = 0; i < ACCOUNTS; i++) {
    const { account, apiKey } = await backends.services.accounts.create({
      email: `streams-${i}@bench.example`,
      plan: 'professional',
    });
    accounts.push({ id: account.id, key: apiKey.key, instances: [], requests: 0 });
  }
  await backends.close();
}

async function api(account, method, urlPath, body) {
  account.requests += 1;
  const res = await request(
    nimbus.port,
    method,
    urlPath,
    { authorization: `Bearer ${account.key}` },
    body,
    agent,
  );
  return { status: res.status, body: res.body ? JSON.parse(res.body) : null };
}

/** Runs `task` over `items`, `concurrency` at a time. */
async function pool(items, concurrency, task) {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < items.length) await task(items[next++]);
    }),
  );
}

step(`creating ${fmt(ACCOUNTS * INSTANCES)} instances (${INSTANCES} per account) through the API`);
const createStarted = performance.now();
await pool(
  accounts.flatMap((account) => Array.from({ length: INSTANCES }, (_, i) => ({ account, i }))),
  8,
  async ({ account, i }) => {
    const res = await api(account, 'POST', '/v1/instances', {
      name: `web-${i}`,
      instance_type: 'compute-2x',
      region: 'us-east-1',
      image: 'ubuntu-24.04',
    });
    if (res.status !== 202) fail(`create answered ${res.status}: ${JSON.stringify(res.body)}`);
    account.instances.push(res.body.data.id);
  },
);
const createSeconds = (performance.now() - createStarted) / 1000;

step('waiting for every instance to run');
for (const account of accounts) {
  for (let attempt = 0; ; attempt++) {
    const res = await api(account, 'GET', '/v1/instances?status=running&limit=100');
    if (res.status !== 200) fail(`list answered ${res.status}: ${JSON.stringify(res.body)}`);
    if (res.body.data.length === INSTANCES) break;
    if (attempt > 60)
      fail(`account ${account.id}: ${res.body.data.length} of ${INSTANCES} instances running after a minute`);
    await sleep(1_000);
  }
}

// --- Measuring ------------------------------------------------------------------------------------
function rssBytes(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? Number.NaN) * 1024;
}

/** Server CPU seconds and RSS samples over `seconds`. */
async function watchServer(seconds) {
  const rss = [];
  const cpuBefore = cpuSeconds(nimbus.child.pid);
  const began = performance.now();
  while (performance.now() - began < seconds * 1000) {
    rss.push(rssBytes(nimbus.child.pid));
    await sleep(1_000);
  }
  const elapsed = (performance.now() - began) / 1000;
  return { cpu: cpuSeconds(nimbus.child.pid) - cpuBefore, seconds: elapsed, rss };
}

step(`baseline: the server with its fleet and no streams, ${BASELINE} s`);
const baseline = await watchServer(BASELINE);

// --- Streams --------------------------------------------------------------------------------------
const streams = [];
for (const account of accounts) {
  for (let s = 0; s < STREAMS_PER_ACCOUNT && streams.length < STREAMS; s++) {
    streams.push({ key: account.key, instanceId: account.instances[s % account.instances.length] });
    account.requests += 1;
  }
}
const clients = Array.from({ length: CLIENTS }, () => {
  const child = fork(path.join(ROOT, 'bench', 'metrics-streams-client.mjs'), [], { stdio: 'inherit' });
  cleanup.children.add(child);
  return child;
});
const failures = [];
for (const client of clients) {
  client.on('message', (message) => {
    if (message.type === 'failed') failures.push(message.message);
  });
}
function awaitMessage(client, type) {
  return new Promise((resolve) => {
    const listener = (message) => {
      if (message.type === type || message.type === 'failed') {
        client.off('message', listener);
        resolve(message);
      }
    };
    client.on('message', listener);
  });
}

step(`opening ${fmt(STREAMS)} streams from ${CLIENTS} client processes`);
const openStarted = performance.now();
const opened = clients.map((client) => awaitMessage(client, 'opened'));
clients.forEach((client, c) => {
  client.send({
    type: 'open',
    port: nimbus.port,
    streams: streams.filter((_, i) => i % CLIENTS === c),
    concurrency: 16,
  });
});
for (const result of await Promise.all(opened)) {
  if (result.type === 'failed') fail(`a stream could not be opened: ${result.message}`);
}
const openSeconds = (performance.now() - openStarted) / 1000;
step(`all open in ${openSeconds.toFixed(1)} s; subscribing each at ${INTERVAL} s`);
const subscribed = clients.map((client) => awaitMessage(client, 'subscribed'));
for (const client of clients) client.send({ type: 'subscribe', interval: INTERVAL });
for (const result of await Promise.all(subscribed)) {
  if (result.type === 'failed') fail(`a stream could not be subscribed: ${result.message}`);
}
const openAndSubscribeSeconds = (performance.now() - openStarted) / 1000;

step(`all subscribed after ${openAndSubscribeSeconds.toFixed(1)} s; warming up ${WARMUP} s`);
await sleep(WARMUP * 1000);
step(`measuring ${DURATION} s`);
const loadAtMeasure = os.loadavg()[0];
const clientCpuBefore = clients.map((client) => cpuSeconds(client.pid));
for (const client of clients) client.send({ type: 'measure' });
const streaming = await watchServer(DURATION);
const results = clients.map((client) => awaitMessage(client, 'result'));
for (const client of clients) client.send({ type: 'stop' });
const clientCpu = clients.reduce((sum, client, c) => sum + (cpuSeconds(client.pid) - clientCpuBefore[c]), 0);
const collected = await Promise.all(results);
for (const client of clients) {
  cleanup.children.delete(client);
  if (client.exitCode === null) await once(client, 'exit');
}
if (failures.length > 0) fail(`streams failed during the run: ${failures.slice(0, 5).join('; ')}`);
await stopChild(nimbus.child);

// --- Figures --------------------------------------------------------------------------------------
const histogram = new Map();
let received = 0;
let dropped = 0;
let maxLag = 0;
for (const result of collected) {
  received += result.received;
  dropped += result.dropped;
  maxLag = Math.max(maxLag, result.maxLag);
  for (const [ms, count] of result.buckets) histogram.set(ms, (histogram.get(ms) ?? 0) + count);
}
const lags = [...histogram].sort((a, b) => a[0] - b[0]);
function percentile(rank) {
  const target = Math.ceil((rank / 100) * received);
  let seen = 0;
  for (const [ms, count] of lags) {
    seen += count;
    if (seen >= target) return ms;
  }
  return Number.NaN;
}
const p50 = percentile(50);
const p99 = percentile(99);
const share = (cpu, seconds) => `${((cpu / seconds) * 100).toFixed(1)}%`;
const mb = (bytes) => `${fmt(bytes / 1024 / 1024)} MB`;
const maxRss = Math.max(...streaming.rss);
const streamCpu = streaming.cpu / streaming.seconds - baseline.cpu / baseline.seconds;
step(
  `lag p50 ${p50} ms, p99 ${p99} ms; server ${share(streaming.cpu, streaming.seconds)} of a core, RSS up to ${mb(maxRss)}`,
);

const requestsPerAccount = Math.max(...accounts.map((a) => a.requests));
writeSection('bench/metrics-streams.mjs', [
  '## Live metric streams: 10,000 concurrent WSS streams at 1 Hz on one server process (issue 15)',
  '',
  ...runHeader({
    loadAverage,
    command,
    npmScript: 'bench:metrics-streams',
    generator: `ws ${JSON.parse(readFileSync(path.join(ROOT, 'node_modules', 'ws', 'package.json'), 'utf8')).version} clients in ${CLIENTS} processes`,
    machineNote: ` The 1-minute load average was ${loadAtMeasure.toFixed(2)} when the measurement began: other work shared the machine's ${os.cpus().length} CPUs with the server and the clients, so the lags include time spent waiting for a CPU; the CPU times are the processes' own.`,
  }),
  `One \`nimbus serve\` (SQLite, simulator at NIMBUS_SIM_SPEEDUP=1000, NIMBUS_PUBLIC_IP_POOLS=us-east-1=100.64.0.0/16, every other setting its default: ${MAX_STREAMS_PER_ACCOUNT} streams per account, the professional rate limit of burst 200 and 10,000 an hour). ` +
    `${fmt(ACCOUNTS)} professional accounts, each with ${INSTANCES} running compute-2x instances created through the API (${fmt(ACCOUNTS * INSTANCES)} in all, in ${createSeconds.toFixed(0)} s) ` +
    `and ${fmt(STREAMS_PER_ACCOUNT)} streams spread over them (${fmt(STREAMS / (ACCOUNTS * INSTANCES))} viewers an instance), at most ${requestsPerAccount} requests an account in all. ` +
    `Each stream: WSS, key in the Authorization header, then (once all are open) \`{"type":"subscribe","interval":${INTERVAL}}\`. The server's collector samples the ${fmt(ACCOUNTS * INSTANCES)} instances every 10 s meanwhile.`,
  '',
  '| | |',
  '|---|---|',
  `| streams open at once | ${fmt(STREAMS)} (opened in ${openSeconds.toFixed(0)} s at the default interval of 5 s, all subscribed at ${INTERVAL} s after ${openAndSubscribeSeconds.toFixed(0)} s) |`,
  `| metrics messages received in ${streaming.seconds.toFixed(0)} s | ${fmt(received)}: ${fmt(received / streaming.seconds)} a second of the ${fmt(STREAMS / INTERVAL)} sent; ${fmt(dropped)} reported dropped by backpressure |`,
  `| lag from sample time to client receipt, p50 / p99 / max | **${p50} ms / ${p99} ms** / ${fmt(maxLag)} ms (target p99 ≤ 200 ms) |`,
  `| server CPU while streaming | ${share(streaming.cpu, streaming.seconds)} of a core (${streaming.cpu.toFixed(1)} s in ${streaming.seconds.toFixed(0)} s) |`,
  `| server CPU with the same fleet and no streams | ${share(baseline.cpu, baseline.seconds)} of a core |`,
  `| the streams' own share | ${(streamCpu * 100).toFixed(1)}% of a core, ${fmt((streamCpu * 1e6 * INTERVAL) / STREAMS)} µs per message |`,
  `| server RSS while streaming, max / at the end | **${mb(maxRss)}** / ${mb(streaming.rss.at(-1))} (target ≤ 1 GB); ${mb(Math.max(...baseline.rss))} before any stream |`,
  `| client processes' CPU while streaming | ${share(clientCpu, streaming.seconds)} of a core in all |`,
  '',
]);
