/**
 * The fuzz test at scale: 100,000 requests made from openapi/v1.json by bench/fuzz-requests.mjs (the
 * generator test/fuzz.test.ts uses, hostile values included) against a freshly built and started Nimbus,
 * over keep-alive HTTPS with a few requests in flight. It counts the answers by status and reports every
 * 5xx, every failure outside the error envelope and every request the server did not answer properly
 * (a reset connection, a response the HTTP parser refuses), with the request that caused it.
 *
 * The account is the bootstrap one with its rate limit raised; the server gets the GPU capacity and
 * public address pools the fuzz test gives it, so valid creates never meet a legitimate 503.
 *
 * Usage (from the repository root):
 *   node bench/fuzz.mjs [--requests N] [--concurrency N] [--seed N] [--pg-url URL] [--no-write] [--keep]
 *   --pg-url   run on PostgreSQL: a fresh database is created on that server and dropped at the end
 *   --no-write print only; --keep leave the temporary data dir
 * Writes its section of docs/benchmarks.md; exits 1 when any answer was a problem.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { parseArgs } from 'node:util';
import fc from 'fast-check';
import pg from 'pg';
import { createExample, describeRequest, fuzzRequests, problemWith } from './fuzz-requests.mjs';
import {
  accountIdOf,
  atCleanUp,
  bootstrapAuth,
  cleanUpOnExit,
  cleanup,
  fail,
  fmt,
  HOST,
  positiveInt,
  prepareRun,
  ROOT,
  raiseLimits,
  request,
  runHeader,
  startNimbus,
  step,
  stopChild,
  tempDir,
  writeSection,
} from './lib.mjs';

const SCRIPT = 'bench/fuzz.mjs';
const BATCH = 1_000;
const EXAMPLES_KEPT = 10;
const SERVER_ENV = {
  NIMBUS_SIM_SPEEDUP: '1000',
  NIMBUS_GPU_CAPACITY: 'us-east-1=100000,us-west-2=100000',
  NIMBUS_PUBLIC_IP_POOLS:
    'us-east-1=100.64.0.0/16,us-west-2=100.65.0.0/16,eu-central-1=100.66.0.0/16,ap-northeast-1=100.67.0.0/16',
};

const { values: args } = parseArgs({
  options: {
    requests: { type: 'string', default: '100000' },
    concurrency: { type: 'string', default: '8' },
    seed: { type: 'string', default: '20' },
    'pg-url': { type: 'string' },
    'no-write': { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
  },
});
const total = positiveInt(args.requests, 'requests');
const concurrency = positiveInt(args.concurrency, 'concurrency');
const seed = positiveInt(args.seed, 'seed');
cleanup.keep = args.keep;
cleanUpOnExit();

/** A fresh database on the server of `adminUrl`, dropped at exit. */
async function freshDatabase(adminUrl) {
  const name = `nimbus_fuzz_${process.pid}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  atCleanUp(() => {
    // Exit handlers cannot wait: a child process drops it.
    const url = new URL(adminUrl);
    const drop = `drop database if exists ${name} with (force)`;
    const script = `const pg=require('pg');const c=new pg.Client(${JSON.stringify(url.toString())});c.connect().then(()=>c.query(${JSON.stringify(drop)})).finally(()=>c.end())`;
    spawnSync(process.execPath, ['-e', script], { cwd: ROOT, stdio: 'ignore' });
  });
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/** One request on the shared keep-alive agent; resolves with the status and text, or the transport error. */
function send(agent, port, fuzzed) {
  return new Promise((resolve) => {
    const headers = { ...fuzzed.headers };
    if (fuzzed.body !== undefined) headers['content-length'] = String(Buffer.byteLength(fuzzed.body));
    const req = https.request(
      { host: HOST, port, method: fuzzed.method, path: fuzzed.path, headers, agent, servername: 'localhost' },
      (res) => {
        const chunks = [];
        res.on('data', (chunk) => chunks.push(chunk));
        res.on('end', () =>
          resolve({ status: res.statusCode, text: Buffer.concat(chunks).toString('utf8') }),
        );
        res.on('error', (error) => resolve({ error }));
      },
    );
    req.on('error', (error) => resolve({ error }));
    req.end(fuzzed.body);
  });
}

async function seedIds(port, auth, document) {
  const example = (name) => createExample(document, name);
  const ids = [];
  for (const create of ['/v1/ssh-keys', '/v1/instances', '/v1/account/api-keys']) {
    const created = await request(port, 'POST', create, auth, example(create));
    if (created.status >= 300) fail(`POST ${create} answered ${created.status}: ${created.body}`);
    ids.push(JSON.parse(created.body).data.id);
  }
  const events = await request(port, 'GET', '/v1/events', auth);
  ids.push(JSON.parse(events.body).data[0].id);
  return ids;
}

async function main() {
  const { command, loadAverage } = await prepareRun(SCRIPT);
  const document = JSON.parse(readFileSync(path.join(ROOT, 'openapi', 'v1.json'), 'utf8'));
  const dataDir = tempDir('nimbus-fuzz-');
  const env = { ...SERVER_ENV };
  if (args['pg-url']) {
    env.NIMBUS_DATABASE_URL = await freshDatabase(args['pg-url']);
    // PostgreSQL requires a configured master key.
    env.NIMBUS_SECRET_KEY = randomBytes(32).toString('base64');
  }
  const store = args['pg-url'] ? 'PostgreSQL' : 'SQLite';
  step(`starting Nimbus on ${store}`);
  const { child, port } = await startNimbus(dataDir, path.join(dataDir, 'server.log'), env);
  const auth = bootstrapAuth(dataDir);
  raiseLimits(dataDir, await accountIdOf(port, auth), [], env);
  const key = auth.authorization.slice('Bearer '.length);
  const ids = await seedIds(port, auth, document);
  const arbitrary = fuzzRequests(document, { key, ids });

  const agent = new https.Agent({ keepAlive: true, maxSockets: concurrency, rejectUnauthorized: false });
  const statuses = new Map();
  const problems = [];
  let problemCount = 0;
  let transportErrors = 0;
  let sent = 0;
  const began = performance.now();
  step(`sending ${fmt(total)} requests, ${concurrency} in flight, seed ${seed}`);
  for (let batch = 0; sent < total; batch += 1) {
    const requests = fc.sample(arbitrary, { numRuns: Math.min(BATCH, total - sent), seed: seed + batch });
    let next = 0;
    const worker = async () => {
      for (let index = next++; index < requests.length; index = next++) {
        const fuzzed = requests[index];
        const answer = await send(agent, port, fuzzed);
        const problem = answer.error
          ? `got no proper answer: ${answer.error.code ?? answer.error.message}`
          : problemWith(fuzzed, answer.status, answer.text);
        if (answer.error) transportErrors += 1;
        else statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
        if (problem) {
          problemCount += 1;
          if (problems.length < EXAMPLES_KEPT) {
            problems.push(
              `${describeRequest(fuzzed)} ${problem}${answer.text ? `: ${answer.text.slice(0, 200)}` : ''}`,
            );
          }
        }
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    sent += requests.length;
    if (batch % 10 === 9) step(`${fmt(sent)} sent, ${problemCount} problem(s)`);
  }
  const seconds = (performance.now() - began) / 1000;
  agent.destroy();
  await stopChild(child);

  const serverErrors = [...statuses].filter(([status]) => status >= 500).reduce((sum, [, n]) => sum + n, 0);
  const lines = [
    `## Fuzzing from the OpenAPI document (${SCRIPT}, ${store})`,
    '',
    ...runHeader({ loadAverage, command, npmScript: 'bench:fuzz', generator: `fast-check ${fc.__version}` }),
    `${fmt(sent)} requests made from \`openapi/v1.json\` by \`bench/fuzz-requests.mjs\` (seed ${seed}, ` +
      `batches of ${fmt(BATCH)}) against \`bin/nimbus serve\` on ${store}, ${concurrency} in flight over ` +
      `keep-alive HTTPS, in ${seconds.toFixed(0)} s (${fmt(sent / seconds)} requests/s). ` +
      `5xx answers: ${fmt(serverErrors)}. Answers that were a problem (a 5xx, a failure outside the error ` +
      `envelope, or no proper HTTP answer): ${fmt(problemCount)}, of which ${fmt(transportErrors)} without one.`,
    '',
    '| status | answers |',
    '|---|---:|',
    ...[...statuses].sort(([a], [b]) => a - b).map(([status, n]) => `| ${status} | ${fmt(n)} |`),
    ...(transportErrors > 0 ? [`| no answer | ${fmt(transportErrors)} |`] : []),
    '',
    ...(problems.length > 0
      ? [
          `The first ${problems.length}:`,
          '',
          ...problems.map((problem) => `- \`${problem.replaceAll('`', "'")}\``),
          '',
        ]
      : []),
  ];
  console.log(lines.join('\n'));
  if (!args['no-write']) writeSection(`${SCRIPT}${args['pg-url'] ? ' (PostgreSQL)' : ''}`, lines);
  return problemCount === 0 ? 0 : 1;
}

main().then(
  (status) => process.exit(status),
  (error) => fail(error instanceof Error ? (error.stack ?? error.message) : String(error)),
);
