/**
 * The firewall decides packets (issue 31 item 4), on real OVN: the embedded daemons in a temporary
 * directory, one VPC (10.10.0.0/16), and network namespaces standing in for instances, plugged into the
 * integration bridge as their logical ports:
 *   - target (10.10.0.10): the instance whose firewall is compiled into ACLs (src/drivers/ovn/acls.ts);
 *   - inside (10.10.0.20): another port of the VPC, with no firewall of its own;
 *   - outside (192.0.2.7): a port on the same switch with an address outside the private block. It
 *     stands for traffic from the internet: the target's ACLs are in the to-lport stage of its own port,
 *     which sees the packet's source address and the target port whether the packet came through the
 *     VPC's router (a public IP's NAT, not built yet) or straight off the switch, so the verdict at the
 *     target is the same. The probes carry no firewall, so a packet's fate is the target's verdict alone.
 * For random rule sets (user rules with random targets, enabled or not, and a preset) and random probes
 * (tcp to a listener, udp to an echo, ping; inbound from inside or outside, outbound to either), the
 * ACLs are applied, the suite waits until every chassis has installed them (`ovn-nbctl --wait=hv
 * sync`), and each probe is answered exactly when `decide` — the function `/network/check` answers
 * with — says allow. Replay a failure with OVN_FIREWALL_SEED=<seed>.
 *
 * Nothing is routed in the root namespace: all traffic is between the suite's own namespaces.
 */
import { type ChildProcessWithoutNullStreams, execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { promisify } from 'node:util';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { aclInputsFor } from '../src/drivers/ovn/acls.js';
import { EmbeddedOvn } from '../src/drivers/ovn/daemons.js';
import { Northbound } from '../src/drivers/ovn/northbound.js';
import { applyTopology, type DesiredVpc, vpcKey } from '../src/drivers/ovn/topology.js';
import { parseIp } from '../src/platform/domain/cidrs.js';
import { FIREWALL_PRESETS } from '../src/resources/instances/rules.js';
import {
  decide,
  type FirewallPreset,
  type FirewallRule,
  type FirewallTargets,
  PACKET_PROTOCOLS,
  type PacketProtocol,
  selects,
} from '../src/resources/networking/firewall-rules.js';
import { waitFor } from './helpers/common.js';
import { denyEverything, firewallRule } from './helpers/firewall.js';
import {
  CAN_RUN_OVN,
  type Guest,
  GuestNamespaces,
  oneOvnSuiteAtATime,
  processesNaming,
  sh,
} from './helpers/ovn.js';

const PRIVATE = '10.10.0.0/16';
const ACCOUNT = 'acct_ovnfwtest';
const TARGET = { instanceId: 'ins_fwtarget', mac: '0a:00:0a:00:00:0a', ip: '10.10.0.10', hostname: 'target' };
const INSIDE = { instanceId: 'ins_fwinside', mac: '0a:00:0a:00:00:14', ip: '10.10.0.20', hostname: 'inside' };
const OUTSIDE = {
  instanceId: 'ins_fwoutside',
  mac: '0a:00:c0:00:02:07',
  ip: '192.0.2.7',
  hostname: 'outside',
};
/** Ports every namespace listens on (tcp and a udp echo), and the ones probes try. */
const PROBE_PORTS = [22, 80, 81, 443, 5000, 5005, 5010, 5011];

interface Target {
  id: string;
  account_id: string;
  region: string;
  tags: Record<string, string>;
  firewall_preset: FirewallPreset;
}

function vpcWith(target: Target, rules: readonly FirewallRule[]): DesiredVpc {
  return {
    accountId: target.account_id,
    region: target.region,
    cidr: PRIVATE,
    router: { ip: '10.10.0.1', mac: '0a:58:0a:0a:00:01' },
    ports: [{ ...TARGET, firewall: aclInputsFor(target, rules, PRIVATE) }, INSIDE, OUTSIDE],
  };
}

/**
 * What runs in each namespace (started under `ip netns exec`, so its sockets and children are the
 * namespace's): a tcp listener and a udp echo on every probe port, and probes on request. Requests
 * and answers are JSON lines on stdin and stdout. Written to a file as source, so it uses no import.
 */
function namespaceAgent(ports: number[]): void {
  const net = process.getBuiltinModule('node:net');
  const dgram = process.getBuiltinModule('node:dgram');
  const { spawn } = process.getBuiltinModule('node:child_process');
  const lines = process.getBuiltinModule('node:readline');
  const send = (message: object) => process.stdout.write(`${JSON.stringify(message)}\n`);
  let listening = 0;
  const ready = () => {
    listening += 1;
    if (listening === ports.length * 2) send({ ready: true });
  };
  for (const port of ports) {
    net
      .createServer((socket) => {
        socket.on('error', () => {});
        socket.end();
      })
      .listen(port, '0.0.0.0', ready);
    const echo = dgram.createSocket('udp4');
    echo.on('message', (message, from) => echo.send(message, from.port, from.address));
    echo.bind(port, '0.0.0.0', ready);
  }
  /** Whether one tcp connect, udp datagram or ping is answered within timeoutMs. */
  const attempt = (protocol: string, host: string, port: number, timeoutMs: number) =>
    new Promise<boolean>((resolve) => {
      let finish: (answered: boolean) => void = () => {};
      const timer = setTimeout(() => finish(false), timeoutMs);
      if (protocol === 'tcp') {
        const socket = net.connect({ host, port });
        finish = (answered) => {
          clearTimeout(timer);
          socket.destroy();
          resolve(answered);
        };
        socket.on('connect', () => finish(true));
        socket.on('error', () => finish(false));
      } else if (protocol === 'udp') {
        const socket = dgram.createSocket('udp4');
        finish = (answered) => {
          clearTimeout(timer);
          socket.close();
          resolve(answered);
        };
        socket.on('message', () => finish(true));
        socket.on('error', () => finish(false));
        socket.send('probe', port, host);
      } else {
        const ping = spawn('ping', ['-n', '-c', '1', '-W', (timeoutMs / 1000).toFixed(1), host], {
          stdio: 'ignore',
        });
        finish = (answered) => {
          clearTimeout(timer);
          ping.kill();
          resolve(answered);
        };
        ping.on('exit', (code) => finish(code === 0));
      }
    });
  lines.createInterface({ input: process.stdin }).on('line', (line) => {
    const request = JSON.parse(line);
    if (request.op === 'probe') {
      void attempt(request.protocol, request.host, request.port, request.timeoutMs).then((answered) =>
        send({ id: request.id, answered }),
      );
      return;
    }
    // watch: an attempt every everyMs until `settle` attempts in a row (in the order sent) have the fate
    // wanted; answers when the first of them was sent (epoch ms), or null at the deadline.
    const attempts: { sentAt: number; answered?: boolean }[] = [];
    const deadline = Date.now() + request.deadlineMs;
    let done = false;
    const settle = () => {
      let run = 0;
      for (let i = 0; i < attempts.length && attempts[i]!.answered !== undefined; i++) {
        run = attempts[i]!.answered === request.want ? run + 1 : 0;
        if (run >= request.settle) {
          done = true;
          send({ id: request.id, at: attempts[i - run + 1]!.sentAt });
          return;
        }
      }
    };
    const next = () => {
      if (done) return;
      if (Date.now() > deadline) {
        done = true;
        send({ id: request.id, at: null });
        return;
      }
      const entry: { sentAt: number; answered?: boolean } = { sentAt: Date.now() };
      attempts.push(entry);
      void attempt(request.protocol, request.host, request.port, request.timeoutMs).then((answered) => {
        entry.answered = answered;
        if (!done) settle();
      });
      setTimeout(next, request.everyMs);
    };
    next();
  });
}

class Agent {
  private readonly child: ChildProcessWithoutNullStreams;
  private readonly waiting = new Map<number, (answer: Record<string, unknown>) => void>();
  private nextId = 1;
  readonly ready: Promise<void>;

  constructor(
    readonly guest: Guest,
    script: string,
  ) {
    this.child = spawn('ip', ['netns', 'exec', guest.namespace, process.execPath, script]);
    let markReady: () => void = () => {};
    this.ready = new Promise((resolve) => {
      markReady = resolve;
    });
    readline.createInterface({ input: this.child.stdout }).on('line', (line) => {
      const answer = JSON.parse(line) as Record<string, unknown>;
      if (answer.ready) markReady();
      const resolve = this.waiting.get(answer.id as number);
      this.waiting.delete(answer.id as number);
      resolve?.(answer);
    });
  }

  private request(body: Record<string, unknown>): Promise<Record<string, unknown>> {
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.waiting.set(id, resolve);
      this.child.stdin.write(`${JSON.stringify({ id, ...body })}\n`);
    });
  }

  async answered(protocol: PacketProtocol, host: string, port: number | null, timeoutMs: number) {
    const answer = await this.request({ op: 'probe', protocol, host, port, timeoutMs });
    return answer.answered as boolean;
  }

  /** When (epoch ms) the fate of tcp to host:port became `want` for good; null if not by the deadline. */
  async flipped(host: string, port: number, want: boolean, deadlineMs: number): Promise<number | null> {
    const answer = await this.request({
      op: 'watch',
      protocol: 'tcp',
      host,
      port,
      want,
      everyMs: 20,
      timeoutMs: 400,
      settle: 5,
      deadlineMs,
    });
    return answer.at as number | null;
  }

  close(): void {
    this.child.kill('SIGKILL');
  }
}

const run = promisify(execFile);

describe.runIf(CAN_RUN_OVN)('the firewall on OVN, with real packets', () => {
  oneOvnSuiteAtATime();
  let dir: string;
  let ovn: EmbeddedOvn;
  let nb: Northbound;
  let guests: GuestNamespaces;
  const agents: Record<'target' | 'inside' | 'outside', Agent> = {} as never;
  const target: Target = {
    id: TARGET.instanceId,
    account_id: ACCOUNT,
    region: 'us-east-1',
    tags: { role: 'web' },
    firewall_preset: 'ssh-only',
  };

  /**
   * Applies the firewall and waits until every chassis has the flows (OVN's own barrier), then until
   * ovs-vswitchd has revalidated the datapath's cached flows against them: a cached flow wildcards what
   * the old pipeline did not look at, so a new connection can take the old decision until then.
   */
  async function applyFirewall(preset: FirewallPreset, rules: readonly FirewallRule[]): Promise<void> {
    await applyTopology(
      nb,
      [vpcWith({ ...target, firewall_preset: preset }, rules)],
      [vpcKey(vpcWith(target, []))],
    );
    await run('ovn-nbctl', [`--db=${ovn.endpoints.nbUrl}`, '--wait=hv', '--timeout=30', 'sync'], {
      env: ovn.endpoints.env,
    });
    await run('ovs-appctl', [`--target=${path.join(dir, 'ovn', 'ovs-vswitchd.ctl')}`, 'revalidator/wait'], {
      env: ovn.endpoints.env,
    });
  }

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-ovn-firewall-'));
    ovn = await EmbeddedOvn.start({ dir: path.join(dir, 'ovn'), chassis: 'ovn-firewall-test' });
    nb = new Northbound(ovn.endpoints.nbUrl);
    guests = new GuestNamespaces(ovn.endpoints);
    const plugged = {
      target: guests.plug(TARGET.instanceId, TARGET.mac, `${TARGET.ip}/16`),
      inside: guests.plug(INSIDE.instanceId, INSIDE.mac, `${INSIDE.ip}/16`),
      outside: guests.plug(OUTSIDE.instanceId, OUTSIDE.mac, `${OUTSIDE.ip}/24`),
    };
    // The outside address and the private block reach each other on the switch itself.
    const route = (guest: Guest, to: string) =>
      sh('ip', ['netns', 'exec', guest.namespace, 'ip', 'route', 'add', to, 'dev', 'eth0']);
    route(plugged.target, '192.0.2.0/24');
    route(plugged.outside, PRIVATE);
    const script = path.join(dir, 'namespace-agent.mjs');
    writeFileSync(script, `(${namespaceAgent.toString()})(${JSON.stringify(PROBE_PORTS)});\n`);
    for (const [name, guest] of Object.entries(plugged)) {
      agents[name as keyof typeof agents] = new Agent(guest, script);
    }
    await Promise.all(Object.values(agents).map((agent) => agent.ready));
    // The network first, with no firewall at all: every probe port answers from both sides.
    await applyTopology(nb, [{ ...vpcWith(target, []), ports: [TARGET, INSIDE, OUTSIDE] }]);
    // ovn-controller binds the ports and installs their flows after the apply; on two busy cores (other
    // suites boot VMs beside this one) that has taken over 30 s.
    for (const from of [agents.inside, agents.outside]) {
      await waitFor(
        'the target answering on the switch',
        async () => (await from.answered('tcp', TARGET.ip, 80, 1000)) || undefined,
        {
          timeoutMs: 90_000,
          intervalMs: 100,
          lastSeen: () => sh('ovs-vsctl', [`--db=${ovn.endpoints.ovsDb}`, 'show'], ovn.endpoints.env),
        },
      );
    }
  }, 180_000);

  afterAll(async () => {
    for (const agent of Object.values(agents)) agent.close();
    guests?.remove();
    nb?.close();
    await ovn?.close();
    if (dir) {
      await waitFor('no process of the suite left', () =>
        processesNaming(dir).length === 0 ? true : undefined,
      );
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("keeps ARP and OVN's DHCP working under a firewall that denies everything", async () => {
    await applyFirewall('none', denyEverything(ACCOUNT));
    // udhcpc runs the script with the lease in its environment; the script's output is udhcpc's.
    const script = path.join(dir, 'dhcp-script');
    writeFileSync(script, '#!/bin/sh\n[ "$1" = bound ] && echo "leased $ip"\nexit 0\n', { mode: 0o755 });
    const udhcpc = ['udhcpc', '-i', 'eth0', '-n', '-q', '-t', '2', '-T', '1', '-s', script];
    const leased = await waitFor(
      'a DHCP lease for the target',
      () => {
        try {
          return /leased (\S+)/.exec(
            sh('ip', ['netns', 'exec', agents.target.guest.namespace, ...udhcpc]),
          )?.[1];
        } catch {
          return undefined;
        }
      },
      { timeoutMs: 20_000, intervalMs: 200 },
    );
    expect(leased).toBe(TARGET.ip);
    // IP is denied both ways, yet ARP still resolves both ways: from fresh neighbour tables, each side
    // learns the other's MAC while its packet is dropped.
    const inside = agents.inside.guest.namespace;
    const targetSide = agents.target.guest.namespace;
    const neighbour = (namespace: string, address: string) =>
      sh('ip', ['netns', 'exec', namespace, 'ip', 'neigh', 'show', address]);
    for (const namespace of [inside, targetSide]) {
      sh('ip', ['netns', 'exec', namespace, 'ip', 'neigh', 'flush', 'dev', 'eth0']);
    }
    expect(await agents.inside.answered('tcp', TARGET.ip, 80, 1500)).toBe(false);
    expect(await agents.target.answered('icmp', INSIDE.ip, null, 1500)).toBe(false);
    expect(neighbour(inside, TARGET.ip)).toContain(TARGET.mac);
    expect(neighbour(targetSide, INSIDE.ip)).toContain(INSIDE.mac);
  });

  it('gives every probe the fate /network/check says, for random rule sets', async () => {
    const seed = Number(process.env.OVN_FIREWALL_SEED ?? Date.now() % 2 ** 31);
    await fc.assert(
      fc.asyncProperty(
        rulesArbitrary,
        fc.constantFrom(...FIREWALL_PRESETS),
        probesArbitrary,
        async (rules, preset, probes) => {
          await applyFirewall(preset, rules);
          const firewall = {
            rules: rules.filter((rule) => selects(rule, target)),
            preset,
            privateNetwork: PRIVATE,
          };
          const outcomes = await Promise.all(
            probes.map(async (probe) => {
              const remote = probe.remote === 'inside' ? INSIDE : OUTSIDE;
              const verdict = decide(firewall, {
                direction: probe.direction,
                protocol: probe.protocol,
                port: probe.port,
                address: parseIp(remote.ip)!,
              });
              const [from, to] =
                probe.direction === 'inbound'
                  ? [agents[probe.remote], TARGET.ip]
                  : [agents.target, remote.ip];
              const answered = await from.answered(probe.protocol, to, probe.port, 2500);
              return { probe, verdict: verdict.verdict, rule: verdict.matched_rule.name, answered };
            }),
          );
          const wrong = outcomes.filter((o) => o.answered !== (o.verdict === 'allow'));
          if (wrong.length > 0) {
            throw new Error(
              `packets whose fate is not the verdict: ${JSON.stringify(wrong)} (preset ${preset}, rules ${JSON.stringify(rules)})`,
            );
          }
        },
      ),
      { numRuns: 20, seed },
    );
  }, 600_000);

  it('takes a rule change to the data path: rule change → fate flipped, p50 and p99', async () => {
    const open: FirewallRule[] = [
      firewallRule({
        direction: 'inbound',
        action: 'allow',
        protocol: 'tcp',
        ports: '80',
        remote: ['192.0.2.7/32'],
        accountId: ACCOUNT,
      }),
    ];
    await applyFirewall('none', []);
    expect(await agents.outside.answered('tcp', TARGET.ip, 80, 1500)).toBe(false);
    const latencies: { opened: boolean; ms: number }[] = [];
    for (let change = 0; change < 20; change++) {
      const opening = change % 2 === 0;
      const watching = agents.outside.flipped(TARGET.ip, 80, opening, 15_000);
      const changedAt = Date.now();
      await applyTopology(
        nb,
        [vpcWith({ ...target, firewall_preset: 'none' }, opening ? open : [])],
        [vpcKey(vpcWith(target, []))],
      );
      const at = await watching;
      expect(
        at,
        `change ${change} (${opening ? 'opening' : 'closing'}) reached the data path`,
      ).not.toBeNull();
      latencies.push({ opened: opening, ms: Math.max(0, at! - changedAt) });
    }
    const percentile = (values: number[], p: number) => {
      const sorted = [...values].sort((a, b) => a - b);
      return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
    };
    const all = latencies.map((l) => l.ms);
    const report = {
      changes: all.length,
      p50: percentile(all, 50),
      p99: percentile(all, 99),
      opening: {
        p50: percentile(
          latencies.filter((l) => l.opened).map((l) => l.ms),
          50,
        ),
        max: Math.max(...latencies.filter((l) => l.opened).map((l) => l.ms)),
      },
      closing: {
        p50: percentile(
          latencies.filter((l) => !l.opened).map((l) => l.ms),
          50,
        ),
        max: Math.max(...latencies.filter((l) => !l.opened).map((l) => l.ms)),
      },
      loadAverage: os.loadavg()[0],
    };
    console.log(`rule change → data path (ms): ${JSON.stringify(report)}`);
    // Issue 31: a change reaches the data path within 2 s (the store-to-reconcile part comes on top).
    expect(report.p50).toBeLessThan(2000);
  }, 600_000);
});

/** Blocks around the probes' addresses (and some that hold neither), so rules hit and miss them. */
const BLOCKS = [
  '10.10.0.20/32',
  '10.10.0.0/24',
  '10.10.0.0/16',
  '10.0.0.0/8',
  '192.0.2.7/32',
  '192.0.2.0/24',
  '198.51.100.0/24',
  '0.0.0.0/0',
  '::/0',
  '2001:db8::/32',
];
const PORTS = ['22', '80', '81', '5000-5010', '5005', '1-65535', '443'];

const rulesArbitrary = fc.array(
  fc
    .record({
      direction: fc.constantFrom('inbound' as const, 'outbound' as const),
      action: fc.constantFrom('allow' as const, 'deny' as const),
      protocol: fc.constantFrom('tcp' as const, 'udp' as const, 'icmp' as const, 'all' as const),
      ports: fc.constantFrom(...PORTS),
      remote: fc.uniqueArray(fc.constantFrom(...BLOCKS), { minLength: 1, maxLength: 3 }),
      priority: fc.integer({ min: 1, max: 5 }),
      enabled: fc.boolean(),
      targets: fc.constantFrom<FirewallTargets>(
        { instance_ids: [], tags: {} },
        { instance_ids: [TARGET.instanceId], tags: {} },
        { instance_ids: [], tags: { role: 'web' } },
        { instance_ids: [], tags: { role: 'db' } },
      ),
    })
    .map((fields) => firewallRule({ ...fields, accountId: ACCOUNT })),
  { maxLength: 4 },
);

const probesArbitrary = fc.array(
  fc
    .record({
      direction: fc.constantFrom('inbound' as const, 'outbound' as const),
      remote: fc.constantFrom('inside' as const, 'outside' as const),
      protocol: fc.constantFrom(...PACKET_PROTOCOLS),
      port: fc.constantFrom(...PROBE_PORTS),
    })
    .map((probe) => ({ ...probe, port: probe.protocol === 'icmp' ? null : probe.port })),
  { minLength: 3, maxLength: 5 },
);
