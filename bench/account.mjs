/**
 * Benchmark of issue #2: an authenticated, rate-limited, logged `GET /v1/account` against the ceiling,
 * a bare `node:https` server answering a fixed small JSON body, in one run with one load generator.
 *
 * How it works: the script builds Nimbus, starts it once on a fresh data dir (which creates the
 * bootstrap account, its key and the self-signed certificate), raises that account's rate limit with
 * `admin set-rate-limit`, and stops it. Then, one after the other and each in its own child process
 * (so the server has a core to itself while autocannon runs here), it measures the bare server (using
 * Nimbus' certificate, so both pay for the same TLS) and the restarted Nimbus (restarted so the raised
 * limit is in effect however long keys stay cached). Both get the same connections, warm-up and
 * duration over keep-alive TLS on 127.0.0.1. Any non-2xx answer, socket error or timeout fails the run.
 * Nimbus logs at info to a file, and the run checks that every measured request left an access-log line
 * and spent rate-limit budget, so neither can be switched off unnoticed. The figures go to stdout and to
 * docs/benchmarks.md.
 *
 * Usage: node bench/account.mjs [--connections N] [--duration S] [--warmup S] [--no-write] [--keep]
 *   --no-write  print the figures only; --keep  leave the temporary data dir (and Nimbus' log) in place
 * Exits 1 when a check fails (non-2xx, errors, logging or rate limiting missing from the path, a revoked
 * key accepted), 0 otherwise: the verdict on the target is reported, not enforced, since it depends on
 * what else the machine is running.
 */
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { createReadStream, readFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  accountIdOf,
  bootstrapAuth,
  cleanUp,
  cleanUpOnExit,
  cleanup,
  cpuText,
  fail,
  fmt,
  HOST,
  positiveInt,
  prepareRun,
  RAISED_LIMIT,
  raiseLimits,
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

const SCRIPT = 'bench/account.mjs';
const TARGET_RATIO = 0.6;
const BARE_BODY = JSON.stringify({ success: true, data: { id: 'acct_bench', name: 'bench' } });
const SELF = fileURLToPath(import.meta.url);

// ---------------------------------------------------------------------------------------------------
// Parent mode: the benchmark.
// ---------------------------------------------------------------------------------------------------
async function main() {
  const { values } = parseArgs({
    options: {
      connections: { type: 'string', default: '10' },
      duration: { type: 'string', default: '20' },
      warmup: { type: 'string', default: '5' },
      'no-write': { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
    },
  });
  const settings = {
    connections: positiveInt(values.connections, 'connections'),
    duration: positiveInt(values.duration, 'duration'),
    warmup: positiveInt(values.warmup, 'warmup'),
  };
  // fail() exits at once; whatever was started or written still goes away.
  cleanUpOnExit();
  cleanup.keep = values.keep;
  const { command, loadAverage, autocannon } = await prepareRun(SCRIPT);
  const dataDir = tempDir('nimbus-bench-');
  const logFile = path.join(dataDir, 'nimbus.log');

  try {
    // 1. First start: bootstrap account, key and certificate; raise the account's limit.
    step(`first start of Nimbus (data dir ${dataDir})`);
    let nimbus = await startNimbus(dataDir, logFile);
    const auth = bootstrapAuth(dataDir);
    const accountId = await accountIdOf(nimbus.port, auth);
    raiseLimits(dataDir, accountId);
    await stopChild(nimbus.child);

    // 2. The ceiling: a bare node:https server with the same certificate.
    step('bare node:https server');
    const bare = await startBare(dataDir);
    const bareUrl = `https://${HOST}:${bare.port}/`;
    await runLoad(
      autocannon,
      'bare warm-up',
      { url: bareUrl, ...settings, duration: settings.warmup },
      null,
      200,
    );
    const bareResult = await runLoad(autocannon, 'bare', { url: bareUrl, ...settings }, bare.child.pid, 200);
    await stopChild(bare.child);

    // 3. Nimbus, restarted so that no key cached before the limit was raised is still served.
    step('Nimbus: authenticated GET /v1/account');
    nimbus = await startNimbus(dataDir, logFile);
    const check = await request(nimbus.port, 'GET', '/v1/account', auth);
    if (check.status !== 200) fail(`GET /v1/account answered ${check.status}: ${check.body}`);
    if (check.headers['x-ratelimit-limit'] !== String(RAISED_LIMIT)) {
      fail(
        `the raised rate limit is not in effect (X-RateLimit-Limit: ${check.headers['x-ratelimit-limit']})`,
      );
    }
    const nimbusUrl = `https://${HOST}:${nimbus.port}/v1/account`;
    const nimbusLoad = { url: nimbusUrl, headers: auth, ...settings };
    await runLoad(autocannon, 'Nimbus warm-up', { ...nimbusLoad, duration: settings.warmup }, null, 200);
    const before = await rateLimitStatus(nimbus.port, auth);
    const nimbusResult = await runLoad(autocannon, 'Nimbus', nimbusLoad, nimbus.child.pid, 200);
    const after = await rateLimitStatus(nimbus.port, auth);
    const revocation = await revokedKeyIsRefused(nimbus.port, auth);
    await stopChild(nimbus.child);

    // 4. What was on the path really ran: rate-limit budget spent, one access-log line per request.
    if (after.reset === before.reset) {
      // GET /v1/account/rate-limit peeks without consuming, so the difference is exactly the load.
      const spent = before.remaining - after.remaining;
      if (spent < nimbusResult.requests.total) {
        fail(`only ${spent} requests spent rate-limit budget, ${nimbusResult.requests.total} were answered`);
      }
    }
    const logged = await countAccessLogLines(logFile, accountId);
    const expectedLines = nimbusResult.requests.total;
    if (logged < expectedLines) fail(`${logged} access-log lines for ${expectedLines} measured requests`);
    if (!revocation.refused) fail(`a deleted key was still accepted (status ${revocation.status})`);

    const figures = {
      bare: summarize(bareResult),
      nimbus: summarize(nimbusResult),
    };
    const ratio = figures.nimbus.rps / figures.bare.rps;
    const verdict = ratio >= TARGET_RATIO ? 'met' : 'NOT met';
    const notes = caveats(figures);
    process.stdout.write(
      [
        '',
        line('bare node:https', figures.bare),
        line('Nimbus GET /v1/account', figures.nimbus),
        `ratio ${ratio.toFixed(3)} (target ≥ ${TARGET_RATIO}: ${verdict})`,
        `checks: ${logged} access-log lines, revoked key answered ${revocation.status}`,
        ...notes,
        '',
      ].join('\n'),
    );
    if (!values['no-write']) {
      writeResults({ command, settings, figures, ratio, verdict, logged, revocation, loadAverage, notes });
    }
    // A report, not a gate: the exit code says whether the run was sound (every answer 2xx, logging and
    // rate limiting on the path), and the verdict on the target is printed and written above.
  } finally {
    cleanUp();
  }
}

function line(name, f) {
  const cpu = f.cpuShare === null ? '' : `  server CPU ${cpuText(f, 1)}`;
  return `${name.padEnd(24)} ${fmt(f.rps).padStart(7)} req/s  p50 ${f.p50} ms  p99 ${f.p99} ms${cpu}`;
}

async function startBare(dataDir) {
  const tls = path.join(dataDir, 'tls');
  const child = fork(SELF, ['--bare-server', path.join(tls, 'cert.pem'), path.join(tls, 'key.pem')], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  cleanup.children.add(child);
  const [message] = await once(child, 'message');
  return { child, port: message.port };
}

async function rateLimitStatus(port, auth) {
  const res = await request(port, 'GET', '/v1/account/rate-limit', auth);
  if (res.status !== 200) fail(`GET /v1/account/rate-limit answered ${res.status}: ${res.body}`);
  return JSON.parse(res.body).data;
}

/** A key used (so cached), then deleted, must be refused by the very next request on the same server. */
async function revokedKeyIsRefused(port, auth) {
  const created = await request(port, 'POST', '/v1/account/api-keys', auth, {
    name: 'bench-revocation',
    permissions: ['account:read'],
  });
  if (created.status !== 201 && created.status !== 200) {
    fail(`POST /v1/account/api-keys answered ${created.status}: ${created.body}`);
  }
  const key = JSON.parse(created.body).data;
  const asKey = { authorization: `Bearer ${key.key}` };
  const used = await request(port, 'GET', '/v1/account', asKey);
  if (used.status !== 200) fail(`the new key was refused before it was deleted (${used.status})`);
  const deleted = await request(port, 'DELETE', `/v1/account/api-keys/${key.id}`, auth);
  if (deleted.status !== 200) fail(`DELETE /v1/account/api-keys answered ${deleted.status}: ${deleted.body}`);
  const after = await request(port, 'GET', '/v1/account', asKey);
  return { refused: after.status === 401, status: after.status };
}

/** What a reader needs to weigh the ratio: the CPU cost per request, and whether the ceiling was real. */
function caveats({ bare, nimbus }) {
  if (bare.cpuUsPerRequest === null || nimbus.cpuUsPerRequest === null) return [];
  const notes = [
    `CPU per request: bare ${bare.cpuUsPerRequest.toFixed(1)} µs, Nimbus ${nimbus.cpuUsPerRequest.toFixed(1)} µs ` +
      `(cost ratio ${(bare.cpuUsPerRequest / nimbus.cpuUsPerRequest).toFixed(3)}).`,
  ];
  if (bare.cpuShare < 0.85) {
    notes.push(
      `The bare server used only ${Math.round(bare.cpuShare * 100)}% of a core: the load generator or other ` +
        'work on the machine held it back, so the throughput ratio flatters Nimbus; the CPU cost ratio does not.',
    );
  }
  return notes;
}

async function countAccessLogLines(logFile, accountId) {
  let count = 0;
  const lines = createInterface({ input: createReadStream(logFile), crlfDelay: Number.POSITIVE_INFINITY });
  for await (const line of lines) {
    // Cheap pre-filter, then a real parse: the line must be one JSON object at level info.
    if (!line.includes('"route":"/v1/account"')) continue;
    const entry = JSON.parse(line);
    if (
      entry.level === 30 &&
      entry.msg === 'request' &&
      entry.account === accountId &&
      entry.status === 200
    ) {
      count += 1;
    }
  }
  return count;
}

function writeResults({
  command,
  settings,
  figures,
  ratio,
  verdict,
  logged,
  revocation,
  loadAverage,
  notes,
}) {
  const row = (name, f) =>
    `| ${name} | ${fmt(f.rps)} | ${f.p50} | ${f.p99} | ${f.requests} | ${cpuText(f, 1)} |`;
  writeSection(SCRIPT, [
    '## Authenticated `GET /v1/account` against bare `node:https` (issue #2)',
    '',
    ...runHeader({ loadAverage, command, npmScript: 'bench' }),
    `Load: autocannon in the benchmark process, ${settings.connections} keep-alive TLS connections to ` +
      `127.0.0.1, ${settings.warmup} s warm-up then ${settings.duration} s measured, per server, one ` +
      'server at a time, each in its own process. The bare server answers a fixed small JSON body with ' +
      "Nimbus' own certificate. Nimbus runs the embedded profile (SQLite) with `NIMBUS_LOG_LEVEL=info`, " +
      'logging to a file; the request carries the bootstrap key, is authenticated (key cache at its ' +
      'default 5 s), rate-limited (limit raised to 100000000/h with `admin set-rate-limit`), checked ' +
      'for the `account:read` permission, answers with the account snapshot cached with the verified key (dropped on any change to the account), and writes an access-log ' +
      'line and two Prometheus series.',
    '',
    '| server | req/s | p50 (ms) | p99 (ms) | requests | server CPU while measured |',
    '|---|---:|---:|---:|---:|---:|',
    row('bare `node:https`, fixed JSON', figures.bare),
    row('Nimbus `GET /v1/account`', figures.nimbus),
    '',
    `**Ratio: ${ratio.toFixed(3)}** — target: the authenticated, rate-limited, logged request reaches at ` +
      `least **${TARGET_RATIO}×** the bare server's throughput: **${verdict}**.`,
    '',
    ...notes.flatMap((note) => [note, '']),
    `Checks made by the same run: every answer was 2xx (the run fails otherwise); ${logged} access-log ` +
      'lines at info for the measured account (at least one per measured request); the rate-limit budget ' +
      'went down by at least the number of measured requests; a key that had just been used (so was ' +
      `cached) and was then deleted was answered ${revocation.status} on its next request.`,
  ]);
}

// ---------------------------------------------------------------------------------------------------
// Entry point. Child mode is the bare server: started by the parent with fork(), it reports its port over
// IPC. (Last in the file, so that everything above is initialised before main() runs.)
// ---------------------------------------------------------------------------------------------------
if (process.argv[2] === '--bare-server') {
  const [certFile, keyFile] = process.argv.slice(3);
  const body = Buffer.from(BARE_BODY);
  const server = https.createServer(
    { cert: readFileSync(certFile), key: readFileSync(keyFile) },
    (_req, res) => {
      res.writeHead(200, {
        'Content-Type': 'application/json; charset=utf-8',
        'Content-Length': body.length,
      });
      res.end(body);
    },
  );
  server.listen(0, HOST, () => process.send?.({ port: server.address().port }));
  process.on('SIGTERM', () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
} else {
  await main();
}
