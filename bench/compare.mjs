/**
 * Compares two builds of Nimbus by their CPU time per authenticated `GET /v1/account`, steadily enough to
 * show a change of a few percent, which runs of bench/account.mjs one after the other cannot: on a shared
 * machine their rounds move by about 5% between them.
 *
 * How it works: the base is a git revision, checked out with `git worktree add` into a temporary
 * directory (using this checkout's node_modules) and built there; the candidate is this working tree,
 * built too. Each serves a fresh data dir of its own, made by its own first start (bootstrap account and
 * key), with the account's rate limit raised by its own admin command, so the two may differ in schema.
 * In each round both are loaded at the same time, each by its own autocannon with the same connections
 * and duration, so whatever else the machine does falls on both alike; what is compared is each server's
 * own CPU time per request in that round. With two CPUs, both servers run on one and the load on the
 * other. Which of the two is started first moved comparisons of a build with itself by 1 to 2%, so half
 * the rounds start the base first and half the candidate. Prints each round and the median of the
 * per-round ratios; writes nothing.
 *
 * Usage: node bench/compare.mjs --base <revision> [--rounds N] [--duration S] [--warmup S]
 *   [--connections N]
 *   --base  what to compare this working tree with: HEAD (uncommitted changes), HEAD~1, a branch…
 *   --rounds  an even number is best: half in each starting order (default 6)
 * Exits 1 when a check fails (a build, a non-2xx answer, a socket error).
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import {
  accountIdOf,
  bootstrapAuth,
  canPin,
  checkOutAndBuild,
  cleanUpOnExit,
  fail,
  HOST,
  LOAD_CPU,
  pinProcess,
  positiveInt,
  prepareRun,
  RAISED_LIMIT,
  ROOT,
  raiseLimits,
  request,
  runLoad,
  SERVER_CPU,
  startNimbus,
  step,
  stopChild,
  summarize,
  tempDir,
} from './lib.mjs';

const SCRIPT = 'bench/compare.mjs';

async function main() {
  const { values } = parseArgs({
    options: {
      base: { type: 'string' },
      rounds: { type: 'string', default: '6' },
      duration: { type: 'string', default: '8' },
      warmup: { type: 'string', default: '5' },
      connections: { type: 'string', default: '10' },
    },
  });
  if (!values.base) fail('--base <revision> is required: the build to compare this working tree with');
  const rounds = positiveInt(values.rounds, 'rounds');
  const settings = {
    connections: positiveInt(values.connections, 'connections'),
    duration: positiveInt(values.duration, 'duration'),
  };
  const warmup = positiveInt(values.warmup, 'warmup');
  cleanUpOnExit();
  const pin = canPin();
  const { autocannon } = await prepareRun(SCRIPT);
  if (pin) pinProcess(process.pid, LOAD_CPU);

  const baseRoot = checkOutAndBuild(values.base);
  const builds = [];
  for (const [name, label, root] of [
    ['base', `base (${values.base})`, baseRoot],
    ['candidate', 'candidate (working tree)', ROOT],
  ]) {
    builds.push({ name, label, root, ...(await prepareDataDir(name, root)) });
  }

  const results = [];
  const halves = [
    { order: builds, rounds: Math.ceil(rounds / 2) },
    { order: [...builds].reverse(), rounds: Math.floor(rounds / 2) },
  ];
  for (const half of halves) {
    if (half.rounds === 0) continue;
    const servers = [];
    for (const build of half.order) {
      const log = path.join(build.dataDir, 'nimbus.log');
      const server = await startNimbus(build.dataDir, log, {}, build.root);
      const sample = await request(server.port, 'GET', '/v1/account', build.auth);
      if (sample.headers['x-ratelimit-limit'] !== String(RAISED_LIMIT)) {
        fail(`${build.label}: the raised rate limit is not in effect`);
      }
      if (pin) pinProcess(server.child.pid, SERVER_CPU);
      servers.push({ ...build, ...server });
    }
    const loadOf = (server, duration) => ({
      url: `https://${HOST}:${server.port}/v1/account`,
      headers: server.auth,
      ...settings,
      duration,
    });
    step(`started ${servers.map((s) => s.name).join(', then ')}`);
    await Promise.all(
      servers.map((s) => runLoad(autocannon, `${s.name} warm-up`, loadOf(s, warmup), null, 200)),
    );
    for (let round = 1; round <= half.rounds; round += 1) {
      const measured = await Promise.all(
        servers.map(async (s) =>
          summarize(
            await runLoad(
              autocannon,
              `round ${results.length + 1}: ${s.name}`,
              loadOf(s, settings.duration),
              s.child.pid,
              200,
            ),
          ),
        ),
      );
      const byName = Object.fromEntries(servers.map((s, i) => [s.name, measured[i]]));
      if (byName.base.cpuUsPerRequest === null)
        fail('the servers’ CPU time cannot be read here (Linux /proc)');
      results.push({ firstStarted: servers[0].name, base: byName.base, candidate: byName.candidate });
    }
    for (const server of servers) await stopChild(server.child);
  }
  report(results, builds);
}

/**
 * A data dir made by the build at `root`: its bootstrap account, whose limit is raised, and the key as a
 * request header (`auth`).
 */
async function prepareDataDir(name, root) {
  const dataDir = tempDir(`nimbus-compare-${name}-data-`);
  step(`first start of the ${name}, to make its account and key (data dir ${dataDir})`);
  const first = await startNimbus(dataDir, path.join(dataDir, 'nimbus.log'), {}, root);
  const auth = bootstrapAuth(dataDir);
  raiseLimits(dataDir, await accountIdOf(first.port, auth), [], {}, root);
  await stopChild(first.child);
  return { dataDir, auth };
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

function report(results, builds) {
  const us = (f) => `${f.cpuUsPerRequest.toFixed(2)} µs`;
  const lines = ['', 'round  started first  base CPU/request  candidate CPU/request  candidate/base'];
  results.forEach((r, i) => {
    const ratio = r.candidate.cpuUsPerRequest / r.base.cpuUsPerRequest;
    lines.push(
      `${String(i + 1).padStart(5)}  ${r.firstStarted.padEnd(13)}  ${us(r.base).padStart(16)}  ${us(r.candidate).padStart(21)}  ${ratio.toFixed(3).padStart(14)}`,
    );
  });
  const ratios = results.map((r) => r.candidate.cpuUsPerRequest / r.base.cpuUsPerRequest);
  const medianRatio = median(ratios);
  lines.push(
    '',
    `${builds[0].label}: median ${median(results.map((r) => r.base.cpuUsPerRequest)).toFixed(2)} µs per request`,
    `${builds[1].label}: median ${median(results.map((r) => r.candidate.cpuUsPerRequest)).toFixed(2)} µs per request`,
    `candidate/base, median of the rounds: ${medianRatio.toFixed(3)} (${((medianRatio - 1) * 100).toFixed(1)}%; ` +
      'with the defaults, the same build against itself stays within about 1.5%)',
    '',
  );
  process.stdout.write(lines.join('\n'));
}

await main();
// Cleanup (servers, worktree, data dir) runs on exit.
process.exit(0);
