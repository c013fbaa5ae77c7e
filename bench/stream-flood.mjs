/**
 * Two tenants, one server (issue 29 item 4): what tenant A flooding its metric streams with subscribe
 * messages does to tenant B's REST latency, before and after the fix, in one run.
 *
 *   node bench/stream-flood.mjs [--base main] [--duration 10] [--sockets 4] [--connections 2]
 *                               [--reconnect-ms 250] [--no-build]
 *
 * Two builds, one after the other on this machine: the base (a git revision, checked out with
 * `git worktree add` into a temporary directory using this checkout's node_modules, and built) and the
 * candidate (this working tree, built unless --no-build). Each serves a fresh SQLite data dir of its own
 * (bin/nimbus serve, loopback only, simulator at NIMBUS_SIM_SPEEDUP=1000, every other setting its
 * default). Tenant B is the bootstrap account (rate limit raised so that B is never refused); tenant A
 * is a professional account at the plan's rate limit (burst 200, 10,000 an hour) with one running
 * instance. Two phases of `--duration` seconds each:
 *
 *   alone  B sends `GET /v1/account` on `--connections` keep-alive connections, back to back;
 *   flood  the same, while A (bench/stream-flood-client.mjs, another process) holds `--sockets` streams
 *          to its instance and sends subscribe messages on each as fast as the socket takes them,
 *          reconnecting `--reconnect-ms` after the server closes one.
 *
 * Reported per build and phase: B's requests, p50 and p99; the server's CPU; A's messages sent and
 * answered, its connections and their close codes; A's hourly budget left afterwards.
 */
import { fork, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { parseArgs } from 'node:util';
import {
  accountIdOf,
  admin,
  bootstrapAuth,
  checkOutAndBuild,
  cleanUpOnExit,
  cpuSeconds,
  fail,
  fmt,
  positiveInt,
  prepareRun,
  ROOT,
  raiseLimits,
  request,
  runHeader,
  sleep,
  startNimbus,
  step,
  stopChild,
  tempDir,
  writeSection,
} from './lib.mjs';

const SCRIPT = 'bench/stream-flood.mjs';

const { values: args } = parseArgs({
  options: {
    base: { type: 'string', default: 'main' },
    duration: { type: 'string', default: '10' },
    sockets: { type: 'string', default: '4' },
    connections: { type: 'string', default: '2' },
    'reconnect-ms': { type: 'string', default: '250' },
    'no-build': { type: 'boolean', default: false },
  },
});
const DURATION = positiveInt(args.duration, 'duration');
const SOCKETS = positiveInt(args.sockets, 'sockets');
const CONNECTIONS = positiveInt(args.connections, 'connections');
const RECONNECT_MS = Number(args['reconnect-ms']);

/** The base build (lib.mjs's worktree of `revision`) and its short commit, for the table's label. */
function baseBuild(revision) {
  const dir = checkOutAndBuild(revision);
  const commit = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: dir, encoding: 'utf8' });
  return { dir, commit: commit.stdout.trim() };
}

/** Resident memory of a process in MB (Linux /proc; 0 elsewhere). */
function rssMb(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
  } catch {
    return 0;
  }
}

function percentile(sorted, p) {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** B's back-to-back GET /v1/account on `CONNECTIONS` keep-alive connections for `seconds`. */
async function measureTenantB(port, auth, seconds) {
  const agent = new https.Agent({ keepAlive: true, maxSockets: CONNECTIONS, rejectUnauthorized: false });
  const latencies = [];
  let refused = 0;
  const deadline = performance.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (performance.now() < deadline) {
        const started = performance.now();
        const res = await request(port, 'GET', '/v1/account', auth, undefined, agent);
        if (res.status === 200) latencies.push(performance.now() - started);
        else refused += 1;
      }
    }),
  );
  agent.destroy();
  latencies.sort((a, b) => a - b);
  return {
    requests: latencies.length,
    refused,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
  };
}

async function runBuild(name, root) {
  const dataDir = tempDir(`nimbus-flood-${name}-`);
  const server = await startNimbus(
    dataDir,
    path.join(dataDir, 'nimbus.log'),
    { NIMBUS_SIM_SPEEDUP: '1000' },
    root,
  );
  const tenantB = bootstrapAuth(dataDir);
  raiseLimits(dataDir, await accountIdOf(server.port, tenantB), [], {}, root);
  const created = admin(
    dataDir,
    ['create-account', '--email', `flooder-${Date.now()}@example.com`, '--plan', 'professional'],
    {},
    root,
  );
  const tenantA = { authorization: `Bearer ${created.api_key}` };
  const instance = await request(server.port, 'POST', '/v1/instances', tenantA, {
    name: 'flooded',
    instance_type: 'compute-2x',
    region: 'us-east-1',
    image: 'ubuntu-24.04',
  });
  if (instance.status !== 202) fail(`${name}: create answered ${instance.status}: ${instance.body}`);
  const instanceId = JSON.parse(instance.body).data.id;
  for (let i = 0; ; i++) {
    const got = await request(server.port, 'GET', `/v1/instances/${instanceId}`, tenantA);
    if (JSON.parse(got.body).data.status === 'running') break;
    if (i > 200) fail(`${name}: the instance did not reach running`);
    await sleep(50);
  }

  step(`${name}: B alone, ${DURATION} s`);
  const cpuAlone = cpuSeconds(server.child.pid);
  const alone = await measureTenantB(server.port, tenantB, DURATION);
  const aloneCpu = cpuSeconds(server.child.pid) - cpuAlone;

  const rssBeforeMb = rssMb(server.child.pid);
  step(`${name}: B while A floods on ${SOCKETS} sockets, ${DURATION} s`);
  const flooder = fork(path.join(ROOT, 'bench', 'stream-flood-client.mjs'));
  const flooded = new Promise((resolve, reject) => {
    flooder.once('message', resolve);
    flooder.once('exit', (code) => code !== 0 && reject(new Error(`flood client exited ${code}`)));
  });
  const cpuFlood = cpuSeconds(server.child.pid);
  flooder.send({
    port: server.port,
    key: created.api_key,
    instanceId,
    sockets: SOCKETS,
    durationS: DURATION,
    reconnectMs: RECONNECT_MS,
  });
  let maxRssMb = 0;
  const rssTimer = setInterval(() => {
    maxRssMb = Math.max(maxRssMb, rssMb(server.child.pid));
  }, 250);
  const during = await measureTenantB(server.port, tenantB, DURATION);
  clearInterval(rssTimer);
  const floodCpu = cpuSeconds(server.child.pid) - cpuFlood;
  const totals = await flooded;
  const budget = JSON.parse((await request(server.port, 'GET', '/v1/account/rate-limit', tenantA)).body).data;
  await stopChild(server.child);
  return { alone, aloneCpu, during, floodCpu, totals, budget, maxRssMb, rssBeforeMb };
}

function report(builds, { command, loadAverage }) {
  const ms = (n) => `${n.toFixed(2)} ms`;
  const share = (cpu) => `${((cpu / DURATION) * 100).toFixed(0)}%`;
  const lines = [
    '## Two tenants: metric-stream subscribe floods against another tenant’s REST latency (issue 29 item 4)',
    '',
    ...runHeader({
      loadAverage,
      command,
      npmScript: 'bench:stream-flood',
      generator: 'ws and node:https clients',
    }),
    `Each build serves a fresh SQLite data dir; tenant B sends \`GET /v1/account\` on ${CONNECTIONS} keep-alive ` +
      `connections for ${DURATION} s alone, then ${DURATION} s while tenant A (a professional account: burst 200, ` +
      `10,000 an hour) floods ${SOCKETS} metric streams with subscribe messages from another process, reconnecting ` +
      `${RECONNECT_MS} ms after each close. Builds run one after the other, base first.`,
    '',
    '| build | B alone p50 / p99 | B during the flood p50 / p99 | B requests alone / flood | server CPU alone / flood | server RSS before / max in the flood | A messages sent / answered | A connections, close codes | A hourly budget left |',
    '|---|---|---|---|---|---|---|---|---|',
  ];
  for (const { label, result: r } of builds) {
    const closes = Object.entries(r.totals.closes)
      .map(([code, n]) => `${fmt(n)}× ${code}`)
      .join(', ');
    lines.push(
      `| ${label} | ${ms(r.alone.p50)} / ${ms(r.alone.p99)} | **${ms(r.during.p50)} / ${ms(r.during.p99)}** | ` +
        `${fmt(r.alone.requests)} / ${fmt(r.during.requests)} | ${share(r.aloneCpu)} / ${share(r.floodCpu)} | ` +
        `${fmt(r.rssBeforeMb)} / ${fmt(r.maxRssMb)} MB | ` +
        `${fmt(r.totals.sent)} / ${fmt(r.totals.subscribed)} | ${fmt(r.totals.connections)}: ${closes} | ` +
        `${fmt(r.budget.remaining)} of ${fmt(r.budget.limit)} |`,
    );
  }
  lines.push('');
  writeSection(SCRIPT, lines);
  process.stdout.write(`${lines.join('\n')}\n`);
}

cleanUpOnExit();
const run = await prepareRun(SCRIPT, { build: !args['no-build'] });
const base = baseBuild(args.base);
const builds = [];
builds.push({ label: `base (${args.base}, ${base.commit})`, result: await runBuild('base', base.dir) });
const head = spawnSync('git', ['rev-parse', '--short', 'HEAD'], {
  cwd: ROOT,
  encoding: 'utf8',
}).stdout.trim();
builds.push({ label: `candidate (working tree at ${head})`, result: await runBuild('candidate', ROOT) });
report(builds, run);
process.exit(0);
