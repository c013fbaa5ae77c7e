/**
 * The DNS server (issue 32 item 3, src/resources/dns): answered queries per second on one core of Nimbus.
 *
 *   node bench/dns.mjs [--instances 200] [--sources 250] [--rates 2000,5000,10000,15000,20000]
 *                      [--duration 10] [--no-build]
 *
 * The server is a child `bin/nimbus serve` of this checkout (built first unless --no-build) on a fresh
 * SQLite data dir, simulator at NIMBUS_SIM_SPEEDUP=1000, with NIMBUS_DNS_PORT set and every other
 * setting at its default; pinned to one CPU and the load to the other when the machine has two.
 * `--instances` instances are made through the API first.
 *
 * The load is this process (Node's dgram): the server drops what one source asks beyond 100 queries a
 * second, so one source, as dnsperf sends from, would measure that limit rather than the server. Each of
 * `--sources` UDP sockets is bound to its own loopback address (127.0.1.x) and sends at most 90 queries
 * a second, so the load is bounded by sources × 90; for each rate of `--rates` the sources together
 * offer that rate, evenly spaced, for `--duration` seconds. The questions cycle through A by id,
 * A by name, PTR and an NXDOMAIN name, all read from the store as any query is. Counted: answers
 * received (a query not answered within 1 s is lost), their latency, and the server's CPU time (/proc).
 */
import dgram from 'node:dgram';
import net from 'node:net';
import path from 'node:path';
import { parseArgs } from 'node:util';
import dnsPacket from 'dns-packet';
import {
  accountIdOf,
  bootstrapAuth,
  canPin,
  cleanUpOnExit,
  cpuSeconds,
  fail,
  fmt,
  LOAD_CPU,
  pinProcess,
  positiveInt,
  prepareRun,
  raiseLimits,
  request,
  runHeader,
  SERVER_CPU,
  sleep,
  startNimbus,
  step,
  stopChild,
  tempDir,
  writeSection,
} from './lib.mjs';

const { values: args } = parseArgs({
  options: {
    instances: { type: 'string', default: '200' },
    sources: { type: 'string', default: '250' },
    rates: { type: 'string', default: '2000,5000,10000,15000,20000' },
    duration: { type: 'string', default: '10' },
    'no-build': { type: 'boolean', default: false },
  },
});
const instanceCount = positiveInt(args.instances, 'instances');
const sourceCount = positiveInt(args.sources, 'sources');
const duration = positiveInt(args.duration, 'duration');
const rates = args.rates.split(',').map((rate) => positiveInt(rate, 'rates'));
const PER_SOURCE_CEILING = 90;
const DOMAIN = 'bench.example';
const LOST_AFTER_MS = 1000;

cleanUpOnExit();
const run = await prepareRun('bench/dns.mjs', { build: !args['no-build'] });
const dataDir = tempDir('nimbus-bench-dns-');
const dnsPort = await freeUdpAndTcpPort();
const { child, port } = await startNimbus(dataDir, path.join(dataDir, 'nimbus.log'), {
  NIMBUS_DNS_PORT: String(dnsPort),
  NIMBUS_PUBLIC_DOMAIN: DOMAIN,
  NIMBUS_SIM_SPEEDUP: '1000',
});
const pinned = canPin();
if (pinned) {
  pinProcess(child.pid, SERVER_CPU);
  pinProcess(process.pid, LOAD_CPU);
}

step(`creating ${instanceCount} instances`);
const auth = bootstrapAuth(dataDir);
raiseLimits(dataDir, await accountIdOf(port, auth), [['instances', instanceCount + 10]]);
const instances = [];
for (let i = 0; i < instanceCount; i++) {
  const res = await request(port, 'POST', '/v1/instances', auth, {
    name: `web-${i}`,
    instance_type: 'compute-1x',
    region: 'us-east-1',
    image: 'ubuntu-24.04',
  });
  if (res.status !== 202) fail(`POST /v1/instances answered ${res.status}: ${res.body}`);
  instances.push(JSON.parse(res.body).data);
}
const questions = instances.flatMap((instance, i) => [
  { name: instance.hostname, type: 'A' },
  { name: `web-${i}.us-east-1.${DOMAIN}`, type: 'A' },
  { name: `${instance.public_ip.split('.').reverse().join('.')}.in-addr.arpa`, type: 'PTR' },
  { name: `missing-${i}.us-east-1.${DOMAIN}`, type: 'A' },
]);

const sockets = [];
for (let i = 0; i < sourceCount; i++) {
  const socket = dgram.createSocket('udp4');
  await new Promise((resolve) => socket.bind(0, `127.0.1.${(i % 250) + 1}`, resolve));
  sockets.push(socket);
}

const results = [];
for (const rate of rates) {
  const perSource = rate / sourceCount;
  if (perSource > PER_SOURCE_CEILING) {
    step(`skipping ${rate}/s: ${sourceCount} sources would each send more than ${PER_SOURCE_CEILING}/s`);
    continue;
  }
  step(`offering ${rate} queries/s for ${duration} s`);
  const result = await offer(rate);
  results.push({ rate, ...result });
  step(
    `${fmt(result.answeredPerSecond)} answered/s, lost ${(result.lostShare * 100).toFixed(2)}%, ` +
      `p50 ${result.p50.toFixed(2)} ms, p99 ${result.p99.toFixed(2)} ms, server CPU ${Math.round(result.cpuShare * 100)}%`,
  );
  // Every source's bucket back to full before the next rate.
  await sleep(2500);
}
for (const socket of sockets) socket.close();
await stopChild(child);

const busiest = results.reduce((a, b) => (b.answeredPerSecond > a.answeredPerSecond ? b : a));
const best = results
  .filter((r) => r.lostShare < 0.01)
  .sort((a, b) => b.answeredPerSecond - a.answeredPerSecond)[0];
writeSection('bench/dns.mjs', [
  '## DNS server: queries per second on one core',
  '',
  ...runHeader({
    ...run,
    npmScript: 'bench:dns',
    generator: `Node dgram load (${sourceCount} sources, at most ${PER_SOURCE_CEILING} queries/s each)`,
    machineNote: pinned ? ' Server pinned to CPU 0, load to CPU 1.' : ' Not pinned: one CPU, or no taskset.',
  }),
  `${instanceCount} instances (SQLite); questions in turn: A by id, A by name, PTR, an NXDOMAIN name. ` +
    `Each rate offered for ${duration} s; a query not answered within ${LOST_AFTER_MS} ms counts as lost.`,
  '',
  '| offered/s | answered/s | lost | p50 ms | p99 ms | server CPU (one core) | CPU µs per answer |',
  '|---|---|---|---|---|---|---|',
  ...results.map(
    (r) =>
      `| ${fmt(r.rate)} | ${fmt(r.answeredPerSecond)} | ${(r.lostShare * 100).toFixed(2)}% | ${r.p50.toFixed(2)} | ` +
      `${r.p99.toFixed(2)} | ${Math.round(r.cpuShare * 100)}% | ${fmt(r.cpuUsPerAnswer)} |`,
  ),
  '',
  best
    ? `Highest rate answered with under 1% lost: ${fmt(best.answeredPerSecond)} queries/s.`
    : 'No rate was answered with under 1% lost.',
  '',
  // On a machine whose other work takes the server's core, the CPU time per answer is the steadier figure.
  `At ${fmt(busiest.cpuUsPerAnswer)} µs of server CPU per answer (at ${fmt(busiest.answeredPerSecond)} answered/s, ` +
    `its share of the core ${Math.round(busiest.cpuShare * 100)}%), a core given to the server alone would answer ` +
    `about ${fmt(1e6 / busiest.cpuUsPerAnswer)} queries/s.`,
]);

/** Offers `rate` queries a second, spread over the sources, for `duration` seconds. */
async function offer(rate) {
  const sent = new Map();
  const latencies = [];
  let answered = 0;
  let id = 0;
  const onMessage = (message) => {
    const key = message.readUInt16BE(0);
    const at = sent.get(key);
    if (at === undefined) return;
    sent.delete(key);
    latencies.push(performance.now() - at);
    answered += 1;
  };
  for (const socket of sockets) socket.on('message', onMessage);
  const cpuBefore = cpuSeconds(child.pid);
  const started = performance.now();
  const total = rate * duration;
  let offered = 0;
  while (offered < total) {
    // Sends what is due by now, then yields for a millisecond so answers are read meanwhile.
    const due = Math.min(total, Math.floor(((performance.now() - started) / 1000) * rate));
    for (; offered < due; offered++) {
      id = (id + 1) % 65_536;
      const question = questions[offered % questions.length];
      const message = dnsPacket.encode({ type: 'query', id, questions: [question] });
      sent.set(id, performance.now());
      sockets[offered % sockets.length].send(message, dnsPort, '127.0.0.1');
    }
    await sleep(1);
  }
  await sleep(LOST_AFTER_MS);
  const seconds = (performance.now() - started) / 1000 - LOST_AFTER_MS / 1000;
  const cpu = cpuSeconds(child.pid) - cpuBefore;
  for (const socket of sockets) socket.off('message', onMessage);
  latencies.sort((a, b) => a - b);
  const at = (p) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? 0;
  return {
    answeredPerSecond: answered / seconds,
    lostShare: 1 - answered / total,
    p50: at(50),
    p99: at(99),
    cpuShare: cpu / (seconds + LOST_AFTER_MS / 1000),
    cpuUsPerAnswer: (cpu * 1e6) / Math.max(1, answered),
  };
}

/** A port free for TCP that UDP could bind too (the server binds both). */
async function freeUdpAndTcpPort() {
  for (;;) {
    const port = await new Promise((resolve, reject) => {
      const probe = net.createServer();
      probe.once('error', reject);
      probe.listen(0, '127.0.0.1', () => {
        const { port: found } = probe.address();
        probe.close(() => resolve(found));
      });
    });
    const udp = dgram.createSocket('udp4');
    const free = await new Promise((resolve) => {
      udp.once('error', () => resolve(false));
      udp.bind(port, '127.0.0.1', () => resolve(true));
    });
    udp.close();
    if (free) return port;
  }
}
