/**
 * A VPN gateway that carries packets (issue 32, item 2) on real OVN, at the driver's level: the embedded
 * daemons in a temporary directory, the VPC as the network reconcile makes it (vpcsOf with one instance
 * and one VPN, plus a public side on an uplink), the gateway run by drivers/ovn/vpn-gateways.ts
 * (wireguard-go in its own namespace on the VPC), and an "office" on the public side of the uplink — a
 * namespace holding the upstream router's address — whose WireGuard client is brought up with `wg-quick`
 * (WG_QUICK_USERSPACE_IMPLEMENTATION=wireguard-go) from the client file the API renders
 * (resources/vpns/wireguard.ts renderClientConfig, as the service calls it).
 *
 * The instance is a namespace standing in for a VM, plugged into the integration bridge on the
 * instance's logical port (as test/ovn-public-ip.test.ts does): this suite is about the packets' path,
 * not about booting guests. Shown with real packets: the office pings the instance's private IP through
 * the tunnel and the instance sees the peer's tunnel address; removing the peer cuts it off within 2 s;
 * a second driver object (what a restarted Nimbus has: nothing in memory) finds the running gateway as
 * it is, same key and peers, and the tunnel keeps working; a wireguard-go killed with -9 is brought back
 * by the next configure; destroying the gateway leaves no process, device, namespace, veth or OVS port,
 * and the VPC's apply without the VPN leaves no OVN row of it.
 *
 * Nothing is routed in the root namespace: everything is between the suite's own namespaces.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EmbeddedOvn } from '../src/drivers/ovn/daemons.js';
import { Northbound } from '../src/drivers/ovn/northbound.js';
import { applyTopology, type DesiredVpc, readRows, vpcKey } from '../src/drivers/ovn/topology.js';
import { defaultPublicGateway, plugUplink, unplugUplink } from '../src/drivers/ovn/uplink.js';
import { type VpcInstance, type VpcVpn, vpcsOf } from '../src/drivers/ovn/vpcs.js';
import { OvnGateways, parseDump } from '../src/drivers/ovn/vpn-gateways.js';
import { macAddressFor } from '../src/resources/addresses/addresses.js';
import {
  DEFAULT_TUNNEL_CIDR,
  gatewayAddress,
  PERSISTENT_KEEPALIVE_SECONDS,
  routesOf,
  VPN_PORT,
} from '../src/resources/vpns/record.js';
import {
  configDigest,
  generateKeyPair,
  renderClientConfig,
  renderGatewayConfig,
} from '../src/resources/vpns/wireguard.js';
import { waitFor } from './helpers/common.js';
import {
  askTcp,
  CAN_RUN_OVN,
  type Guest,
  GuestNamespaces,
  InternetNamespace,
  oneOvnSuiteAtATime,
  processesNaming,
  serveTcp,
  sh,
  succeeds,
} from './helpers/ovn.js';
import { WireGuardClient } from './helpers/wireguard.js';

const CHASSIS = 'ovn-vpn-test';
const POOL = '203.0.113.0/24';
const OFFICE_IP = defaultPublicGateway(POOL);
const ENDPOINT_IP = '203.0.113.40';
const PORT = 8080;
const instance: VpcInstance = {
  id: 'ins_ovnvpn1',
  account_id: 'acct_ovnvpn',
  region: 'us-east-1',
  name: 'vpn-target',
  private_ip: '10.10.0.21',
};
const vpn: VpcVpn = {
  id: 'vpn_ovnvpntest',
  account_id: instance.account_id,
  region: instance.region,
  tunnel_cidr: DEFAULT_TUNNEL_CIDR,
  endpoint_ip: ENDPOINT_IP,
};
const PEER_ADDRESS = '100.96.0.2';
const serverKeys = generateKeyPair();
const peerKeys = generateKeyPair();

/** The gateway's spec as the VPN's reconciler gives it (resources/vpns/kind.ts gatewaySpecOf). */
const specWith = (peers: { publicKey: string; address: string }[]) => ({
  id: vpn.id,
  region: vpn.region,
  endpoint: { ip: ENDPOINT_IP, port: VPN_PORT },
  config: renderGatewayConfig({
    privateKey: serverKeys.privateKey,
    address: `${gatewayAddress(vpn.tunnel_cidr)}/24`,
    listenPort: VPN_PORT,
    peers,
  }),
});
const withPeer = specWith([{ publicKey: peerKeys.publicKey, address: PEER_ADDRESS }]);
const withoutPeer = specWith([]);

/** The client file the API hands the peer (resources/vpns/service.ts clientConfig). */
const clientFile = renderClientConfig({
  privateKey: peerKeys.privateKey,
  address: PEER_ADDRESS,
  dns: gatewayAddress(vpn.tunnel_cidr),
  serverPublicKey: serverKeys.publicKey,
  endpoint: { ip: ENDPOINT_IP, port: VPN_PORT },
  allowedIps: [vpn.tunnel_cidr, ...routesOf({ region: vpn.region, allowed_cidrs: [] })],
  keepaliveSeconds: PERSISTENT_KEEPALIVE_SECONDS,
});

describe.runIf(CAN_RUN_OVN)('a VPN gateway on OVN with real packets', { timeout: 120_000 }, () => {
  oneOvnSuiteAtATime();
  let dir: string;
  let ovn: EmbeddedOvn;
  let nb: Northbound;
  let guests: GuestNamespaces;
  let office: InternetNamespace;
  let gateways: OvnGateways;
  let client: WireGuardClient;
  let target: Guest;
  const listeners: { stop: () => void }[] = [];
  const tag = (process.pid % 100_000).toString(36);

  /** The VPC as the network reconcile makes it, with the public side the uplink gives it. */
  const vpcWith = (vpns: VpcVpn[]): DesiredVpc => {
    const [base] = vpcsOf([instance], undefined, vpns);
    return {
      ...base!,
      public: {
        pool: POOL,
        gateway: OFFICE_IP,
        router: { ip: '203.0.113.2', mac: '0a:58:cb:00:71:22' },
        chassis: CHASSIS,
        nats: [],
      },
    };
  };
  const apply = async (desired: DesiredVpc) => {
    await applyTopology(nb, [desired], [vpcKey(desired)]);
    await nb.syncHypervisors();
  };
  const officePings = () =>
    succeeds('ip', ['netns', 'exec', office.namespace, 'ping', '-c', '1', '-W', '1', instance.private_ip]);

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-ovn-vpn-'));
    ovn = await EmbeddedOvn.start({ dir: path.join(dir, 'ovn'), chassis: CHASSIS });
    nb = new Northbound(ovn.endpoints.nbUrl);
    guests = new GuestNamespaces(ovn.endpoints);
    office = new InternetNamespace(`${OFFICE_IP}/24`);
    await plugUplink(ovn.endpoints, office.uplink);
    target = guests.plug(instance.id, macAddressFor(instance.id), `${instance.private_ip}/16`);
    sh('ip', ['netns', 'exec', target.namespace, 'ip', 'route', 'add', 'default', 'via', '10.10.0.1']);
    listeners.push(await serveTcp(target.namespace, PORT, instance.name));
    gateways = new OvnGateways(ovn.endpoints, path.join(dir, 'gateways'));
    client = new WireGuardClient(office.namespace, `wgo${tag}`.slice(0, 15), clientFile);
  });

  afterAll(async () => {
    for (const listener of listeners) listener.stop();
    client?.down();
    if (gateways) await gateways.destroy(withoutPeer).catch(() => {});
    guests?.remove();
    if (ovn && office) await unplugUplink(ovn.endpoints, office.uplink).catch(() => {});
    office?.remove();
    nb?.close();
    await ovn?.close();
    if (dir) {
      expect(processesNaming(dir)).toEqual([]);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("reaches the instance's private IP from the office through the tunnel, as the peer's address", async () => {
    await apply(vpcWith([vpn]));
    await gateways.provision(withPeer);
    expect(await gateways.inspect(withPeer, configDigest)).toEqual({
      state: 'active',
      configDigest: configDigest(withPeer.config),
      settlesAt: null,
    });
    // The key stays in the store's seal and on wireguard-go's socket: never on a command line.
    expect(sh('ps', ['-e', '-o', 'args=']).includes(serverKeys.privateKey)).toBe(false);
    client.up();
    // ovn-controller binds the gateway's port and the NAT shortly after the apply.
    await waitFor(
      'the office pinging the instance through the VPN',
      () => (officePings() ? true : undefined),
      {
        timeoutMs: 60_000,
        intervalMs: 200,
      },
    );
    expect(askTcp(office.namespace, instance.private_ip, PORT)).toBe(`${instance.name} ${PEER_ADDRESS}`);
    const peers = await gateways.peers(vpn.id);
    expect(peers).toHaveLength(1);
    expect(peers![0]).toMatchObject({ publicKey: peerKeys.publicKey, allowedIps: [`${PEER_ADDRESS}/32`] });
    expect(peers![0]!.latestHandshake).toBeGreaterThan(0);
    expect(peers![0]!.rxBytes).toBeGreaterThan(0);
  });

  it('keeps the tunnel for a driver that knows nothing of it (a restarted Nimbus): same key, same peers', async () => {
    const restarted = new OvnGateways(ovn.endpoints, path.join(dir, 'gateways'));
    expect(await restarted.inspect(withPeer, configDigest)).toEqual({
      state: 'active',
      configDigest: configDigest(withPeer.config),
      settlesAt: null,
    });
    const { namespace, device } = restarted.names(vpn.id);
    const dump = parseDump(sh('ip', ['netns', 'exec', namespace, 'wg', 'show', device, 'dump']));
    expect(dump.privateKey).toBe(serverKeys.privateKey);
    expect(officePings()).toBe(true);
    // Loading the same configuration again changes nothing the client notices.
    await restarted.configure(withPeer);
    expect(officePings()).toBe(true);
  });

  it('cuts the peer off within 2 s of its removal', async () => {
    const started = Date.now();
    await gateways.configure(withoutPeer);
    await waitFor('the office cut off', () => (officePings() ? undefined : true), {
      timeoutMs: 2000,
      intervalMs: 50,
    });
    expect(Date.now() - started).toBeLessThan(2000);
    expect(await gateways.inspect(withPeer, configDigest)).toMatchObject({ state: 'active' });
    expect((await gateways.inspect(withPeer, configDigest)).configDigest).not.toBe(
      configDigest(withPeer.config),
    );
    expect((await gateways.inspect(withoutPeer, configDigest)).configDigest).toBe(
      configDigest(withoutPeer.config),
    );
    await gateways.configure(withPeer);
    await waitFor('the office back', () => (officePings() ? true : undefined), {
      timeoutMs: 30_000,
      intervalMs: 200,
    });
  });

  it('brings back a wireguard-go killed with -9 at the next configure', async () => {
    const { device } = gateways.names(vpn.id);
    for (const line of sh('ps', ['-e', '-o', 'pid=,args=']).split('\n')) {
      const match = /^\s*(\d+)\s+(\S*wireguard-go)\s.*\b(\S+)$/.exec(line);
      if (match && match[3] === device) process.kill(Number(match[1]), 'SIGKILL');
    }
    await waitFor(
      'the gateway found in part',
      async () => ((await gateways.inspect(withPeer, configDigest)).configDigest === null ? true : undefined),
      { timeoutMs: 5000, intervalMs: 50 },
    );
    await gateways.configure(withPeer);
    expect((await gateways.inspect(withPeer, configDigest)).configDigest).toBe(configDigest(withPeer.config));
    // The client's session is gone with the old process: it shakes hands again when its packets go unanswered.
    await waitFor('the office back through the new process', () => (officePings() ? true : undefined), {
      timeoutMs: 40_000,
      intervalMs: 500,
    });
  });

  it('leaves no process, device, namespace, port or OVN row once destroyed', async () => {
    const { namespace, hostEnd, device } = gateways.names(vpn.id);
    await gateways.destroy(withoutPeer);
    expect(await gateways.inspect(withoutPeer, configDigest)).toEqual({
      state: 'absent',
      configDigest: null,
      settlesAt: null,
    });
    expect(succeeds('ip', ['netns', 'exec', namespace, 'true'])).toBe(false);
    expect(succeeds('ip', ['link', 'show', hostEnd])).toBe(false);
    expect(
      sh('ps', ['-e', '-o', 'stat=,args='])
        .split('\n')
        .filter((l) => !l.startsWith('Z') && l.includes(device)),
    ).toEqual([]);
    const ports = sh(
      'ovs-vsctl',
      [`--db=${ovn.endpoints.ovsDb}`, 'list-ports', ovn.endpoints.integrationBridge],
      ovn.endpoints.env,
    );
    expect(ports.includes(hostEnd)).toBe(false);
    await apply(vpcWith([]));
    const rows = await readRows(nb, [vpcKey(vpcWith([]))]);
    expect(rows.filter((row) => row.key.startsWith(vpn.id))).toEqual([]);
    expect(officePings()).toBe(false);
    // Destroying what is gone is fine.
    await gateways.destroy(withoutPeer);
  });
});
