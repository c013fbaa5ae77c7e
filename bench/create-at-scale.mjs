/**
 * Benchmark of issue #18, item 3: the cost of a create with 1,000,000 instances in the store against an
 * empty store (target: p99 within 2×), on SQLite with every commit fsynced.
 *
 * For each store — empty, then seeded — a built Nimbus (embedded profile, NIMBUS_SIM_SPEEDUP=1000) on a
 * fresh data dir:
 * - seeded: bench/seed-instances.mjs writes --count instances into the bootstrap account (public
 *   addresses counting up from 100.64.0.2 per region: at a million, 400,000 of us-east-1's pool), then
 *   `admin recount --all` fills the quota counters from them (timed: the repair cost at this size);
 *   monitoring is off on them, so the metrics collector's sampling of a fleet is not in the figures;
 * - the creating account is a second one (enterprise, limits raised): the seeded account's private /16
 *   in each region is already past full, which the API would refuse;
 * - the region's public pool is 100.64.0.0/10, so every create allocates among the seeded addresses;
 * - first create: one request on its own, which sets the region's address scope up from the rows in use
 *   (once per scope; timed apart);
 * - then a warm-up and the measured load: POST /v1/instances over --connections connections for
 *   --duration seconds (autocannon), every answer 202.
 *
 * Usage (from the repository root):
 *   node bench/create-at-scale.mjs [--count 1000000] [--duration 15] [--connections 10] [--no-build] [--no-write] [--keep]
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import {
  accountIdOf,
  admin,
  bootstrapAuth,
  cleanUpOnExit,
  cleanup,
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
  startNimbus,
  step,
  stopChild,
  summarize,
  tempDir,
  writeSection,
} from './lib.mjs';

const SCRIPT = 'bench/create-at-scale.mjs';
const ENV = {
  NIMBUS_SIM_SPEEDUP: '1000',
  NIMBUS_PUBLIC_IP_POOLS: 'us-east-1=100.64.0.0/10',
};
const CREATE_BODY = {
  name: 'scale',
  instance_type: 'compute-1x',
  region: 'us-east-1',
  image: 'ubuntu-24.04',
};
const QUOTAS = [
  ['instances', 10_000_000],
  ['vcpus', RAISED_LIMIT],
];

const { values } = parseArgs({
  options: {
    count: { type: 'string', default: '1000000' },
    duration: { type: 'string', default: '15' },
    connections: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '3' },
    'no-build': { type: 'boolean', default: false },
    'no-write': { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
  },
});
const COUNT = positiveInt(values.count, 'count');
const DURATION = positiveInt(values.duration, 'duration');
const CONNECTIONS = positiveInt(values.connections, 'connections');
const WARMUP = positiveInt(values.warmup, 'warmup');
cleanup.keep = values.keep;
cleanUpOnExit();

async function measure(autocannon, seeded) {
  const label = seeded ? `${fmt(COUNT)} instances` : 'empty';
  const dataDir = tempDir('nimbus-bench-scale-');
  const logFile = path.join(dataDir, 'nimbus.log');
  step(`store: ${label} (data dir ${dataDir})`);
  let nimbus = await startNimbus(dataDir, logFile, ENV);
  const seededAccount = await accountIdOf(nimbus.port, bootstrapAuth(dataDir));
  await stopChild(nimbus.child);

  let seedSeconds = null;
  let recountSeconds = null;
  if (seeded) {
    const { seedInstances } = await import(
      pathToFileURL(path.join(ROOT, 'bench', 'seed-instances.mjs')).href
    );
    // Monitoring off on the seeded fleet: sampling 700,000 running instances is the metrics collector's
    // cost (bench/metrics-*.mjs), not a create's.
    const seed = await seedInstances({
      dataDir,
      accountId: seededAccount,
      count: COUNT,
      log: step,
      monitoringShare: 0,
    });
    seedSeconds = seed.seconds;
    const started = performance.now();
    admin(dataDir, ['recount', '--all'], ENV);
    recountSeconds = (performance.now() - started) / 1000;
  }
  const creator = admin(
    dataDir,
    ['create-account', '--email', 'scale@example.com', '--plan', 'enterprise'],
    ENV,
  );
  raiseLimits(dataDir, creator.account_id, QUOTAS, ENV);
  nimbus = await startNimbus(dataDir, logFile, ENV);
  const auth = { authorization: `Bearer ${creator.api_key}` };

  const firstStarted = performance.now();
  const first = await request(nimbus.port, 'POST', '/v1/instances', auth, CREATE_BODY);
  const firstMs = performance.now() - firstStarted;
  if (first.status !== 202) throw new Error(`first create answered ${first.status}: ${first.body}`);

  const load = {
    url: `https://${HOST}:${nimbus.port}/v1/instances`,
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify(CREATE_BODY),
    connections: CONNECTIONS,
  };
  await runLoad(autocannon, `${label}: warm-up`, { ...load, duration: WARMUP }, null, 202);
  const measured = summarize(
    await runLoad(autocannon, `${label}: creates`, { ...load, duration: DURATION }, nimbus.child.pid, 202),
  );
  await stopChild(nimbus.child);
  removeDir(dataDir);
  return { label, seedSeconds, recountSeconds, firstMs, ...measured };
}

const { command, loadAverage, autocannon } = await prepareRun(SCRIPT, { build: !values['no-build'] });
const empty = await measure(autocannon, false);
const full = await measure(autocannon, true);
const ratio = full.p99 / empty.p99;

const row = (r) =>
  `| ${r.label} | ${r.rps.toFixed(0)} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ${r.firstMs.toFixed(0)} | ` +
  `${r.recountSeconds === null ? '–' : `${r.recountSeconds.toFixed(1)} s`} |`;
const lines = [
  '## Creates with 1,000,000 instances in the store (issue #18, item 3)',
  '',
  ...runHeader({ loadAverage, command, npmScript: 'bench:create-at-scale' }),
  'SQLite (WAL, synchronous=FULL), NIMBUS_SIM_SPEEDUP=1000, us-east-1 public pool 100.64.0.0/10. The',
  `seeded store holds ${fmt(COUNT)} instances of another account (about 40% of them in us-east-1,`,
  `holding addresses of that pool); a second account creates over ${CONNECTIONS} connections for`,
  `${DURATION} s after a ${WARMUP} s warm-up.`,
  '"First create" is one request on its own before the load: it sets the address scope up from the',
  'rows in use, once per scope. "Recount" is `admin recount --all` filling the quota counters from the',
  'seeded rows (what a repair costs at this size).',
  '',
  '| store holds | creates/s | p50 (ms) | p99 (ms) | first create (ms) | recount |',
  '|---|---|---|---|---|---|',
  row(empty),
  row(full),
  '',
  `p99 with ${fmt(COUNT)} instances is ${ratio.toFixed(2)}× the empty store's (target: within 2×): ` +
    (ratio <= 2 ? 'met.' : 'missed.'),
  'Before the address scopes and quota counters, a create read every address in use in its region and',
  "summed the account's instances by type: about 1 s per create with 400,000 instances in a region.",
];
process.stdout.write(`${lines.join('\n')}\n`);
if (!values['no-write']) writeSection(SCRIPT, lines);
process.exit(0);
