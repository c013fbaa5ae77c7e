/**
 * Benchmark of issue #13: attach + detach round trips per second through the API, on SQLite with every
 * state change durable (synchronous=FULL).
 *
 * Set-up: a built Nimbus (embedded profile, a fresh data dir, NIMBUS_SIM_SPEEDUP=1000, so the
 * simulator's 2 s attach and 2 s detach take 2 ms each and the figures are the control plane's own),
 * the bootstrap account with a raised rate limit and quotas, --pairs running instances and as many
 * available data volumes in one region.
 *
 * Load: one worker per pair, all at once, each repeating for --duration seconds:
 *   POST /v1/volumes/{id}/attach {instance_id} (202) → poll GET /v1/volumes/{id} until `in-use`
 *   → POST /v1/volumes/{id}/detach (202) → poll until `available`.
 * A round trip is the whole of that. Polls are spaced --poll-ms apart, so a round trip's time includes up
 * to one poll interval per wait; the server's own share is shown by its CPU time per round trip.
 * Checks (the run fails otherwise): every attach and detach answered 202, every volume ends `available`
 * and unattached, and the account's events hold exactly one volume.attached and one volume.detached per
 * round trip counted.
 *
 * Usage (from the repository root):
 *   node bench/volume-attach.mjs [--pairs 8] [--duration 20] [--poll-ms 5] [--no-write] [--no-build] [--keep]
 *   --no-build  run the dist/ that is there instead of building first.
 */
import https from 'node:https';
import { parseArgs } from 'node:util';
import {
  accountIdOf,
  bootstrapAuth,
  cleanUpOnExit,
  cleanup,
  cpuSeconds,
  fail,
  fmt,
  positiveInt,
  prepareRun,
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

const SCRIPT = 'bench/volume-attach.mjs';
const REGION = 'us-east-1';

const { values } = parseArgs({
  options: {
    pairs: { type: 'string', default: '8' },
    duration: { type: 'string', default: '20' },
    'poll-ms': { type: 'string', default: '5' },
    'no-write': { type: 'boolean', default: false },
    'no-build': { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
  },
});
const PAIRS = positiveInt(values.pairs, 'pairs');
const DURATION_S = positiveInt(values.duration, 'duration');
const POLL_MS = positiveInt(values['poll-ms'], 'poll-ms');
cleanup.keep = values.keep;
cleanUpOnExit();

// Keep-alive connections, as an SDK or the CLI would use: a round trip pays for its requests, not for
// a TLS handshake each.
const agent = new https.Agent({ keepAlive: true, maxSockets: 64 });

let requestsSent = 0;

async function api(port, auth, method, urlPath, body) {
  requestsSent += 1;
  const headers = body === undefined ? auth : { ...auth, 'content-type': 'application/json' };
  const res = await request(port, method, urlPath, headers, body, agent);
  return { status: res.status, body: res.body ? JSON.parse(res.body) : null };
}

async function waitForStatus(port, auth, urlPath, wanted) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const res = await api(port, auth, 'GET', urlPath);
    if (res.status !== 200) fail(`GET ${urlPath} answered ${res.status}: ${JSON.stringify(res.body)}`);
    if (res.body.data.status === wanted) return res.body.data;
    if (res.body.data.status === 'error') fail(`${urlPath} went into error`);
    if (Date.now() > deadline) fail(`${urlPath} did not reach ${wanted} within 60 s`);
    await sleep(POLL_MS);
  }
}

async function accepted(port, auth, method, urlPath, body) {
  const res = await api(port, auth, method, urlPath, body);
  if (res.status !== 202) fail(`${method} ${urlPath} answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body.data;
}

/** Events of one type the account holds, counted through the API (every page). */
async function countEvents(port, auth, type) {
  let total = 0;
  for (let page = 1; ; page++) {
    const res = await api(port, auth, 'GET', `/v1/events?type=${type}&limit=100&page=${page}`);
    if (res.status !== 200) fail(`GET /v1/events answered ${res.status}`);
    total += res.body.data.length;
    if (res.body.data.length < 100) return total;
  }
}

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

async function main() {
  const { command, loadAverage } = await prepareRun(SCRIPT, { build: !values['no-build'] });
  const dataDir = tempDir('nimbus-bench-attach-');
  const logFile = `${dataDir}/nimbus.log`;
  const env = { NIMBUS_SIM_SPEEDUP: '1000' };
  const first = await startNimbus(dataDir, logFile, env);
  const auth = bootstrapAuth(dataDir);
  raiseLimits(dataDir, await accountIdOf(first.port, auth), [
    ['instances', 1000],
    ['vcpus', 100_000],
    ['volumes', 1000],
  ]);
  // Restarted, so no key cached before the limits were raised is still served.
  await stopChild(first.child);
  const { child, port } = await startNimbus(dataDir, logFile, env);

  step(`making ${PAIRS} running instances and ${PAIRS} available volumes in ${REGION}`);
  const pairs = [];
  for (let i = 0; i < PAIRS; i++) {
    const instance = await accepted(port, auth, 'POST', '/v1/instances', {
      name: `bench-attach-${i}`,
      instance_type: 'compute-1x',
      region: REGION,
      image: 'ubuntu-24.04',
    });
    const volume = await accepted(port, auth, 'POST', '/v1/volumes', {
      name: `bench-vol-${i}`,
      size_gb: 10,
      region: REGION,
    });
    pairs.push({ instanceId: instance.id, volumeId: volume.id });
  }
  for (const { instanceId, volumeId } of pairs) {
    await waitForStatus(port, auth, `/v1/instances/${instanceId}`, 'running');
    await waitForStatus(port, auth, `/v1/volumes/${volumeId}`, 'available');
  }

  step(`${PAIRS} workers attaching and detaching for ${DURATION_S} s`);
  const roundTripsMs = [];
  const requestsBefore = requestsSent;
  const cpuBefore = cpuSeconds(child.pid);
  const started = performance.now();
  const stopAt = started + DURATION_S * 1000;
  await Promise.all(
    pairs.map(async ({ instanceId, volumeId }) => {
      const volumePath = `/v1/volumes/${volumeId}`;
      while (performance.now() < stopAt) {
        const begun = performance.now();
        await accepted(port, auth, 'POST', `${volumePath}/attach`, { instance_id: instanceId });
        const attached = await waitForStatus(port, auth, volumePath, 'in-use');
        if (attached.instance_id !== instanceId) fail(`${volumeId} in use by ${attached.instance_id}`);
        await accepted(port, auth, 'POST', `${volumePath}/detach`);
        await waitForStatus(port, auth, volumePath, 'available');
        roundTripsMs.push(performance.now() - begun);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const requestsPerRoundTrip = (requestsSent - requestsBefore) / roundTripsMs.length;
  const cpuAfter = cpuSeconds(child.pid);

  step('checking the volumes and the events');
  for (const { volumeId } of pairs) {
    const volume = await waitForStatus(port, auth, `/v1/volumes/${volumeId}`, 'available');
    if (volume.instance_id !== null) fail(`${volumeId} still names ${volume.instance_id}`);
  }
  const attachedEvents = await countEvents(port, auth, 'volume.attached');
  const detachedEvents = await countEvents(port, auth, 'volume.detached');
  if (attachedEvents !== roundTripsMs.length || detachedEvents !== roundTripsMs.length) {
    fail(
      `${roundTripsMs.length} round trips but ${attachedEvents} attached, ${detachedEvents} detached events`,
    );
  }
  await stopChild(child);

  const sorted = [...roundTripsMs].sort((a, b) => a - b);
  const cpu = cpuBefore === null || cpuAfter === null ? null : cpuAfter - cpuBefore;
  const figures = {
    roundTrips: sorted.length,
    perSecond: sorted.length / seconds,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    cpuShare: cpu === null ? null : cpu / seconds,
    cpuMsPerRoundTrip: cpu === null ? null : (cpu * 1000) / sorted.length,
  };
  const lines = [
    '## Volumes: attach + detach round trips per second (issue #13)',
    '',
    ...runHeader({
      loadAverage,
      command,
      npmScript: 'bench:volume-attach',
      generator: 'its own HTTPS client',
    }),
    `SQLite (WAL, synchronous=FULL), NIMBUS_SIM_SPEEDUP=1000 (the simulated attach and detach take 2 ms`,
    `each). ${PAIRS} pairs of a running instance and a data volume, one worker per pair, for ${DURATION_S} s:`,
    `attach (202), poll every ${POLL_MS} ms until \`in-use\`, detach (202), poll until \`available\`.`,
    '',
    '| round trips | per second | p50 (ms) | p99 (ms) | requests per round trip | server CPU | CPU per round trip |',
    '|---|---|---|---|---|---|---|',
    `| ${fmt(figures.roundTrips)} | ${figures.perSecond.toFixed(1)} | ${figures.p50.toFixed(1)} | ` +
      `${figures.p99.toFixed(1)} | ${requestsPerRoundTrip.toFixed(1)} | ${figures.cpuShare === null ? 'n/a' : `${Math.round(figures.cpuShare * 100)}% of a core`} | ` +
      `${figures.cpuMsPerRoundTrip === null ? 'n/a' : `${figures.cpuMsPerRoundTrip.toFixed(2)} ms`} |`,
    '',
    'A round trip is two requests answered 202, two durable jobs of the volume reconciler (each step a',
    'version-guarded write, the driver call, the event and its outbox rows in the same commit) and the',
    'polls (keep-alive connections); every one of its commits is an fsync on SQLite. Checked: every',
    'volume ends `available`, and the events hold exactly one `volume.attached` and one `volume.detached`',
    'per round trip. No target was set for this figure; it is the baseline for the write-path work of',
    'issue #18 (group commit), which shares its commits.',
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  if (!values['no-write']) writeSection(SCRIPT, lines);
}

await main();
process.exit(0);
