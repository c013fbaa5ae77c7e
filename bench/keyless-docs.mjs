/**
 * Benchmark of issue 29 item 1: what keyless clients fetching the API document do to another tenant.
 * Tenant B's authenticated `GET /v1/account` is measured alone, then while eight keyless keep-alive
 * connections from one address fetch `GET /v1/openapi.json` as fast as they are answered; on the build
 * before the change (`--base`, default ae49daf, the build the issue measured) and on this working tree,
 * in the same run.
 *
 * How it works: the base revision is checked out with `git worktree add` into a temporary directory and
 * built; this working tree is built too. Each build serves a fresh data dir made by its own first start
 * (the bootstrap account is tenant B, its rate limit raised so that B's own budget never answers 429).
 * Per build: a warm-up, then B alone (autocannon, `--connections` connections, `--duration` s), then B
 * again while the keyless load runs for the same time. The keyless load is eight keep-alive connections
 * on loopback, each sending the next request when the last answer ends, taking whatever status comes
 * (200 while the address has budget, 429 after it); the script counts them. With two CPUs, the server
 * runs on one and both loads on the other. Bounded: two builds, three loads each of `--duration` s
 * (default 10), loopback only. The figures go to stdout and to docs/benchmarks.md.
 *
 * Usage: node bench/keyless-docs.mjs [--base <revision>] [--duration S] [--connections N] [--no-write]
 *   [--keep]
 * Exits 1 when a check fails (a build, B answered other than 200, a socket error).
 */
import https from 'node:https';
import path from 'node:path';
import { parseArgs } from 'node:util';
import {
  accountIdOf,
  bootstrapAuth,
  canPin,
  checkOutAndBuild,
  cleanUpOnExit,
  cleanup,
  fail,
  fmt,
  HOST,
  LOAD_CPU,
  pinProcess,
  positiveInt,
  prepareRun,
  RAISED_LIMIT,
  ROOT,
  raiseLimits,
  request,
  runHeader,
  runLoad,
  SERVER_CPU,
  startNimbus,
  step,
  stopChild,
  summarize,
  tempDir,
  writeSection,
} from './lib.mjs';

const SCRIPT = 'bench/keyless-docs.mjs';
const KEYLESS_CONNECTIONS = 8;

async function main() {
  const { values } = parseArgs({
    options: {
      base: { type: 'string', default: 'ae49daf' },
      duration: { type: 'string', default: '10' },
      connections: { type: 'string', default: '1' },
      'no-write': { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
    },
  });
  const duration = positiveInt(values.duration, 'duration');
  const connections = positiveInt(values.connections, 'connections');
  cleanup.keep = values.keep;
  cleanUpOnExit();
  const pin = canPin();
  const { autocannon, command, loadAverage } = await prepareRun(SCRIPT);
  if (pin) pinProcess(process.pid, LOAD_CPU);

  const baseRoot = checkOutAndBuild(values.base);
  const results = [];
  for (const [name, root] of [
    [`before (${values.base})`, baseRoot],
    ['after (this tree)', ROOT],
  ]) {
    const dataDir = tempDir('nimbus-keyless-docs-data-');
    const log = path.join(dataDir, 'nimbus.log');
    step(`${name}: first start, to make tenant B and its key`);
    const first = await startNimbus(dataDir, log, {}, root);
    const auth = bootstrapAuth(dataDir);
    raiseLimits(dataDir, await accountIdOf(first.port, auth), [], {}, root);
    await stopChild(first.child);

    const server = await startNimbus(dataDir, log, {}, root);
    if (pin) pinProcess(server.child.pid, SERVER_CPU);
    const sample = await request(server.port, 'GET', '/v1/account', auth);
    if (sample.headers['x-ratelimit-limit'] !== String(RAISED_LIMIT))
      fail(`${name}: B's raised limit is not in effect`);
    const document = await request(server.port, 'GET', '/v1/openapi.json');
    if (document.status !== 200) fail(`${name}: GET /v1/openapi.json answered ${document.status}`);

    const tenantB = (seconds) => ({
      url: `https://${HOST}:${server.port}/v1/account`,
      headers: auth,
      connections,
      duration: seconds,
    });
    await runLoad(autocannon, `${name}: warm-up`, tenantB(3), null, 200);
    const alone = summarize(await runLoad(autocannon, `${name}: B alone`, tenantB(duration), null, 200));
    const keyless = keylessLoad(server.port, duration);
    const loaded = summarize(
      await runLoad(
        autocannon,
        `${name}: B with ${KEYLESS_CONNECTIONS} keyless connections`,
        tenantB(duration),
        null,
        200,
      ),
    );
    const attack = await keyless;
    await stopChild(server.child);
    results.push({ name, bytes: Buffer.byteLength(document.body), alone, loaded, attack });
  }
  report(results, { command, loadAverage, duration, connections, pinned: pin, write: !values['no-write'] });
}

/**
 * KEYLESS_CONNECTIONS keep-alive connections from one address, each asking for the document again as soon
 * as the last answer has been read, for `seconds`; resolves with the count of answers per status and the
 * bytes received.
 */
async function keylessLoad(port, seconds) {
  const agent = new https.Agent({
    keepAlive: true,
    maxSockets: KEYLESS_CONNECTIONS,
    rejectUnauthorized: false,
  });
  const statuses = new Map();
  let bytes = 0;
  const endsAt = Date.now() + seconds * 1000;
  const one = () =>
    new Promise((resolve, reject) => {
      const req = https.request({ host: HOST, port, path: '/v1/openapi.json', agent }, (res) => {
        res.on('data', (chunk) => {
          bytes += chunk.length;
        });
        res.on('end', () => {
          statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
          resolve();
        });
      });
      req.once('error', reject);
      req.end();
    });
  const loop = async () => {
    while (Date.now() < endsAt) await one();
  };
  await Promise.all(Array.from({ length: KEYLESS_CONNECTIONS }, loop));
  agent.destroy();
  return { statuses: Object.fromEntries([...statuses].sort(([a], [b]) => a - b)), bytes };
}

function report(results, { command, loadAverage, duration, connections, pinned, write }) {
  const ms = (value) => `${value.toFixed(2)} ms`;
  const rows = results.map(({ name, alone, loaded, attack }) => {
    const answers = Object.entries(attack.statuses)
      .map(([status, count]) => `${fmt(count)} × ${status}`)
      .join(', ');
    return (
      `| ${name} | ${ms(alone.p50)} | ${ms(alone.p99)} | ${fmt(alone.rps)}/s | ${ms(loaded.p50)} | ${ms(loaded.p99)} | ` +
      `${fmt(loaded.rps)}/s | ${answers} (${fmt(attack.bytes / 1e6)} MB) |`
    );
  });
  const lines = [
    '## Keyless clients fetching the API document (issue 29 item 1)',
    '',
    ...runHeader({ loadAverage, command, npmScript: 'bench:keyless-docs' }),
    `Tenant B: authenticated \`GET /v1/account\`, ${connections} connection${connections === 1 ? '' : 's'}, ` +
      `${duration} s alone, then ${duration} s while ${KEYLESS_CONNECTIONS} keyless keep-alive connections from ` +
      `one address fetch \`GET /v1/openapi.json\` (${fmt(results[0].bytes / 1e3)} kB uncompressed) back to back. ` +
      `Server ${pinned ? 'pinned to CPU 0, loads to CPU 1' : 'not pinned (taskset unavailable)'}; ` +
      'latencies are exact percentiles of every answer.',
    '',
    '| build | B alone p50 | p99 | rate | B with keyless load p50 | p99 | rate | keyless answers |',
    '|---|---|---|---|---|---|---|---|',
    ...rows,
    '',
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  if (write) writeSection(SCRIPT, lines);
}

await main();
// Cleanup (servers, worktree, data dirs) runs on exit.
process.exit(0);
