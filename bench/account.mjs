/**
 * Benchmark of issue #2: an authenticated, rate-limited, logged `GET /v1/account` against the ceiling,
 * a bare `node:https` server answering a fixed small JSON body, in one run with one load generator.
 *
 * How it works: the script builds Nimbus, starts it once on a fresh data dir (which creates the
 * bootstrap account, its key and the self-signed certificate), raises that account's rate limit with
 * `admin set-rate-limit`, and restarts it (so the raised limit is in effect however long keys stay
 * cached). It starts two bare servers, each in its own process and with Nimbus' certificate so that all
 * pay for the same TLS: one answering a fixed small JSON body (the ceiling), one sending byte for byte
 * the response Nimbus gave (what the answer itself costs). After a warm-up of each, it measures them in
 * rounds, each server in turn with the same connections and duration over keep-alive TLS on 127.0.0.1,
 * and reports the median round: this machine is shared, and noise from elsewhere then falls on a round
 * rather than on one server. With two CPUs, the servers run on one and the load generator on the other.
 * Any non-2xx answer, socket error or timeout fails the run. Nimbus logs at
 * info to a file, and the run checks that every measured request left an access-log line and spent
 * rate-limit budget, so neither can be switched off unnoticed. The figures go to stdout and to
 * docs/benchmarks.md.
 *
 * Usage: node bench/account.mjs [--connections N] [--duration S] [--warmup S] [--rounds N]
 *   [--generator wrk|autocannon] [--no-write] [--keep]
 *   --generator  autocannon (the default) or wrk (must be installed); docs/benchmarks.md compares them
 *   --no-write   print the figures only; --keep  leave the temporary data dir (and Nimbus' log)
 * Exits 1 when a check fails (non-2xx, errors, logging or rate limiting missing from the path, a revoked
 * key accepted), 0 otherwise: the verdict on the target is reported, not enforced, since it depends on
 * what else the machine is running.
 */
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { createReadStream, readFileSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  accountIdOf,
  autocannonVersion,
  bootstrapAuth,
  canPin,
  cleanUp,
  cleanUpOnExit,
  cleanup,
  cpuText,
  cpuTimes,
  fail,
  fmt,
  HOST,
  LOAD_CPU,
  pinProcess,
  positiveInt,
  prepareRun,
  RAISED_LIMIT,
  raiseLimits,
  request,
  runHeader,
  runLoad,
  SERVER_CPU,
  startNimbus,
  step,
  stolenShares,
  stolenText,
  stopChild,
  summarize,
  tempDir,
  writeSection,
} from './lib.mjs';
import { runWrk, wrkVersion } from './wrk.mjs';

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
      duration: { type: 'string', default: '10' },
      warmup: { type: 'string', default: '10' },
      rounds: { type: 'string', default: '3' },
      generator: { type: 'string', default: 'autocannon' },
      'no-write': { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
    },
  });
  const settings = {
    connections: positiveInt(values.connections, 'connections'),
    duration: positiveInt(values.duration, 'duration'),
    warmup: positiveInt(values.warmup, 'warmup'),
  };
  const rounds = positiveInt(values.rounds, 'rounds');
  // fail() exits at once; whatever was started or written still goes away.
  cleanUpOnExit();
  cleanup.keep = values.keep;
  if (!['wrk', 'autocannon'].includes(values.generator)) fail('--generator must be wrk or autocannon');
  const useWrk = values.generator === 'wrk';
  const pin = canPin();
  const { command, loadAverage, autocannon } = await prepareRun(SCRIPT);
  const generator = useWrk ? wrkVersion() : autocannonVersion();
  // autocannon runs in this process, so with pinning this process takes the load CPU.
  if (pin && !useWrk) pinProcess(process.pid, LOAD_CPU);
  const measure = async (label, load, serverPid) =>
    useWrk
      ? runWrk(label, load, serverPid, pin)
      : summarize(await runLoad(autocannon, label, load, serverPid, 200));
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

    // 2. Nimbus, restarted so that no key cached before the limit was raised is still served.
    step('Nimbus: authenticated GET /v1/account');
    nimbus = await startNimbus(dataDir, logFile);
    const sample = await request(nimbus.port, 'GET', '/v1/account', auth);
    if (sample.status !== 200) fail(`GET /v1/account answered ${sample.status}: ${sample.body}`);
    if (sample.headers['x-ratelimit-limit'] !== String(RAISED_LIMIT)) {
      fail(
        `the raised rate limit is not in effect (X-RateLimit-Limit: ${sample.headers['x-ratelimit-limit']})`,
      );
    }

    // 3. The ceiling, a bare node:https server with the same certificate; and the same server sending
    // the bytes Nimbus just sent, which is what Nimbus' answer costs by itself.
    step("bare node:https servers: fixed small JSON, and Nimbus' own response");
    const bare = await startBare(dataDir);
    const responseFile = path.join(dataDir, 'nimbus-response.json');
    const replayable = replayableResponse(sample);
    writeFileSync(responseFile, JSON.stringify(replayable));
    const replay = await startBare(dataDir, responseFile);
    const shapes = {
      bare: { headers: 2, bodyBytes: Buffer.byteLength(BARE_BODY) },
      nimbus: { headers: Object.keys(replayable.headers).length, bodyBytes: Buffer.byteLength(sample.body) },
    };

    const targets = {
      bare: { label: 'bare', child: bare.child, load: { url: `https://${HOST}:${bare.port}/` } },
      nimbus: {
        label: 'Nimbus',
        child: nimbus.child,
        load: { url: `https://${HOST}:${nimbus.port}/v1/account`, headers: auth },
      },
      replay: {
        label: 'bare, Nimbus response',
        child: replay.child,
        load: { url: `https://${HOST}:${replay.port}/` },
      },
    };
    if (pin) for (const { child } of Object.values(targets)) pinProcess(child.pid, SERVER_CPU);
    for (const { label, load } of Object.values(targets)) {
      await measure(`${label} warm-up`, { ...load, ...settings, duration: settings.warmup }, null);
    }

    // 4. Rounds: each server in turn, so that a stretch of noise from elsewhere on the machine falls on
    // one round rather than on one server; the ratio reported is the median round's.
    const before = await rateLimitStatus(nimbus.port, auth);
    const results = [];
    const cpuBefore = cpuTimes();
    for (let round = 1; round <= rounds; round += 1) {
      const measured = {};
      for (const [name, { label, child, load }] of Object.entries(targets)) {
        const roundLabel = `round ${round}/${rounds}: ${label}`;
        measured[name] = await measure(roundLabel, { ...load, ...settings }, child.pid);
      }
      results.push({ round, ...measured, ratio: measured.nimbus.rps / measured.bare.rps });
    }
    const stolen = stolenText(stolenShares(cpuBefore, cpuTimes()));
    const after = await rateLimitStatus(nimbus.port, auth);
    const revocation = await revokedKeyIsRefused(nimbus.port, auth);
    for (const { child } of Object.values(targets)) await stopChild(child);

    // 5. What was on the path really ran: rate-limit budget spent, one access-log line per request.
    const nimbusRequests = results.reduce((sum, r) => sum + r.nimbus.requests, 0);
    if (after.reset === before.reset) {
      // GET /v1/account/rate-limit peeks without consuming, so the difference is exactly the load.
      const spent = before.remaining - after.remaining;
      if (spent < nimbusRequests) {
        fail(`only ${spent} requests spent rate-limit budget, ${nimbusRequests} were answered`);
      }
    }
    const logged = await countAccessLogLines(logFile, accountId);
    if (logged < nimbusRequests) fail(`${logged} access-log lines for ${nimbusRequests} measured requests`);
    if (!revocation.refused) fail(`a deleted key was still accepted (status ${revocation.status})`);

    const median = medianRound(results);
    const ratio = median.ratio;
    const replayRatio = median.replay.rps / median.bare.rps;
    const verdict = ratio >= TARGET_RATIO ? 'met' : 'NOT met';
    const cpu = {
      bare: cpuPerRequest(results, 'bare'),
      nimbus: cpuPerRequest(results, 'nimbus'),
      replay: cpuPerRequest(results, 'replay'),
    };
    process.stdout.write(
      [
        '',
        ...results.map(
          (r) =>
            `round ${r.round}: bare ${fmt(r.bare.rps)}, Nimbus ${fmt(r.nimbus.rps)}, ` +
            `bare with Nimbus' response ${fmt(r.replay.rps)} req/s; ratio ${ratioText(r.ratio)}`,
        ),
        line('bare node:https', median.bare),
        line('Nimbus GET /v1/account', median.nimbus),
        line('bare, Nimbus response', median.replay),
        `ratio ${ratioText(ratio)} in the median round (target ≥ ${TARGET_RATIO}: ${verdict}); ` +
          `all rounds ${results.map((r) => ratioText(r.ratio)).join(', ')}`,
        `the bare server sending Nimbus' response reaches ${ratioText(replayRatio)}× its own figure`,
        `CPU per request over all rounds: bare ${cpuText2(cpu.bare)}, Nimbus ${cpuText2(cpu.nimbus)}, ` +
          `bare with Nimbus' response ${cpuText2(cpu.replay)}`,
        `CPU time taken by the hypervisor during the rounds: ${stolen}`,
        `checks: ${logged} access-log lines, revoked key answered ${revocation.status}`,
        '',
      ].join('\n'),
    );
    if (!values['no-write']) {
      const run = {
        command,
        loadAverage,
        generator,
        useWrk,
        pin,
        stolen,
        settings,
        rounds,
        results,
        median,
        cpu,
        ratio,
        replayRatio,
      };
      writeResults({ ...run, shapes, verdict, logged, revocation });
    }
    // A report, not a gate: the exit code says whether the run was sound (every answer 2xx, logging and
    // rate limiting on the path), and the verdict on the target is printed and written above.
  } finally {
    cleanUp();
  }
}

/** A ratio to three decimals, cut rather than rounded: 0.5996 is not shown as a met 0.600. */
function ratioText(ratio) {
  return (Math.floor(ratio * 1000) / 1000).toFixed(3);
}

/** The round whose ratio is the median (the lower middle one for an even number of rounds). */
function medianRound(results) {
  const sorted = [...results].sort((a, b) => a.ratio - b.ratio);
  return sorted[Math.floor((sorted.length - 1) / 2)];
}

/** Server CPU per request over all rounds, in µs, or null when it could not be read. */
function cpuPerRequest(results, name) {
  let cpuUs = 0;
  let requests = 0;
  for (const r of results) {
    if (r[name].cpuUsPerRequest === null) return null;
    cpuUs += r[name].cpuUsPerRequest * r[name].requests;
    requests += r[name].requests;
  }
  return cpuUs / requests;
}

const cpuText2 = (us) => (us === null ? 'n/a' : `${us.toFixed(1)} µs`);

function line(name, f) {
  const cpu = f.cpuShare === null ? '' : `  server CPU ${cpuText(f, 1)}`;
  return `${name.padEnd(24)} ${fmt(f.rps).padStart(7)} req/s  p50 ${f.p50} ms  p99 ${f.p99} ms${cpu}`;
}

/** The bare server; with `responseFile`, it sends that response (replayableResponse) instead of its own. */
async function startBare(dataDir, responseFile) {
  const tls = path.join(dataDir, 'tls');
  const args = ['--bare-server', path.join(tls, 'cert.pem'), path.join(tls, 'key.pem')];
  const child = fork(SELF, responseFile ? [...args, responseFile] : args, {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  cleanup.children.add(child);
  const [message] = await once(child, 'message');
  return { child, port: message.port };
}

/**
 * A response Nimbus sent, as the bare server can send it again: its headers except those node:https
 * writes itself on every response (Date, Connection, Keep-Alive) and its body.
 */
function replayableResponse(sample) {
  const ownHeaders = new Set(['date', 'connection', 'keep-alive', 'transfer-encoding']);
  const headers = Object.fromEntries(
    Object.entries(sample.headers).filter(([name]) => !ownHeaders.has(name)),
  );
  return { headers, body: sample.body };
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

/** The section of docs/benchmarks.md, from what main() measured and checked. */
function writeResults(run) {
  const { settings, rounds, results, median, cpu, ratio, replayRatio, shapes, verdict } = run;
  const row = (name, f, perRequest) =>
    `| ${name} | ${fmt(f.rps)} | ${f.p50} | ${f.p99} | ${cpuText2(perRequest)} |`;
  writeSection(SCRIPT, [
    '## Authenticated `GET /v1/account` against bare `node:https` (issue #2)',
    '',
    ...runHeader({
      loadAverage: run.loadAverage,
      command: run.command,
      npmScript: 'bench',
      generator: run.generator,
    }),
    `Load: ${run.generator}${run.useWrk ? ', one thread' : ' in the benchmark process'}, ` +
      `${settings.connections} keep-alive TLS connections to 127.0.0.1` +
      `${run.pin ? `, on CPU ${LOAD_CPU} while the server under test has CPU ${SERVER_CPU} (taskset)` : ', unpinned (no taskset or a single CPU)'}; ` +
      `each server warmed up for ${settings.warmup} s, then ${rounds} round${rounds === 1 ? '' : 's'} in which each ` +
      `server in turn is measured for ${settings.duration} s, each server in its own process. The bare ` +
      "server answers a fixed small JSON body with Nimbus' own certificate. Nimbus runs the embedded " +
      'profile (SQLite) with `NIMBUS_LOG_LEVEL=info`, logging to a file; the request carries the ' +
      'bootstrap key, is authenticated (key cache at its default 5 s), rate-limited (limit raised to ' +
      '100000000/h with `admin set-rate-limit`), checked for the `account:read` permission, answers with ' +
      'the account snapshot cached with the verified key (dropped on any change to the account), and ' +
      'writes an access-log line and two Prometheus series.',
    '',
    "| round | bare req/s | Nimbus req/s | ratio | bare sending Nimbus' response, req/s |",
    '|---:|---:|---:|---:|---:|',
    ...results.map(
      (r) =>
        `| ${r.round} | ${fmt(r.bare.rps)} | ${fmt(r.nimbus.rps)} | ${ratioText(r.ratio)} | ${fmt(r.replay.rps)} |`,
    ),
    '',
    `The median round (${median.round}):`,
    '',
    '| server | req/s | p50 (ms) | p99 (ms) | server CPU per request, all rounds |',
    '|---|---:|---:|---:|---:|',
    row('bare `node:https`, fixed JSON', median.bare, cpu.bare),
    row('Nimbus `GET /v1/account`', median.nimbus, cpu.nimbus),
    row("bare `node:https`, sending Nimbus' own response", median.replay, cpu.replay),
    '',
    `**Ratio: ${ratioText(ratio)}** in the median round (all rounds: ` +
      `${results.map((r) => ratioText(r.ratio)).join(', ')}) — target: the authenticated, rate-limited, ` +
      `logged request reaches at least **${TARGET_RATIO}×** the bare server's throughput: **${verdict}**.`,
    '',
    'The last row is the bare server again, sending byte for byte the headers and body Nimbus sent ' +
      `(${shapes.nimbus.headers} headers and a ${shapes.nimbus.bodyBytes}-byte body, where the fixed JSON ` +
      `has ${shapes.bare.headers} and ${shapes.bare.bodyBytes} bytes; node:https adds Date, Connection and ` +
      `Keep-Alive to both): it reaches ${ratioText(replayRatio)}× the bare figure, the share of the gap ` +
      'that is the response itself (headers the API requires, the response envelope) rather than work Nimbus ' +
      'does.',
    '',
    `Checks made by the same run: every answer was 2xx (the run fails otherwise); ${run.logged} access-log ` +
      'lines at info for the measured account (at least one per measured request); the rate-limit budget ' +
      'went down by at least the number of measured requests; a key that had just been used (so was ' +
      `cached) and was then deleted was answered ${run.revocation.status} on its next request.`,
    '',
    `Share of CPU time the hypervisor gave to other guests while the rounds ran (steal, /proc/stat): ` +
      `${run.stolen}.`,
  ]);
}

// ---------------------------------------------------------------------------------------------------
// Entry point. Child mode is the bare server: started by the parent with fork(), it reports its port over
// IPC. (Last in the file, so that everything above is initialised before main() runs.)
// ---------------------------------------------------------------------------------------------------
if (process.argv[2] === '--bare-server') {
  const [certFile, keyFile, responseFile] = process.argv.slice(3);
  const replayed = responseFile ? JSON.parse(readFileSync(responseFile, 'utf8')) : null;
  const body = Buffer.from(replayed ? replayed.body : BARE_BODY);
  const headers = replayed
    ? { ...replayed.headers, 'content-length': body.length }
    : { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': body.length };
  const server = https.createServer(
    { cert: readFileSync(certFile), key: readFileSync(keyFile) },
    (_req, res) => {
      res.writeHead(200, headers);
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
