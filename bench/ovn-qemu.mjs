/**
 * Benchmark of issue 31 with real VMs: NIMBUS_DRIVER=qemu, NIMBUS_NETWORK=ovn, a public uplink.
 *
 * Set-up: a built Nimbus on a fresh data dir (the embedded OVS and OVN), the guest image of
 * `nimbus admin images build` (--image-dir), and an "internet" namespace made by this script: one end of
 * a veth pair inside it holding the upstream router's address (the us-east-1 pool's first, the default
 * NIMBUS_PUBLIC_GATEWAY), the other end left in the root namespace without an address as
 * NIMBUS_PUBLIC_UPLINK (as test/ovn-qemu-public.test.ts does). Nothing is routed in the root namespace.
 * Two compute-1x instances of debian-12 (busybox and dropbear), A and B, in the bootstrap account's VPC.
 *
 * Measured:
 *   1. `running` → first SSH answer on the public IP: from the first GET that shows `running` (polled
 *      every 200 ms) to the first `ssh lambda@<public ip> hostname` from the internet namespace that
 *      returns the guest's hostname (tried again every 200 ms); for A and B's first boots, then A stopped
 *      (forced) and started --boots times.
 *   2. Rule change → data path, as test/ovn-qemu-firewall.test.ts measures it: B probes A's tcp/8080
 *      (busybox httpd) in a loop over one SSH session, each line stamped here as it arrives; a deny rule
 *      created through the API (closing: to the start of the first probe that failed) and deleted
 *      (opening: to the end of the first probe that answered, an upper bound including up to the probe's
 *      1 s connect timeout), --rounds times.
 *   3. VM-to-VM TCP throughput on the private network: B sends --mib MiB of zeros (busybox dd | nc) to a
 *      busybox `nc -l` in A; timed in B by /proc/uptime (10 ms) around the pipeline, which ends when A
 *      has read everything (nc half-closes on its input's end; A's nc exits on the stream's end, and
 *      B's on A's close). A counts the bytes it got; anything short fails the run. Three transfers; the
 *      median.
 *   4. Public-side TCP throughput: the same bytes from the internet namespace (the host's busybox nc) to
 *      A's public IP (a rule opens the port from anywhere), timed on the host; three transfers.
 *   5. What bounds those rates: the same bytes over A's own loopback (no network: one TCG vCPU running
 *      both ends), and during every transfer the share of a core that ovs-vswitchd (the userspace
 *      datapath) and each QEMU took, from /proc.
 * The 1-minute load average is written at each step (other sessions share the machine's CPUs; the
 * guests run under TCG, every guest instruction emulated on them).
 *
 * Everything made is removed at the end, failures and Ctrl-C included: the server, QEMU, the taps, the
 * VPC's host namespace, the embedded daemons, the bridges, the internet namespace and its veth pair.
 * Needs root, the OVN packages (docs/operations.md) and QEMU. Run it under `flock /tmp/nimbus-vm.lock`
 * on a shared machine.
 *
 * Usage (from the repository root):
 *   node bench/ovn-qemu.mjs [--boots 3] [--rounds 5] [--mib 16]
 *     [--image-dir /var/cache/nimbus-images] [--no-write] [--no-build] [--keep]
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import {
  admin,
  atCleanUp,
  bootstrapAuth,
  cleanUpOnExit,
  cleanup,
  cpuSeconds,
  fail,
  percentile,
  positiveInt,
  prepareRun,
  ROOT,
  request,
  runHeader,
  sleep,
  startNimbus,
  step,
  stopChild,
  tempDir,
  writeSection,
} from './lib.mjs';

const SCRIPT = 'bench/ovn-qemu.mjs';

const { values } = parseArgs({
  options: {
    boots: { type: 'string', default: '3' },
    rounds: { type: 'string', default: '5' },
    mib: { type: 'string', default: '16' },
    'image-dir': { type: 'string', default: '/var/cache/nimbus-images' },
    'no-write': { type: 'boolean', default: false },
    'no-build': { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
  },
});
const BOOTS = positiveInt(values.boots, 'boots');
const ROUNDS = positiveInt(values.rounds, 'rounds');
const MIB = positiveInt(values.mib, 'mib');
const IMAGE_DIR = path.resolve(values['image-dir']);
cleanup.keep = values.keep;
cleanUpOnExit();

const HTTP_PORT = 8080;
const BULK_PORT = 5001;
const TRANSFERS = 3;
const load = () => os.loadavg()[0].toFixed(1);
const median = (list) => [...list].sort((a, b) => a - b)[Math.floor((list.length - 1) / 2)];
const pct = (share) => `${Math.round(share * 100)}%`;
const sh = (program, args) => spawnSync(program, args, { encoding: 'utf8' });
const mustRun = (program, args) => {
  const result = sh(program, args);
  if (result.status !== 0) fail(`${program} ${args.join(' ')}: ${result.stderr}`);
  return result.stdout;
};

/**
 * The "internet" side: a namespace whose eth0 holds `address` (a.b.c.d/n), the other end of its veth
 * pair, `uplink`, left addressless in the root namespace for Nimbus's provider bridge. Transmit checksum
 * offload off on the namespace's end: the userspace datapath's conntrack drops what it left undone.
 */
function makeInternet(address) {
  const tag = (process.pid % 100_000).toString(36);
  const internet = { namespace: `nbq-${tag}-inet`, uplink: `nq${tag}up`.slice(0, 15) };
  atCleanUp(() => {
    if (existsSync(`/sys/class/net/${internet.uplink}`)) sh('ip', ['link', 'del', internet.uplink]);
    sh('ip', ['netns', 'del', internet.namespace]);
  });
  const inside = (...args) => mustRun('ip', ['netns', 'exec', internet.namespace, ...args]);
  mustRun('ip', ['netns', 'add', internet.namespace]);
  mustRun('ip', [
    'link',
    'add',
    internet.uplink,
    'type',
    'veth',
    'peer',
    'name',
    'eth0',
    'netns',
    internet.namespace,
  ]);
  inside('sysctl', '-q', '-w', 'net.ipv6.conf.all.disable_ipv6=1');
  inside('ethtool', '-K', 'eth0', 'tx', 'off');
  mustRun('sysctl', ['-q', '-w', `net.ipv6.conf.${internet.uplink}.disable_ipv6=1`]);
  inside('ip', 'addr', 'add', address, 'dev', 'eth0');
  inside('ip', 'link', 'set', 'lo', 'up');
  inside('ip', 'link', 'set', 'eth0', 'up');
  return internet;
}

function sshArgs(host, keyFile, port) {
  return [
    ...['-i', keyFile, '-p', String(port)],
    ...['-o', 'BatchMode=yes', '-o', 'StrictHostKeyChecking=no', '-o', 'UserKnownHostsFile=/dev/null'],
    ...['-o', 'LogLevel=ERROR', '-o', 'ConnectTimeout=10', '-o', 'PasswordAuthentication=no'],
    `lambda@${host}`,
  ];
}

/** A command's exit code and output, ended after timeoutMs. */
function exec(program, args, timeoutMs, input) {
  return new Promise((resolve) => {
    const child = spawn(program, args, { stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk) => {
      stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk) => {
      stderr += chunk;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? 1, stdout, stderr });
    });
    if (input !== undefined) child.stdin.end(input);
  });
}

async function main() {
  const { command, loadAverage } = await prepareRun(SCRIPT, { build: !values['no-build'] });
  const { OvnNetwork } = await import(path.join(ROOT, 'dist', 'drivers', 'ovn', 'network.js'));
  const { defaultPublicGateway, providerBridgeName } = await import(
    path.join(ROOT, 'dist', 'drivers', 'ovn', 'uplink.js')
  );
  const { DEFAULT_PUBLIC_POOLS } = await import(
    path.join(ROOT, 'dist', 'resources', 'addresses', 'addresses.js')
  );
  const pool = DEFAULT_PUBLIC_POOLS['us-east-1'];
  const gateway = defaultPublicGateway(pool);

  const dataDir = tempDir('nimbus-bench-ovn-qemu-');
  // Its names only (taps, host namespaces, bridges): the server runs the network.
  const network = OvnNetwork.attach({ dir: path.join(dataDir, 'ovn'), central: null });
  const instanceIds = [];
  // Runs after the server is killed (lib kills children first), before the data dir goes.
  atCleanUp(() => {
    network.nb.close();
    for (const pid of processesNaming(dataDir)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    for (const id of instanceIds) {
      const tap = network.tapName(id);
      if (existsSync(`/sys/class/net/${tap}`)) sh('ip', ['link', 'del', tap]);
    }
    for (const namespace of network.hostNamespaces()) sh('ip', ['netns', 'del', namespace]);
    const bridge = network.endpoints.integrationBridge;
    for (const name of [bridge, providerBridgeName(bridge)]) {
      if (existsSync(`/sys/class/net/${name}`)) sh('ip', ['link', 'del', name]);
    }
  });
  const internet = makeInternet(`${gateway}/${pool.split('/')[1]}`);

  step(`building the guest image into ${IMAGE_DIR} (nothing to do when it is there)`);
  const image = admin(dataDir, ['images', 'build'], { NIMBUS_IMAGE_DIR: IMAGE_DIR });
  const { child, port } = await startNimbus(dataDir, path.join(dataDir, 'nimbus.log'), {
    NIMBUS_DRIVER: 'qemu',
    NIMBUS_NETWORK: 'ovn',
    NIMBUS_PUBLIC_UPLINK: internet.uplink,
    NIMBUS_IMAGE_DIR: IMAGE_DIR,
    NIMBUS_QEMU_SSH_PORTS: '47100-47199',
  });
  const auth = bootstrapAuth(dataDir);
  const api = async (method, urlPath, body) => {
    const headers = body === undefined ? auth : { ...auth, 'content-type': 'application/json' };
    const res = await request(port, method, urlPath, headers, body);
    return { status: res.status, body: res.body ? JSON.parse(res.body) : null };
  };
  const keyFile = path.join(dataDir, 'bench_ed25519');
  if (spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', keyFile]).status !== 0)
    fail('ssh-keygen failed');
  const key = await api('POST', '/v1/ssh-keys', {
    name: 'bench',
    public_key: readFileSync(`${keyFile}.pub`, 'utf8').trim(),
  });
  if (key.status !== 201) fail(`ssh key: ${key.status} ${JSON.stringify(key.body)}`);

  /** A command in a guest over SSH to its public IP, from the internet namespace. */
  const inGuest = (vm, script, timeoutMs = 120_000) =>
    exec(
      'ip',
      ['netns', 'exec', internet.namespace, 'ssh', ...sshArgs(vm.public_ip, keyFile, 22), script],
      timeoutMs,
    );
  const waitRunning = async (id) => {
    for (const deadline = Date.now() + 600_000; ; ) {
      const res = await api('GET', `/v1/instances/${id}`);
      if (res.body?.data?.status === 'running') return { vm: res.body.data, at: Date.now() };
      if (res.body?.data?.status === 'error')
        fail(`${id} went into error (see ${dataDir}/nimbus.log; --keep)`);
      if (Date.now() > deadline) fail(`${id} not running within 600 s`);
      await sleep(200);
    }
  };
  /** `running` → the first SSH login on the public IP from the internet side that returns the hostname. */
  const firstPublicSsh = async (id) => {
    const { vm, at } = await waitRunning(id);
    for (const deadline = at + 300_000; ; ) {
      const answer = await inGuest(vm, 'hostname', 30_000);
      if (answer.code === 0 && answer.stdout.trim() === vm.hostname) return { vm, ms: Date.now() - at };
      if (Date.now() > deadline) fail(`${id}: no SSH answer on ${vm.public_ip} within 300 s of running`);
      await sleep(200);
    }
  };

  step(`creating A and B (load ${load()})`);
  const loads = { create: load() };
  const created = [];
  for (const name of ['bench-a', 'bench-b']) {
    const res = await api('POST', '/v1/instances', {
      name,
      instance_type: 'compute-1x',
      region: 'us-east-1',
      image: 'debian-12',
      ssh_keys: ['bench'],
    });
    if (res.status !== 202) fail(`create answered ${res.status}: ${JSON.stringify(res.body)}`);
    instanceIds.push(res.body.data.id);
    created.push(res.body.data.id);
  }
  const sshTimes = [];
  const vms = [];
  for (const id of created) {
    const { vm, ms } = await firstPublicSsh(id);
    vms.push(vm);
    sshTimes.push(ms);
    step(`  ${vm.name} (first boot): running → SSH on ${vm.public_ip} in ${ms} ms`);
  }
  let [a, b] = vms;
  loads.boots = load();
  for (let i = 0; i < BOOTS; i++) {
    const stop = await api('POST', `/v1/instances/${a.id}/stop`, { force: true });
    if (stop.status !== 202) fail(`stop answered ${stop.status}`);
    for (;;) {
      if ((await api('GET', `/v1/instances/${a.id}`)).body?.data?.status === 'stopped') break;
      await sleep(200);
    }
    const started = await api('POST', `/v1/instances/${a.id}/start`);
    if (started.status !== 202) fail(`start answered ${started.status}`);
    const { vm, ms } = await firstPublicSsh(a.id);
    a = vm;
    sshTimes.push(ms);
    step(`  boot ${i + 1} of A: running → SSH on the public IP in ${ms} ms (load ${load()})`);
  }

  step(`rule change → data path, ${ROUNDS} closings and openings (load ${load()})`);
  loads.rules = load();
  const served = await inGuest(
    a,
    `mkdir -p /tmp/www && echo hello > /tmp/www/index.html && busybox httpd -p ${HTTP_PORT} -h /tmp/www && echo up`,
  );
  if (!served.stdout.includes('up')) fail(`httpd in A: ${served.stderr}`);
  /** A long-running command in a guest over one SSH session from the internet side; its stdout piped. */
  const guestSession = (vm, script) =>
    spawn('ip', ['netns', 'exec', internet.namespace, 'ssh', ...sshArgs(vm.public_ip, keyFile, 22), script], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
  const { closing, opening, cuts } = await ruleChanges(api, guestSession, a, b);

  const vswitchdPid = () =>
    Number(readFileSync(path.join(dataDir, 'ovn', 'ovs-vswitchd.pid'), 'utf8').trim());
  const qemuPid = (vm) =>
    JSON.parse(readFileSync(path.join(dataDir, 'qemu', 'machines', vm.id, 'machine.json'), 'utf8')).pid;
  /**
   * TRANSFERS sends of MIB MiB into a listener in A, each `send()` returning its seconds; with the share
   * of a core that ovs-vswitchd (the userspace datapath) and each QEMU (TCG) used meanwhile, which says
   * what bounds the rate (the shares are over the host's wall time of the send, SSH set-up included).
   */
  const bulk = async (label, send) => {
    step(`${label}, ${MIB} MiB × ${TRANSFERS} (load ${load()})`);
    const pids = { vswitchd: vswitchdPid(), a: qemuPid(a), b: qemuPid(b) };
    const rates = [];
    const shares = { vswitchd: [], a: [], b: [] };
    for (let i = 0; i < TRANSFERS; i++) {
      await listen(inGuest, a);
      const before = Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, cpuSeconds(pid)]));
      const began = performance.now();
      const seconds = await send();
      const wall = (performance.now() - began) / 1000;
      for (const [name, pid] of Object.entries(pids))
        shares[name].push((cpuSeconds(pid) - before[name]) / wall);
      await checkReceived(inGuest, a);
      rates.push(MIB / seconds);
      step(`  ${(MIB / seconds).toFixed(1)} MiB/s (${seconds.toFixed(2)} s)`);
    }
    return {
      rates,
      cpu: Object.fromEntries(Object.entries(shares).map(([name, list]) => [name, median(list)])),
    };
  };
  /** dd of MIB MiB into nc to host:BULK_PORT in `vm`, timed in the guest by /proc/uptime (10 ms). */
  const sendFromGuest = (vm, host) => async () => {
    const sent = await inGuest(
      vm,
      `s=$(cut -d' ' -f1 /proc/uptime); dd if=/dev/zero bs=65536 count=${MIB * 16} 2>/dev/null | nc -w 10 ${host} ${BULK_PORT}; rc=$?; e=$(cut -d' ' -f1 /proc/uptime); echo "$rc $s $e"`,
      300_000,
    );
    const [rc, s, e] = sent.stdout.trim().split(' ').map(Number);
    if (rc !== 0 || !(e > s)) fail(`transfer ${vm.name} → ${host}: ${sent.stdout} ${sent.stderr}`);
    return e - s;
  };

  loads.loopback = load();
  const loopback = await bulk('in-guest loopback, A → A', sendFromGuest(a, '127.0.0.1'));
  loads.private = load();
  const privateSide = await bulk('VM-to-VM throughput, B → A', sendFromGuest(b, a.private_ip));

  loads.public = load();
  const rule = await api('POST', '/v1/firewall/rules', {
    name: 'bench-bulk',
    direction: 'inbound',
    action: 'allow',
    protocol: 'tcp',
    ports: String(BULK_PORT),
    sources: ['0.0.0.0/0'],
    priority: 100,
    targets: { instance_ids: [a.id] },
    region: 'us-east-1',
  });
  if (rule.status !== 201) fail(`allow rule: ${rule.status} ${JSON.stringify(rule.body)}`);
  const publicSide = await bulk("public-side throughput, internet → A's public IP", async () => {
    const began = performance.now();
    const sent = await exec(
      'ip',
      [
        ...['netns', 'exec', internet.namespace, 'sh', '-c'],
        `dd if=/dev/zero bs=65536 count=${MIB * 16} 2>/dev/null | busybox nc -w 10 ${a.public_ip} ${BULK_PORT}`,
      ],
      300_000,
    );
    if (sent.code !== 0) fail(`transfer internet → A: ${sent.stderr}`);
    return (performance.now() - began) / 1000;
  });

  step('deleting the instances');
  for (const id of created) await api('DELETE', `/v1/instances/${id}`);
  for (const deadline = Date.now() + 300_000; ; ) {
    const gone = await Promise.all(
      created.map(async (id) => (await api('GET', `/v1/instances/${id}`)).status),
    );
    if (gone.every((status) => status === 404)) break;
    if (Date.now() > deadline) fail('the instances were not gone within 300 s');
    await sleep(500);
  }
  await stopChild(child);

  const all = [...closing, ...opening];
  const qemu = /version (\S+)/.exec(sh('qemu-system-x86_64', ['--version']).stdout ?? '')?.[1] ?? 'unknown';
  const accel =
    /"accel":"(\w+)"/.exec(readFileSync(path.join(dataDir, 'nimbus.log'), 'utf8'))?.[1] ?? 'unknown';
  const list = (values, unit = ' ms') => values.map((v) => `${Math.round(v)}${unit}`).join(', ');
  const cpuText = (cpu) =>
    `CPU meanwhile (share of a core): ovs-vswitchd ${pct(cpu.vswitchd)}, QEMU of A ${pct(cpu.a)}, of B ${pct(cpu.b)}`;
  const rates = (values) =>
    `median ${median(values).toFixed(1)} MiB/s (${values.map((v) => v.toFixed(1)).join(', ')})`;
  const lines = [
    '### Last generated run',
    '',
    ...runHeader({
      loadAverage,
      command,
      npmScript: 'bench:ovn-qemu',
      generator: `QEMU ${qemu}, image ${image.name} ${image.version ?? ''}, accelerator ${accel}, the embedded OVN (userspace datapath)`,
      machineNote:
        ' Other sessions share this machine and its 2 cores (the load average at each step is in the table); under TCG every guest instruction is emulated on them.',
    }),
    'Two compute-1x VMs (A, B) of one account; an "internet" namespace on the uplink veth.',
    '',
    '| measure | result | 1-min load at the step |',
    '|---|---|---|',
    `| \`running\` → first SSH answer on the public IP from the internet namespace (A and B's first boots, then ${BOOTS} restarts of A) | p50 ${Math.round(median(sshTimes))} ms, max ${Math.round(Math.max(...sshTimes))} ms (${list(sshTimes)}) | ${loads.create} / ${loads.boots} |`,
    `| rule change → data path, B probing A:${HTTP_PORT}, closing (API answer → first failed probe began) | ${list(closing)} | ${loads.rules} |`,
    `| rule change → data path, opening (API answer → first answered probe ended; includes up to the probe's 1 s connect timeout) | ${list(opening)} | ${loads.rules} |`,
    `| rule change → data path, all ${all.length} changes | p50 ${Math.round(percentile(all, 50))} ms, p99 ${Math.round(percentile(all, 99))} ms; closing p50 ${Math.round(percentile(closing, 50))} ms; probes cut by a closing change: ${cuts} | ${loads.rules} |`,
    `| TCP in one guest over its loopback, A → A (busybox dd \\| nc, ${MIB} MiB, timed in A): what one TCG vCPU manages with no network | ${rates(loopback.rates)}; ${cpuText(loopback.cpu)} | ${loads.loopback} |`,
    `| VM-to-VM TCP throughput on the private network, B → A (${MIB} MiB, timed in B) | ${rates(privateSide.rates)}; ${cpuText(privateSide.cpu)} | ${loads.private} |`,
    `| public-side TCP throughput, internet namespace → A's public IP (${MIB} MiB, timed on the host) | ${rates(publicSide.rates)}; ${cpuText(publicSide.cpu)} | ${loads.public} |`,
    '',
  ];
  for (const line of lines) process.stdout.write(`${line}\n`);
  if (!values['no-write']) writeSection(SCRIPT, lines);
}

/**
 * A busybox `nc -l` in the guest on BULK_PORT that reads one connection to its end, then writes how many
 * bytes it got to /tmp/bulk-got. Its input is a `sleep` that never writes: nc half-closes the connection
 * when its input ends, and the sender's nc would then stop at once (seen: 1,024 of 6.5 MB arrived).
 */
async function listen(inGuest, vm) {
  const started = await inGuest(
    vm,
    // A moment for nc to listen: the guest is emulated on a loaded host.
    // setsid: the SSH server ends the session's processes with it (a nohup'd listener was gone).
    `rm -f /tmp/bulk-got; busybox setsid busybox sh -c 'sleep 300 | busybox nc -l -p ${BULK_PORT} | busybox wc -c > /tmp/bulk-got' </dev/null >/dev/null 2>&1 & sleep 1; echo up`,
  );
  if (!started.stdout.includes('up')) fail(`listener in ${vm.name}: ${started.stdout} ${started.stderr}`);
}

/** Fails unless the listener in the guest got all MIB MiB (wc writes once nc has ended). */
async function checkReceived(inGuest, vm) {
  const expected = MIB * 1024 * 1024;
  for (let tries = 0; tries < 20; tries++) {
    const got = (await inGuest(vm, 'cat /tmp/bulk-got 2>/dev/null')).stdout.trim();
    if (got !== '') {
      if (Number(got) !== expected) fail(`${vm.name} received ${got} bytes of ${expected}`);
      return;
    }
    await sleep(500);
  }
  fail(`${vm.name}: the listener did not finish`);
}

/**
 * B probes A's HTTP_PORT in a loop over one SSH session (test/ovn-qemu-firewall.test.ts's ProbeLoop);
 * each of ROUNDS deny rules is created, timed to the data path, deleted, timed again.
 */
async function ruleChanges(api, guestSession, a, b) {
  const request = `printf 'GET / HTTP/1.0\\r\\n\\r\\n'`;
  const probe = `r=$(${request} | timeout 2 nc -w 1 ${a.private_ip} ${HTTP_PORT} 2>/dev/null; echo "rc=$?")`;
  const verdict = `case "$r" in *hello*) echo open;; *rc=143*) echo cut;; *) echo closed;; esac`;
  const lines = [];
  let rest = '';
  let ended = false;
  const loop = guestSession(b, `while :; do echo start; ${probe} 2>/dev/null; ${verdict}; done`);
  loop.stdout.setEncoding('utf8').on('data', (chunk) => {
    const at = Date.now();
    const parts = (rest + chunk).split('\n');
    rest = parts.pop() ?? '';
    for (const text of parts) lines.push({ at, text: text.trim() });
  });
  loop.once('exit', () => {
    ended = true;
  });
  cleanup.children.add(loop);
  /** How long after `since` the probes showed `state` (as the test's ProbeLoop.reached). */
  const reached = async (state, since) => {
    const shows = state === 'open' ? ['open'] : ['closed', 'cut'];
    for (const deadline = since + 60_000; ; ) {
      const first = lines.findIndex((line) => line.at >= since && shows.includes(line.text));
      if (first >= 0) {
        const shown = lines[first];
        if (state === 'open') return shown.at - since;
        const begun = lines.slice(0, first).findLast((line) => line.text === 'start');
        return Math.max(0, (begun?.at ?? shown.at) - since);
      }
      if (ended) fail(`the probe loop's SSH session ended; last lines ${JSON.stringify(lines.slice(-4))}`);
      if (Date.now() > deadline) fail(`the probes did not see ${state} within 60 s of the change`);
      await sleep(20);
    }
  };
  await reached('open', Date.now());
  const closing = [];
  const opening = [];
  for (let round = 0; round < ROUNDS; round++) {
    const rule = await api('POST', '/v1/firewall/rules', {
      name: `bench-close-${round}`,
      direction: 'inbound',
      action: 'deny',
      protocol: 'tcp',
      ports: String(HTTP_PORT),
      sources: ['10.10.0.0/16'],
      priority: 100,
      targets: { instance_ids: [a.id] },
      region: 'us-east-1',
    });
    if (rule.status !== 201) fail(`deny rule: ${rule.status} ${JSON.stringify(rule.body)}`);
    closing.push(await reached('closed', Date.now()));
    const deleted = await api('DELETE', `/v1/firewall/rules/${rule.body.data.id}`);
    if (deleted.status !== 200) fail(`delete rule: ${deleted.status}`);
    opening.push(await reached('open', Date.now()));
    step(`  round ${round + 1}: closing ${closing.at(-1)} ms, opening ${opening.at(-1)} ms`);
  }
  cleanup.children.delete(loop);
  loop.kill('SIGKILL');
  return { closing, opening, cuts: lines.filter((line) => line.text === 'cut').length };
}

/** Processes whose command line names `marker` (the run's data dir): QEMU and the embedded daemons. */
function processesNaming(marker) {
  const found = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(marker)) found.push(Number(entry));
    } catch {
      // gone
    }
  }
  return found;
}

main().catch((error) => fail(error.stack ?? String(error)));
