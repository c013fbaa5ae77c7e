/**
 * Benchmark of issue #22: real VMs with the qemu driver (KVM when usable, else TCG) and the image of
 * `nimbus admin images build`.
 *
 * Set-up: a built Nimbus (NIMBUS_DRIVER=qemu, a fresh data dir, the image dir of --image-dir, built first
 * when missing), the bootstrap account with an SSH key.
 *
 * Measured:
 *   1. Boot to SSH: one compute-1x instance started --boots times (forced stop between boots). For each
 *      boot, from the moment Nimbus started QEMU (`bootStartedAt` in the VM's machine.json) to the first
 *      SSH banner on the forwarded port, probed by this script every 20 ms. The first boot of an instance
 *      (host keys made, filesystem grown) is reported apart.
 *   2. Create → running as the API reports it: --creates instances one after another, from POST
 *      /v1/instances to the first GET that says `running` (polled every 100 ms).
 *   3. Eight concurrent boots: --concurrent instances created at once; each one's create → running
 *      (and its boot to SSH from machine.json), and the time until all are running.
 *   4. RSS per idle instance: those instances left idle --idle seconds, then each QEMU process's resident
 *      (VmRSS) and proportional (Pss) memory from /proc.
 * The 1-minute load average is recorded at each step, and the QEMU processes of others on the host when
 * the run starts (the figures depend on both: under TCG every guest instruction takes host CPU).
 * Checks (the run fails otherwise): every create 202, every instance running, every boot's SSH answered.
 * An instance in error fails the run with the driver's reason (machine.json) and its console's last lines.
 *
 * Usage (from the repository root):
 *   node bench/qemu-boot.mjs [--boots 10] [--creates 3] [--concurrent 8] [--idle 30]
 *     [--image-dir /var/cache/nimbus-images] [--accel auto|kvm|tcg] [--no-write] [--no-build] [--keep]
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import {
  admin,
  bootstrapAuth,
  cleanUpOnExit,
  cleanup,
  fail,
  percentile,
  positiveInt,
  prepareRun,
  request,
  runHeader,
  sleep,
  startNimbus,
  step,
  stopChild,
  tempDir,
  writeSection,
} from './lib.mjs';

const SCRIPT = 'bench/qemu-boot.mjs';

const { values } = parseArgs({
  options: {
    boots: { type: 'string', default: '10' },
    creates: { type: 'string', default: '3' },
    concurrent: { type: 'string', default: '8' },
    idle: { type: 'string', default: '30' },
    accel: { type: 'string', default: 'auto' },
    'image-dir': { type: 'string', default: '/var/cache/nimbus-images' },
    'no-write': { type: 'boolean', default: false },
    'no-build': { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
  },
});
const BOOTS = positiveInt(values.boots, 'boots');
const CREATES = positiveInt(values.creates, 'creates');
const CONCURRENT = positiveInt(values.concurrent, 'concurrent');
const IDLE_S = positiveInt(values.idle, 'idle');
const IMAGE_DIR = path.resolve(values['image-dir']);
cleanup.keep = values.keep;
cleanUpOnExit();

const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`;
const load = () => os.loadavg()[0].toFixed(1);
let dataDirOfRun = '';

async function api(port, auth, method, urlPath, body) {
  const headers = body === undefined ? auth : { ...auth, 'content-type': 'application/json' };
  const res = await request(port, method, urlPath, headers, body);
  return { status: res.status, body: res.body ? JSON.parse(res.body) : null };
}

async function waitForStatus(port, auth, id, wanted, timeoutMs = 600_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await api(port, auth, 'GET', `/v1/instances/${id}`);
    if (res.status === 200 && res.body.data.status === wanted) return res.body.data;
    if (res.status === 200 && res.body.data.status === 'error')
      fail(`${id} went into error: ${whyFailed(id)}`);
    if (Date.now() > deadline) fail(`${id} did not reach ${wanted} within ${timeoutMs / 1000} s`);
    await sleep(100);
  }
}

/** Whether an SSH server answers with its banner at port (QEMU accepts the connection before the guest). */
function sshBanner(port) {
  return new Promise((resolve) => {
    const socket = net.createConnection({ host: '127.0.0.1', port });
    let got = '';
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.on('data', (chunk) => {
      got += chunk.toString('latin1');
      if (got.length >= 4) done(got.startsWith('SSH-'));
    });
    socket.on('error', () => done(false));
    socket.on('close', () => done(false));
  });
}

/** The driver's reason for a failed machine and the last lines of its console, for the failure message. */
function whyFailed(id) {
  const record = machine(dataDirOfRun, id);
  let tail = '';
  try {
    tail = readFileSync(path.join(dataDirOfRun, 'qemu', 'machines', id, 'serial.log'), 'utf8')
      .trim()
      .split('\n')
      .slice(-5)
      .join('\n');
  } catch {
    // no console log
  }
  return `${record?.failure ?? 'no failure in machine.json (see nimbus.log)'}\n--- console ---\n${tail}`;
}

/** QEMU processes on the host now that are not this run's (other sessions' VMs share the CPUs). */
function otherQemus(dataDir) {
  let count = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (cmdline.startsWith('qemu-system') && !cmdline.includes(dataDir)) count++;
    } catch {
      // gone
    }
  }
  return count;
}

function machine(dataDir, id) {
  try {
    return JSON.parse(readFileSync(path.join(dataDir, 'qemu', 'machines', id, 'machine.json'), 'utf8'));
  } catch {
    return null;
  }
}

/** Memory of a process from /proc (KiB → MiB): resident and proportional. */
function memoryOf(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  const kib = (text, field) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(text)?.[1] ?? 0);
  return { rssMb: kib(status, 'VmRSS') / 1024, pssMb: kib(rollup, 'Pss') / 1024 };
}

/** One boot of a stopped instance: start it, then time QEMU's start to the first SSH banner. */
async function timedBoot(port, auth, dataDir, id) {
  const before = machine(dataDir, id)?.bootStartedAt ?? null;
  const started = await api(port, auth, 'POST', `/v1/instances/${id}/start`);
  if (started.status !== 202) fail(`start answered ${started.status}: ${JSON.stringify(started.body)}`);
  let record = null;
  for (const deadline = Date.now() + 60_000; ; ) {
    record = machine(dataDir, id);
    if (record?.bootStartedAt && record.bootStartedAt !== before && record.pid) break;
    if (Date.now() > deadline) fail(`${id}: QEMU did not start within 60 s`);
    await sleep(5);
  }
  for (const deadline = Date.now() + 600_000; ; ) {
    if (await sshBanner(record.sshPort)) return Date.now() - Date.parse(record.bootStartedAt);
    if (Date.now() > deadline) fail(`${id}: no SSH banner within 600 s`);
    await sleep(20);
  }
}

async function createInstance(port, auth, name) {
  const res = await api(port, auth, 'POST', '/v1/instances', {
    name,
    instance_type: 'compute-1x',
    region: 'us-east-1',
    image: 'debian-12',
    ssh_keys: ['bench'],
  });
  if (res.status !== 202) fail(`create answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body.data;
}

async function main() {
  const { command, loadAverage } = await prepareRun(SCRIPT, { build: !values['no-build'] });
  const dataDir = tempDir('nimbus-bench-qemu-');
  dataDirOfRun = dataDir;
  const others = otherQemus(dataDir);
  const loads = {};
  const env = {
    NIMBUS_DRIVER: 'qemu',
    NIMBUS_IMAGE_DIR: IMAGE_DIR,
    NIMBUS_QEMU_SSH_PORTS: '47000-47099',
    NIMBUS_QEMU_ACCEL: values.accel,
  };
  step(`building the guest image into ${IMAGE_DIR} (nothing to do when it is there)`);
  const image = admin(dataDir, ['images', 'build'], { NIMBUS_IMAGE_DIR: IMAGE_DIR });
  const logFile = `${dataDir}/nimbus.log`;
  const { child, port } = await startNimbus(dataDir, logFile, env);
  cleanup.tasks.push(() => {
    // Every VM of this run goes with it (they are daemonized: killing Nimbus leaves them).
    for (const id of readdirIds(dataDir)) {
      const pid = machine(dataDir, id)?.pid;
      if (pid) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone
        }
      }
    }
  });
  const auth = bootstrapAuth(dataDir);
  // The accelerator the driver chose (its log line may follow /healthz by a moment).
  let accel = 'unknown';
  for (const deadline = Date.now() + 30_000; accel === 'unknown' && Date.now() < deadline; ) {
    accel = /"accel":"(\w+)"/.exec(readFileSync(logFile, 'utf8'))?.[1] ?? 'unknown';
    if (accel === 'unknown') await sleep(100);
  }
  const keyFile = path.join(dataDir, 'bench_ed25519');
  if (spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', keyFile]).status !== 0)
    fail('ssh-keygen failed');
  const publicKey = readFileSync(`${keyFile}.pub`, 'utf8').trim();
  const key = await api(port, auth, 'POST', '/v1/ssh-keys', { name: 'bench', public_key: publicKey });
  if (key.status !== 201) fail(`ssh key: ${key.status} ${JSON.stringify(key.body)}`);

  step(`boot to SSH: one instance, ${BOOTS} boots (accelerator: ${accel}; load ${load()})`);
  loads.boots = load();
  const first = await createInstance(port, auth, 'bench-boot');
  await waitForStatus(port, auth, first.id, 'running');
  const firstRecord = machine(dataDir, first.id);
  const firstBootMs = Date.parse(firstRecord.sshReadyAt) - Date.parse(firstRecord.bootStartedAt);
  const boots = [];
  for (let i = 0; i < BOOTS; i++) {
    const stop = await api(port, auth, 'POST', `/v1/instances/${first.id}/stop`, { force: true });
    if (stop.status !== 202) fail(`stop answered ${stop.status}`);
    await waitForStatus(port, auth, first.id, 'stopped');
    while (machine(dataDir, first.id)?.pid) await sleep(20);
    boots.push(await timedBoot(port, auth, dataDir, first.id));
    await waitForStatus(port, auth, first.id, 'running');
    step(`  boot ${i + 1}: ${seconds(boots.at(-1))}`);
  }
  await api(port, auth, 'DELETE', `/v1/instances/${first.id}`);
  while (readdirIds(dataDir).length > 0) await sleep(200);

  step(`create → running through the API: ${CREATES} instances, one after another (load ${load()})`);
  loads.creates = load();
  const creates = [];
  for (let i = 0; i < CREATES; i++) {
    const begun = Date.now();
    const made = await createInstance(port, auth, `bench-create-${i}`);
    await waitForStatus(port, auth, made.id, 'running');
    creates.push(Date.now() - begun);
    step(`  create ${i + 1}: ${seconds(creates.at(-1))}`);
    await api(port, auth, 'DELETE', `/v1/instances/${made.id}`);
  }
  while (readdirIds(dataDir).length > 0) await sleep(200);

  step(`${CONCURRENT} concurrent boots (load ${load()})`);
  loads.concurrent = load();
  const begun = Date.now();
  const made = await Promise.all(
    Array.from({ length: CONCURRENT }, (_, i) => createInstance(port, auth, `bench-concurrent-${i}`)),
  );
  const concurrent = await Promise.all(
    made.map(async (instance) => {
      await waitForStatus(port, auth, instance.id, 'running');
      return Date.now() - begun;
    }),
  );
  // Each one's boot to SSH as the driver saw it (QEMU started → first banner).
  const concurrentBoots = made.map((instance) => {
    const record = machine(dataDir, instance.id);
    return Date.parse(record.sshReadyAt) - Date.parse(record.bootStartedAt);
  });
  step(
    `  all running after ${seconds(Math.max(...concurrent))}; each: ${concurrent.map(seconds).join(', ')}`,
  );
  step(`  idle ${IDLE_S} s (load ${load()})`);
  await sleep(IDLE_S * 1000);
  loads.idle = load();
  const memory = made.map((instance) => memoryOf(machine(dataDir, instance.id).pid));
  step(`  RSS: ${memory.map((m) => m.rssMb.toFixed(0)).join(', ')} MiB`);
  for (const instance of made) await api(port, auth, 'DELETE', `/v1/instances/${instance.id}`);
  while (readdirIds(dataDir).length > 0) await sleep(200);
  await stopChild(child);

  const sortedBoots = [...boots].sort((a, b) => a - b);
  const sortedConcurrent = [...concurrent].sort((a, b) => a - b);
  const rss = memory.map((m) => m.rssMb);
  const pss = memory.map((m) => m.pssMb);
  const mean = (list) => list.reduce((a, b) => a + b, 0) / list.length;
  const p50 = percentile(sortedBoots, 50);
  const p95 = percentile(sortedBoots, 95);
  const lines = [
    '### Last generated run',
    '',
    ...runHeader({
      loadAverage,
      command,
      npmScript: 'bench:qemu-boot',
      generator: `QEMU ${qemuVersion()}${image.version ? `, image ${image.name} ${image.version}` : ''}, accelerator ${accel}`,
      machineNote: ` Other sessions share this machine and its 2 cores (${others} QEMU process${others === 1 ? '' : 'es'} of others running when the run started; the load average at each step is in the table); under TCG every guest instruction is emulated on them.`,
    }),
    '| measure | result | 1-min load at the step |',
    '|---|---|---|',
    `| boot to SSH (QEMU started → SSH banner), ${BOOTS} boots of one compute-1x | p50 ${seconds(p50)}, p95 ${seconds(p95)}, min ${seconds(sortedBoots[0])}, max ${seconds(sortedBoots.at(-1))} (target ≤ 5 s: ${p95 <= 5000 ? 'met' : 'missed'}) | ${loads.boots} |`,
    `| first boot of an instance (host keys made, filesystem grown to 25 GB) | ${seconds(firstBootMs)} | ${loads.boots} |`,
    `| create → running as the API reports it, ${CREATES} one after another | ${creates.map(seconds).join(', ')} | ${loads.creates} |`,
    `| ${CONCURRENT} concurrent creates → all running | ${seconds(Math.max(...concurrent))}; each create → running: ${sortedConcurrent.map(seconds).join(', ')} | ${loads.concurrent} |`,
    `| the same ${CONCURRENT}: boot to SSH of each (QEMU started → banner) | ${[...concurrentBoots]
      .sort((a, b) => a - b)
      .map(seconds)
      .join(', ')} | ${loads.concurrent} |`,
    `| memory per idle compute-1x VM (256 MiB guest), QEMU process after ${IDLE_S} s idle, ${CONCURRENT} VMs | RSS mean ${mean(rss).toFixed(0)} MiB (min ${Math.min(...rss).toFixed(0)}, max ${Math.max(...rss).toFixed(0)}), PSS mean ${mean(pss).toFixed(0)} MiB | ${loads.idle} |`,
    '',
  ];
  for (const line of lines.slice(-9)) process.stdout.write(`${line}\n`);
  if (!values['no-write']) writeSection(SCRIPT, lines);
}

function qemuVersion() {
  const out = spawnSync('qemu-system-x86_64', ['--version'], { encoding: 'utf8' }).stdout ?? '';
  return /version (\S+)/.exec(out)?.[1] ?? 'unknown';
}

function readdirIds(dataDir) {
  try {
    return readdirSync(path.join(dataDir, 'qemu', 'machines'));
  } catch {
    return [];
  }
}

main().catch((error) => fail(error.stack ?? String(error)));
