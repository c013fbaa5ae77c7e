/**
 * Public IPs that answer (issue 31, item 3) on real OVN: the embedded daemons in a temporary directory,
 * an "internet" namespace holding the upstream router's address (the pool's first) on one end of a veth
 * whose other end is the uplink Nimbus plugs into its provider bridge, and a VPC whose instances are
 * namespaces plugged into the integration bridge. Real packets show: a TCP connection from the internet
 * side to an instance's public IP reaches that instance's listener; the instance reaches the internet
 * side as its public IP; the instance's port ACLs decide what reaches its public IP, by the client's own
 * address (NAT on the router, ACLs on the port); the VPC's snat lets an instance without a public IP out
 * as the router's address; a public IP moved to another instance answers as that one within 2 s; and one
 * taken away stops answering.
 *
 * Nothing is routed in the root namespace: the uplink there has no address, and all traffic is between
 * the suite's own namespaces.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { aclInputsFor } from '../src/drivers/ovn/acls.js';
import { EmbeddedOvn } from '../src/drivers/ovn/daemons.js';
import { Northbound } from '../src/drivers/ovn/northbound.js';
import { SnatCounters } from '../src/drivers/ovn/snat-transfer.js';
import { type ApplyResult, applyTopology, type DesiredVpc, vpcKey } from '../src/drivers/ovn/topology.js';
import { TransferCounters } from '../src/drivers/ovn/transfer-flows.js';
import {
  defaultPublicGateway,
  plugUplink,
  providerBridgeName,
  unplugUplink,
  type VpcPublicSide,
} from '../src/drivers/ovn/uplink.js';
import type { FirewallRule } from '../src/resources/networking/firewall-rules.js';
import { waitFor } from './helpers/common.js';
import { firewallRule } from './helpers/firewall.js';
import {
  askTcp,
  CAN_RUN_OVN,
  fetchTcp,
  type Guest,
  GuestNamespaces,
  InternetNamespace,
  oneOvnSuiteAtATime,
  processesNaming,
  sendTcp,
  serveTcp,
  sh,
  sinkTcp,
  sourceTcp,
  succeeds,
} from './helpers/ovn.js';

const CHASSIS = 'ovn-public-ip-test';
const POOL = '203.0.113.0/24';
const GATEWAY = defaultPublicGateway(POOL);
const PUBLIC_IP = '203.0.113.10';
const PORT = 8080;
const vpc: DesiredVpc = {
  accountId: 'acct_ovnpublic',
  region: 'us-east-1',
  cidr: '10.10.0.0/16',
  router: { ip: '10.10.0.1', mac: '0a:58:0a:0a:00:01' },
  ports: [
    { instanceId: 'ins_ovnpub1', mac: '0a:00:0c:00:00:11', ip: '10.10.0.11', hostname: 'pub-one' },
    { instanceId: 'ins_ovnpub2', mac: '0a:00:0c:00:00:12', ip: '10.10.0.12', hostname: 'pub-two' },
  ],
};
const [one, two] = vpc.ports as [DesiredVpc['ports'][0], DesiredVpc['ports'][0]];
const publicSide = (nats: VpcPublicSide['nats']): DesiredVpc => ({
  ...vpc,
  public: {
    pool: POOL,
    gateway: GATEWAY,
    router: { ip: '203.0.113.2', mac: '0a:58:cb:00:71:02' },
    chassis: CHASSIS,
    nats,
  },
});

/** Another account on the same link: the same private block, and its instance holds one's private IP. */
const other: DesiredVpc = {
  accountId: 'acct_ovnpublicb',
  region: 'us-east-1',
  cidr: '10.10.0.0/16',
  router: { ip: '10.10.0.1', mac: '0a:58:0a:0a:00:02' },
  ports: [{ instanceId: 'ins_ovnpubb1', mac: '0a:00:0d:00:00:11', ip: one.ip, hostname: 'other-one' }],
};
const OTHER_PUBLIC_IP = '203.0.113.20';
const SINK_PORT = 9090;
const SOURCE_PORT = 9091;
const MB = 1024 * 1024;

// ovn-controller's first binding of ports on a loaded machine takes most of the time (seen: 30 s).
describe.runIf(CAN_RUN_OVN)('public IPs on OVN with real packets', { timeout: 90_000 }, () => {
  oneOvnSuiteAtATime();
  let dir: string;
  let ovn: EmbeddedOvn;
  let nb: Northbound;
  let guests: GuestNamespaces;
  let internet: InternetNamespace;
  const listeners: { stop: () => void }[] = [];
  const g: Record<string, Guest> = {};
  /** One VPC's apply, as its reconcile job does it: the other VPC's rows are left alone. */
  const apply = async (desired: DesiredVpc): Promise<ApplyResult> => {
    const result = await applyTopology(nb, [desired], [vpcKey(desired)]);
    // Probes start once the chassis has the change in its flows, not merely in the database.
    await nb.syncHypervisors();
    return result;
  };

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-ovn-public-'));
    ovn = await EmbeddedOvn.start({ dir: path.join(dir, 'ovn'), chassis: CHASSIS });
    nb = new Northbound(ovn.endpoints.nbUrl);
    guests = new GuestNamespaces(ovn.endpoints);
    internet = new InternetNamespace(`${GATEWAY}/24`);
    await plugUplink(ovn.endpoints, internet.uplink);
    // Plugging again (a restarted server) changes nothing.
    const { bridge } = await plugUplink(ovn.endpoints, internet.uplink);
    const vsctl = (...args: string[]) =>
      sh('ovs-vsctl', [`--db=${ovn.endpoints.ovsDb}`, ...args], ovn.endpoints.env).trim();
    expect(vsctl('list-ports', bridge)).toBe(internet.uplink);
    expect(vsctl('get', 'Open_vSwitch', '.', 'external_ids:ovn-bridge-mappings')).toBe(
      `"nimbus-public:${bridge}"`,
    );
    for (const [name, port] of [
      ['one', one],
      ['two', two],
    ] as const) {
      g[name] = guests.plug(port.instanceId, port.mac, `${port.ip}/16`);
      sh('ip', ['netns', 'exec', g[name]!.namespace, 'ip', 'route', 'add', 'default', 'via', vpc.router.ip]);
      listeners.push(await serveTcp(g[name]!.namespace, PORT, port.hostname));
    }
    listeners.push(await serveTcp(internet.namespace, PORT, 'internet'));
  });

  afterAll(async () => {
    for (const listener of listeners) listener.stop();
    guests?.remove();
    if (ovn && internet) await unplugUplink(ovn.endpoints, internet.uplink).catch(() => {});
    internet?.remove();
    nb?.close();
    await ovn?.close();
    if (ovn)
      expect(succeeds('ip', ['link', 'show', providerBridgeName(ovn.endpoints.integrationBridge)])).toBe(
        false,
      );
    if (dir) {
      expect(processesNaming(dir)).toEqual([]);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("carries a connection from the internet side to the instance's public IP, and the instance out as it", async () => {
    await apply(publicSide([{ instanceId: one.instanceId, publicIp: PUBLIC_IP, privateIp: one.ip }]));
    // ovn-controller binds the ports and the gateway port on the chassis shortly after the apply.
    const answer = await waitFor(
      'an answer on the public IP',
      () => askTcp(internet.namespace, PUBLIC_IP, PORT) ?? undefined,
      {
        timeoutMs: 60_000,
        intervalMs: 200,
      },
    );
    // The listener sees the caller's own address: the NAT is of the destination only on the way in.
    expect(answer).toBe(`pub-one ${GATEWAY}`);
    expect(askTcp(g.one!.namespace, GATEWAY, PORT)).toBe(`internet ${PUBLIC_IP}`);
    expect(succeeds('ip', ['netns', 'exec', g.one!.namespace, 'ping', '-c', '1', '-W', '1', GATEWAY])).toBe(
      true,
    );
    // An instance without a public IP has no way out.
    expect(askTcp(g.two!.namespace, GATEWAY, PORT)).toBeNull();
    // All of it went between the suite's namespaces: the host has no way onto the link.
    expect(sh('ip', ['-4', 'route', 'show', 'root', POOL]).trim()).toBe('');
    expect(sh('ip', ['-4', 'addr', 'show', 'dev', internet.uplink]).includes('inet ')).toBe(false);
  });

  it('counts the bytes between the internet side and a public IP on the provider bridge, and no private byte', async () => {
    const bridge = providerBridgeName(ovn.endpoints.integrationBridge);
    const counters = new TransferCounters(ovn.endpoints, bridge, nb);
    for (const namespace of [internet.namespace, g.one!.namespace, g.two!.namespace]) {
      listeners.push(await sinkTcp(namespace, SINK_PORT));
    }
    const first = await counters.read([one.instanceId, two.instanceId]);
    // Only an instance with a public IP has a counter.
    expect([...first.keys()]).toEqual([one.instanceId]);
    const base = first.get(one.instanceId)!;
    const OUT = 3 * MB;
    const IN = 2 * MB;
    sendTcp(g.one!.namespace, GATEWAY, SINK_PORT, OUT);
    sendTcp(internet.namespace, PUBLIC_IP, SINK_PORT, IN);
    // Private, instance to instance: crosses no public link.
    sendTcp(g.one!.namespace, two.ip, SINK_PORT, 4 * MB);
    const counted = await waitFor(
      'the counters to show the bytes',
      async () => {
        const now = (await counters.read([one.instanceId])).get(one.instanceId);
        return now && now.bytesOut - base.bytesOut >= OUT && now.bytesIn - base.bytesIn >= IN
          ? now
          : undefined;
      },
      { timeoutMs: 10_000, intervalMs: 200 },
    );
    // Frames with their headers, and each way's acknowledgements of the other (a tenth of it all at most),
    // but not the 4 MB sent privately.
    const overhead = (OUT + IN) / 10;
    expect(counted.bytesOut - base.bytesOut).toBeLessThan(OUT + overhead);
    expect(counted.bytesIn - base.bytesIn).toBeLessThan(IN + overhead);
    expect(counted.epoch).toBe(base.epoch);
    expect(counted.epoch.startsWith(`${PUBLIC_IP}/`)).toBe(true);
    // The bridge's flows gone (as when ovs-vswitchd starts again): the next reading makes a new pair, another
    // life of the counter, from zero; and the public IP answers again.
    sh('ovs-ofctl', ['del-flows', bridge], ovn.endpoints.env);
    const after = await waitFor(
      'a reading on a new pair',
      async () => (await counters.read([one.instanceId])).get(one.instanceId),
      { timeoutMs: 5000, intervalMs: 200 },
    );
    expect(after.epoch).not.toBe(base.epoch);
    expect(after.bytesOut).toBeLessThan(OUT);
    expect(askTcp(internet.namespace, PUBLIC_IP, PORT)).toBe(`pub-one ${GATEWAY}`);
  });

  it("lets through a public IP only what the instance's port ACLs allow, judged by the client's own address", async () => {
    const nat = [{ instanceId: one.instanceId, publicIp: PUBLIC_IP, privateIp: one.ip }];
    const instance = {
      id: one.instanceId,
      account_id: vpc.accountId,
      region: vpc.region,
      tags: {},
      firewall_preset: 'web',
    };
    /** The public side with `one`'s firewall: the web preset (22, 80, 443) and `rules`. */
    const guarded = (rules: FirewallRule[]): DesiredVpc => {
      const side = publicSide(nat);
      return {
        ...side,
        ports: side.ports.map((port) =>
          port.instanceId === one.instanceId
            ? { ...port, firewall: aclInputsFor(instance, rules, vpc.cidr) }
            : port,
        ),
      };
    };
    const answers = (expected: string | null) =>
      waitFor(
        `the public IP answering ${expected}`,
        () => (askTcp(internet.namespace, PUBLIC_IP, PORT) === expected ? true : undefined),
        { timeoutMs: 10_000, intervalMs: 100 },
      );
    // The NAT is on the router, the ACLs on the port: the port sees the translated packet and drops it.
    await apply(guarded([]));
    await answers(null);
    const opening = (remote: string) =>
      firewallRule({
        direction: 'inbound',
        action: 'allow',
        protocol: 'tcp',
        ports: String(PORT),
        remote: [remote],
        accountId: vpc.accountId,
      });
    // Opened for the internet side's own address: the source is the client's, not the router's.
    await apply(guarded([opening(`${GATEWAY}/32`)]));
    await answers(`pub-one ${GATEWAY}`);
    await apply(guarded([opening('198.51.100.0/24')]));
    await answers(null);
    await apply(publicSide(nat));
    await answers(`pub-one ${GATEWAY}`);
  });

  it("lets an instance without a public IP out as its router's address, with the VPC's snat", async () => {
    const nat = [{ instanceId: one.instanceId, publicIp: PUBLIC_IP, privateIp: one.ip }];
    const side = publicSide(nat);
    await apply({ ...side, public: { ...side.public!, snatBlock: vpc.cidr } });
    const routerIp = side.public!.router.ip;
    await waitFor(
      'two out as the router',
      () => (askTcp(g.two!.namespace, GATEWAY, PORT) === `internet ${routerIp}` ? true : undefined),
      { timeoutMs: 10_000, intervalMs: 100 },
    );
    // The instance's own NAT is the more specific: it still goes out as its public IP.
    expect(askTcp(g.one!.namespace, GATEWAY, PORT)).toBe(`internet ${PUBLIC_IP}`);
    await apply(side);
    await waitFor(
      'two without a way out again',
      () => (askTcp(g.two!.namespace, GATEWAY, PORT) === null ? true : undefined),
      { timeoutMs: 10_000, intervalMs: 100 },
    );
  });

  it("counts an instance's bytes through its router's snat on its router policies, no private byte, and anew after flows are installed again", async () => {
    const nat = [{ instanceId: one.instanceId, publicIp: PUBLIC_IP, privateIp: one.ip }];
    const side = publicSide(nat);
    await apply({ ...side, public: { ...side.public!, snatBlock: vpc.cidr } });
    // Only the instance without a public IP has policies (the other is counted on the provider bridge).
    const policies = await nb.select('Logical_Router_Policy', [], ['priority', 'match', 'action']);
    expect(policies.map((p) => `${p.priority} ${p.action} ${p.match}`).sort()).toEqual([
      `900 allow inport == "${vpcKey(vpc)}-lrp" && ip4.src == ${two.ip}`,
      `900 allow inport == "${vpcKey(vpc)}-public-lrp" && ip4.dst == ${two.ip}`,
      `910 allow ip4.src == {${vpc.cidr}, 169.254.0.0/16} && ip4.dst == {${vpc.cidr}, 169.254.0.0/16}`,
    ]);
    const routerIp = side.public!.router.ip;
    await waitFor(
      'two out as the router',
      () => (askTcp(g.two!.namespace, GATEWAY, PORT) === `internet ${routerIp}` ? true : undefined),
      { timeoutMs: 10_000, intervalMs: 100 },
    );
    // Forwarding as before: one still goes out as its public IP, and the instances reach each other.
    expect(askTcp(g.one!.namespace, GATEWAY, PORT)).toBe(`internet ${PUBLIC_IP}`);
    expect(askTcp(g.two!.namespace, one.ip, PORT)).toBe(`pub-one ${two.ip}`);
    const counters = new SnatCounters(ovn.endpoints, nb);
    const read = () => counters.read([one.instanceId, two.instanceId]);
    const base = await waitFor('a counter for two', async () => (await read()).get(two.instanceId), {
      timeoutMs: 10_000,
      intervalMs: 200,
    });
    expect([...(await read()).keys()]).toEqual([two.instanceId]);
    expect(base.epoch.startsWith(`snat:${two.ip}/`)).toBe(true);
    const OUT = 3 * MB;
    const IN = 2 * MB;
    listeners.push(await sourceTcp(internet.namespace, SOURCE_PORT, IN));
    sendTcp(g.two!.namespace, GATEWAY, SINK_PORT, OUT);
    expect(fetchTcp(g.two!.namespace, GATEWAY, SOURCE_PORT)).toBe(IN);
    // Private, instance to instance, both ways: counts nothing.
    sendTcp(g.two!.namespace, one.ip, SINK_PORT, 4 * MB);
    sendTcp(g.one!.namespace, two.ip, SINK_PORT, 4 * MB);
    const counted = await waitFor(
      'the counters to show the bytes',
      async () => {
        const now = (await read()).get(two.instanceId);
        return now && now.bytesOut - base.bytesOut >= OUT && now.bytesIn - base.bytesIn >= IN
          ? now
          : undefined;
      },
      { timeoutMs: 10_000, intervalMs: 200 },
    );
    const overhead = (OUT + IN) / 10;
    expect(counted.bytesOut - base.bytesOut).toBeLessThan(OUT + overhead);
    expect(counted.bytesIn - base.bytesIn).toBeLessThan(IN + overhead);
    expect(counted.epoch).toBe(base.epoch);
    // ovn-controller started again installs every flow again, from zero: a new epoch, and it still counts.
    // Installed again later than a reading's tolerance (2 s) after the first install, as a restart is.
    const policyFlowAge = () =>
      Math.min(
        ...sh('ovs-ofctl', ['dump-flows', ovn.endpoints.integrationBridge, 'ip'], ovn.endpoints.env)
          .split('\n')
          .filter((line) => line.includes('priority=900,') && line.includes(`nw_src=${two.ip} `))
          .map((line) => Number(/duration=([0-9.]+)s/.exec(line)?.[1] ?? 0)),
      );
    await waitFor('the policy flows 3 s old', () => (policyFlowAge() >= 3 ? true : undefined), {
      timeoutMs: 10_000,
      intervalMs: 200,
    });
    process.kill(ovn.pids().get('ovn-controller')!, 'SIGKILL');
    const after = await waitFor(
      'a reading of flows installed again',
      async () => {
        const now = (await read().catch(() => new Map())).get(two.instanceId);
        return now && now.epoch !== base.epoch ? now : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    expect(after.bytesOut).toBeLessThan(OUT);
    await waitFor(
      'two out as the router again',
      () => (askTcp(g.two!.namespace, GATEWAY, PORT) === `internet ${routerIp}` ? true : undefined),
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    await apply(side);
    expect(await nb.select('Logical_Router_Policy', [], ['match'])).toEqual([]);
  });

  it("shares the link with another account's VPC, each public IP answering as its own VPC's instance", async () => {
    const [port] = other.ports as [DesiredVpc['ports'][0]];
    g.other = guests.plug(port.instanceId, port.mac, `${port.ip}/16`);
    sh('ip', ['netns', 'exec', g.other.namespace, 'ip', 'route', 'add', 'default', 'via', other.router.ip]);
    listeners.push(await serveTcp(g.other.namespace, PORT, port.hostname));
    const otherPublic: DesiredVpc = {
      ...other,
      public: {
        pool: POOL,
        gateway: GATEWAY,
        router: { ip: '203.0.113.3', mac: '0a:58:cb:00:71:03' },
        chassis: CHASSIS,
        nats: [{ instanceId: port.instanceId, publicIp: OTHER_PUBLIC_IP, privateIp: port.ip }],
      },
    };
    await apply(otherPublic);
    await waitFor(
      "an answer on the other account's public IP",
      () => askTcp(internet.namespace, OTHER_PUBLIC_IP, PORT) ?? undefined,
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    expect(askTcp(internet.namespace, OTHER_PUBLIC_IP, PORT)).toBe(`other-one ${GATEWAY}`);
    expect(askTcp(internet.namespace, PUBLIC_IP, PORT)).toBe(`pub-one ${GATEWAY}`);
    expect(askTcp(g.other.namespace, GATEWAY, PORT)).toBe(`internet ${OTHER_PUBLIC_IP}`);
    // Its last apply takes the whole VPC, public side and all, out; the first account's IP still answers.
    await apply({ ...other, ports: [] });
    expect(await applyTopology(nb, [], [vpcKey(other)])).toMatchObject({ inserted: 0, updated: 0 });
    await waitFor(
      "the other account's public IP silent",
      () => (askTcp(internet.namespace, OTHER_PUBLIC_IP, PORT) === null ? true : undefined),
      { timeoutMs: 5000, intervalMs: 50 },
    );
    expect(askTcp(internet.namespace, PUBLIC_IP, PORT)).toBe(`pub-one ${GATEWAY}`);
  });

  it('answers as the other instance within 2 s of moving the public IP to it', async () => {
    const started = Date.now();
    await apply(publicSide([{ instanceId: two.instanceId, publicIp: PUBLIC_IP, privateIp: two.ip }]));
    await waitFor(
      'the public IP answering as pub-two',
      () => (askTcp(internet.namespace, PUBLIC_IP, PORT) === `pub-two ${GATEWAY}` ? true : undefined),
      { timeoutMs: 2000, intervalMs: 50 },
    );
    expect(Date.now() - started).toBeLessThan(2000);
    expect(askTcp(g.two!.namespace, GATEWAY, PORT)).toBe(`internet ${PUBLIC_IP}`);
    expect(askTcp(g.one!.namespace, GATEWAY, PORT)).toBeNull();
  });

  it('stops answering on a public IP taken away, and applying again changes nothing', async () => {
    await apply(publicSide([]));
    await waitFor(
      'the public IP silent',
      () => (askTcp(internet.namespace, PUBLIC_IP, PORT) === null ? true : undefined),
      { timeoutMs: 2000, intervalMs: 50 },
    );
    expect(askTcp(g.two!.namespace, GATEWAY, PORT)).toBeNull();
    expect(await apply(publicSide([]))).toEqual({ inserted: 0, updated: 0, deleted: 0 });
  });

  it('takes the whole public side out of OVN when the VPC has none', async () => {
    const result = await apply(vpc);
    // The router's row loses its gateway port and route; six public rows go (its NATs went before).
    expect(result).toEqual({ inserted: 0, updated: 1, deleted: 6 });
    expect(await apply(vpc)).toEqual({ inserted: 0, updated: 0, deleted: 0 });
  });
});
