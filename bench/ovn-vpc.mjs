/**
 * Benchmark of issue 31: what a VPC costs in OVN — rows, logical flows, OpenFlow flows and the daemons'
 * memory — for 1, 10 and 50 VPCs (one per account) of --per-vpc instances each.
 *
 * Set-up: the embedded OVS and OVN daemons of a built Nimbus (dist/drivers/ovn/daemons.js) in a temporary
 * directory, no server and no VMs. Each VPC is what the reconcile job writes for an account
 * (vpcs.ts vpcsOf: switch, router, DHCP options, DNS records, the host's port, each instance's port with the
 * firewall of the default preset `ssh-only`; uplink.ts publicSideOf: the router's port on the public link,
 * a NAT per instance, the default route, the gateway chassis), applied with applyTopology as the job
 * applies it. Every instance's port and every VPC's host port is bound on this chassis by an OVS internal
 * port carrying its iface-id, as a VM's tap and the host namespace's veth are, so ovn-controller installs
 * the flows a host running those VMs runs. The public link has no uplink plugged in (its rows and flows
 * are the same; no packet is sent).
 *
 * Measured at each size, after `ovn-nbctl --wait=hv sync` (ovn-northd and ovn-controller caught up):
 *   - rows of each northbound and southbound table (ovsdb-client dump), logical flows among them;
 *   - OpenFlow flows on the integration bridge (ovs-ofctl dump-aggregate);
 *   - resident memory (VmRSS) of ovsdb-server (Open_vSwitch), the northbound and southbound ovsdb-servers,
 *     ovn-northd, ovn-controller and ovs-vswitchd.
 * Per VPC: the slope between the two largest sizes. Per instance: one VPC grown by --per-vpc more
 * instances at the end, the difference divided by that number.
 * Reconcile time per VPC: each VPC added by one applyTopology scoped to it (one OVSDB transaction), then
 * `ovn-nbctl --wait=hv sync` until this chassis has the flows; p50 and max of both at each size step.
 *
 * Needs root (OVS ports) and Debian's openvswitch-switch, ovn-central and ovn-host. Everything made is
 * removed at the end, failures and Ctrl-C included: the daemons (killed by their pidfiles), the bridge and
 * its ports, the directory.
 *
 * Usage (from the repository root):
 *   node bench/ovn-vpc.mjs [--vpcs 1,10,50] [--per-vpc 3] [--no-write] [--no-build] [--keep]
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import {
  atCleanUp,
  cleanUpOnExit,
  cleanup,
  fail,
  positiveInt,
  prepareRun,
  ROOT,
  runHeader,
  step,
  tempDir,
  writeSection,
} from './lib.mjs';

const SCRIPT = 'bench/ovn-vpc.mjs';

const { values } = parseArgs({
  options: {
    vpcs: { type: 'string', default: '1,10,50' },
    'per-vpc': { type: 'string', default: '3' },
    'no-write': { type: 'boolean', default: false },
    'no-build': { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
  },
});
const SIZES = values.vpcs.split(',').map((n) => positiveInt(n, 'vpcs'));
if (SIZES.some((n, i) => i > 0 && n <= SIZES[i - 1])) fail('--vpcs must grow (e.g. 1,10,50)');
if (SIZES.length < 2) fail('--vpcs needs two sizes at least (the slope)');
const PER_VPC = positiveInt(values['per-vpc'], 'per-vpc');
cleanup.keep = values.keep;
cleanUpOnExit();

const REGION = 'us-east-1';
/** A public pool of the benchmarking range (RFC 2544): no uplink is plugged in, so it reaches nothing. */
const POOL = '198.18.0.0/15';
const CHASSIS = 'bench-ovn-vpc';
/** The daemons, by the name of their pidfile in the OVN directory (daemons.ts). */
const DAEMONS = [
  ['ovsdb-server', 'ovsdb-server (Open_vSwitch)'],
  ['ovnnb', 'ovsdb-server (northbound)'],
  ['ovnsb', 'ovsdb-server (southbound)'],
  ['ovn-northd', 'ovn-northd'],
  ['ovn-controller', 'ovn-controller'],
  ['ovs-vswitchd', 'ovs-vswitchd'],
];

// The network's own code, as the build has it (the benchmark measures what Nimbus writes, not a copy).
const dist = (module) => import(path.join(ROOT, 'dist', 'drivers', 'ovn', module));

const median = (list) => [...list].sort((a, b) => a - b)[Math.floor((list.length - 1) / 2)];
const ms = (n) => `${Math.round(n)} ms`;
const mib = (kib) => (kib / 1024).toFixed(1);
const load = () => os.loadavg()[0].toFixed(1);

/** The nth address of the public pool (198.18.0.0 + n). */
function publicAddress(n) {
  return `198.${18 + Math.floor(n / 65_536)}.${Math.floor(n / 256) % 256}.${n % 256}`;
}

/** Account v's instances as the store holds them: the default preset, a private and a public IP each. */
function instancesOf(v, count, publicIps) {
  return Array.from({ length: count }, (_, j) => ({
    id: `ins_bench${v}x${j}`,
    account_id: `acct_bench${v}`,
    region: REGION,
    name: `vm-${j}`,
    private_ip: `10.10.0.${10 + j}`,
    tags: {},
    firewall_preset: 'ssh-only',
    public_ip: publicIps.next(),
  }));
}

async function main() {
  const { command, loadAverage } = await prepareRun(SCRIPT, { build: !values['no-build'] });
  const { EmbeddedOvn } = await dist('daemons.js');
  const { Northbound } = await dist('northbound.js');
  const { applyTopology, hostPortName, vpcKey } = await dist('topology.js');
  const { vpcsOf } = await dist('vpcs.js');
  const { publicSideOf } = await dist('uplink.js');
  const { macAddressFor } = await import(path.join(ROOT, 'dist', 'resources', 'addresses', 'addresses.js'));

  const dir = path.join(tempDir('nimbus-bench-ovn-vpc-'), 'ovn');
  // Sync, so that it also runs when the script fails: the daemons by their pidfiles, the bridge's taps.
  atCleanUp(() => {
    for (const [name] of DAEMONS) {
      const pid = pidOf(dir, name);
      if (pid !== null) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone
        }
      }
    }
    for (const link of ownLinks()) spawnSync('ip', ['link', 'del', link]);
  });
  step(`starting the embedded OVS and OVN in ${dir}`);
  const ovn = await EmbeddedOvn.start({ dir, chassis: CHASSIS });
  const { env, integrationBridge: bridge, nbUrl, sbUrl, ovsDb } = ovn.endpoints;
  const nb = new Northbound(nbUrl);
  // A whole database's dump at 50 VPCs is tens of MB.
  const tool = (program, args) => execFileSync(program, args, { env, encoding: 'utf8', maxBuffer: 1 << 30 });
  /** The kernel links of this run: the bridge and the internal ports, all named after its tag. */
  const tag = bridge.slice(-4);
  function ownLinks() {
    return readdirSync('/sys/class/net').filter((name) => name === bridge || name.startsWith(`nb${tag}`));
  }
  const plugged = new Set();
  /** An internal port of the bridge bound to logical port `logicalPort`, as a tap or veth of a VM would be. */
  const plug = (logicalPort) => {
    const name = `nb${tag}${plugged.size.toString(36)}`;
    plugged.add(name);
    tool('ovs-vsctl', [
      `--db=${ovsDb}`,
      '--',
      'add-port',
      bridge,
      name,
      '--',
      'set',
      'Interface',
      name,
      'type=internal',
      `external_ids:iface-id=${logicalPort}`,
    ]);
  };
  const syncHypervisors = () => tool('ovn-nbctl', [`--db=${nbUrl}`, '--timeout=120', '--wait=hv', 'sync']);

  let nextPublic = 2; // .0 is the network, .1 the upstream router
  const publicIps = { next: () => publicAddress(nextPublic++) };
  const link = { pools: { [REGION]: POOL }, gateways: { [REGION]: publicAddress(1) } };
  /** Account v's VPC with `count` instances, as the reconcile job builds it. */
  const vpcOf = (v, instances) => {
    const rules = new Map([[vpcKey({ accountId: `acct_bench${v}`, region: REGION }), []]]);
    const [vpc] = vpcsOf(instances, rules);
    const router = { ip: routerAddresses.get(v), mac: macAddressFor(`${vpcKey(vpc)}/public`) };
    return {
      ...vpc,
      public: publicSideOf(
        { key: vpcKey(vpc), region: REGION, cidr: vpc.cidr },
        instances,
        link,
        router,
        CHASSIS,
      ),
    };
  };
  const routerAddresses = new Map();

  const instancesByVpc = [];
  const figures = [];
  for (const size of SIZES) {
    step(`growing to ${size} VPCs of ${PER_VPC} instances (load ${load()})`);
    const applies = [];
    const syncs = [];
    for (let v = instancesByVpc.length; v < size; v++) {
      routerAddresses.set(v, publicIps.next());
      instancesByVpc.push(instancesOf(v, PER_VPC, publicIps));
      const vpc = vpcOf(v, instancesByVpc[v]);
      const began = performance.now();
      await applyTopology(nb, [vpc], [vpcKey(vpc)]);
      const applied = performance.now();
      plug(hostPortName(vpc));
      for (const port of vpc.ports) plug(port.instanceId);
      syncHypervisors();
      applies.push(applied - began);
      syncs.push(performance.now() - began);
    }
    figures.push({ size, instances: size * PER_VPC, applies, syncs, ...measure(), load: load() });
    step(
      `  ${size} VPCs: NB ${figures.at(-1).nbTotal} rows, SB ${figures.at(-1).sbTotal}, ` +
        `logical flows ${figures.at(-1).sb.Logical_Flow ?? 0}, OpenFlow ${figures.at(-1).openflow}`,
    );
  }

  step(`one VPC grown by ${PER_VPC} instances (load ${load()})`);
  const before = figures.at(-1);
  const grown = [...instancesByVpc[0], ...instancesOf(0, 2 * PER_VPC, publicIps).slice(PER_VPC)];
  const vpc = vpcOf(0, grown);
  await applyTopology(nb, [vpc], [vpcKey(vpc)]);
  for (const port of vpc.ports.slice(PER_VPC)) plug(port.instanceId);
  syncHypervisors();
  const after = { ...measure(), load: load() };

  nb.close();
  await ovn.close();

  const [small, large] = figures.slice(-2);
  const perVpc = (pick) => (pick(large) - pick(small)) / (large.size - small.size);
  const perInstance = (pick) => (pick(after) - pick(before)) / PER_VPC;
  const round = (n) => (Math.abs(n) >= 10 ? Math.round(n).toString() : n.toFixed(1));

  const lines = [
    '### Last generated run',
    '',
    ...runHeader({
      loadAverage,
      command,
      npmScript: 'bench:ovn-vpc',
      generator: `${ovsVersion()}, the embedded daemons (userspace datapath)`,
      machineNote:
        ' Other sessions share this machine and its 2 cores (the load average at each size is in the table).',
    }),
    `Each VPC: ${PER_VPC} instances with the preset \`ssh-only\` and a public IP each, the host's port; every port bound on this chassis.`,
    '',
    '| VPCs | instances | NB rows | SB rows | logical flows | OpenFlow flows (integration bridge) | RSS MiB: ' +
      DAEMONS.map(([, label]) => label).join(' / ') +
      ' | apply p50 / max | apply → flows on this chassis p50 / max | 1-min load |',
    '|---|---|---|---|---|---|---|---|---|---|',
    ...figures.map(
      (f) =>
        `| ${f.size} | ${f.instances} | ${f.nbTotal} | ${f.sbTotal} | ${f.sb.Logical_Flow ?? 0} | ${f.openflow} | ` +
        `${DAEMONS.map(([name]) => mib(f.rss[name])).join(' / ')} | ` +
        `${ms(median(f.applies))} / ${ms(Math.max(...f.applies))} | ${ms(median(f.syncs))} / ${ms(Math.max(...f.syncs))} | ${f.load} |`,
    ),
    '',
    `Marginal cost: per VPC, the slope from ${small.size} to ${large.size} VPCs (of ${PER_VPC} instances, so it includes them); per instance, one VPC grown from ${PER_VPC} to ${2 * PER_VPC} instances (at ${large.size} VPCs), divided by ${PER_VPC}.`,
    '',
    '| what | per VPC | per instance |',
    '|---|---|---|',
    `| northbound rows | ${round(perVpc((f) => f.nbTotal))} | ${round(perInstance((f) => f.nbTotal))} |`,
    `| southbound rows | ${round(perVpc((f) => f.sbTotal))} | ${round(perInstance((f) => f.sbTotal))} |`,
    `| logical flows | ${round(perVpc((f) => f.sb.Logical_Flow ?? 0))} | ${round(perInstance((f) => f.sb.Logical_Flow ?? 0))} |`,
    `| OpenFlow flows on the integration bridge | ${round(perVpc((f) => f.openflow))} | ${round(perInstance((f) => f.openflow))} |`,
    ...DAEMONS.map(
      ([name, label]) =>
        `| RSS of ${label}, KiB | ${round(perVpc((f) => f.rss[name]))} | ${round(perInstance((f) => f.rss[name]))} |`,
    ),
    '',
    'By table (rows per VPC / per instance; tables that do not grow are left out):',
    '',
    '| database | table | per VPC | per instance |',
    '|---|---|---|---|',
    ...['nb', 'sb'].flatMap((db) =>
      Object.keys(large[db])
        .sort()
        .filter(
          (table) => perVpc((f) => f[db][table] ?? 0) !== 0 || perInstance((f) => f[db][table] ?? 0) !== 0,
        )
        .map(
          (table) =>
            `| ${db === 'nb' ? 'northbound' : 'southbound'} | ${table} | ${round(perVpc((f) => f[db][table] ?? 0))} | ${round(perInstance((f) => f[db][table] ?? 0))} |`,
        ),
    ),
    '',
  ];
  for (const line of lines) process.stdout.write(`${line}\n`);
  if (!values['no-write']) writeSection(SCRIPT, lines);

  /** Rows by table of both databases, OpenFlow flows and the daemons' RSS, now. */
  function measure() {
    const nbRows = rowsByTable(nbUrl, 'OVN_Northbound');
    const sbRows = rowsByTable(sbUrl, 'OVN_Southbound');
    const aggregate = tool('ovs-ofctl', ['dump-aggregate', bridge]);
    const openflow = Number(/flow_count=(\d+)/.exec(aggregate)?.[1] ?? Number.NaN);
    const rss = Object.fromEntries(DAEMONS.map(([name]) => [name, rssKib(pidOf(dir, name))]));
    const sum = (rows) => Object.values(rows).reduce((a, b) => a + b, 0);
    return { nb: nbRows, sb: sbRows, nbTotal: sum(nbRows), sbTotal: sum(sbRows), openflow, rss };
  }

  function rowsByTable(url, database) {
    const dump = tool('ovsdb-client', ['dump', '--format=json', url, database]);
    // One JSON text per table, a line each: its caption names the table, its data holds the rows.
    const tables = dump
      .split('\n')
      .filter((line) => line.trim() !== '')
      .map((line) => JSON.parse(line));
    return Object.fromEntries(
      tables.map((table) => [/(\S+) table/.exec(table.caption)?.[1] ?? table.caption, table.data.length]),
    );
  }
}

/** The pid of a daemon of this run: its pidfile's, if that process runs with this directory on its command line. */
function pidOf(dir, name) {
  const file = path.join(dir, `${name}.pid`);
  if (!existsSync(file)) return null;
  const pid = Number(readFileSync(file, 'utf8').trim());
  if (!Number.isInteger(pid) || pid <= 0) return null;
  try {
    // A stale pidfile may name a process that is someone else's now.
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(dir) ? pid : null;
  } catch {
    return null;
  }
}

function rssKib(pid) {
  if (pid === null) return Number.NaN;
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? Number.NaN);
}

function ovsVersion() {
  const ovs = /\(Open vSwitch\) (\S+)/.exec(
    spawnSync('ovs-vswitchd', ['--version'], { encoding: 'utf8' }).stdout ?? '',
  );
  const ovnOut = spawnSync('ovn-northd', ['--version'], { encoding: 'utf8' }).stdout ?? '';
  const ovnVersion = /ovn-northd (\S+)/.exec(ovnOut);
  return `Open vSwitch ${ovs?.[1] ?? 'unknown'}, OVN ${ovnVersion?.[1] ?? 'unknown'}`;
}

main().catch((error) => fail(error.stack ?? String(error)));
