/**
 * The qemu driver's network with NIMBUS_NETWORK=ovn (docs/operations.md, "OVN: real networks"): the OVN
 * it runs on (its own under `<data dir>/ovn`, or an existing central with this host's Open vSwitch),
 * each VM's NIC as a tap on the integration bridge, each VPC's rows in the northbound database, and the
 * host's own port on each VPC.
 *
 * The host port. Nimbus must reach a guest's SSH server (to tell that it booted, and to forward its SSH
 * port) with no user-mode forward, and the guests will reach the metadata service at 169.254.169.254.
 * Each VPC has a `localport` holding 169.254.169.254, whose interface is the end of a veth pair in a
 * network namespace of that VPC's own (the VPCs' blocks overlap, so they cannot share one). The VPC's
 * router holds 169.254.0.1/16 on its switch port beside the gateway address, so a guest's packet to
 * 169.254.169.254 goes to its default gateway and is routed back out onto the switch to the host port,
 * and the namespace reaches the private block through the same router. Nothing is routed in the root
 * namespace; a program reaches a guest only by running inside that namespace (`ip netns exec`).
 *
 * Interfaces (taps, veths) get transmit checksum offload off: the userspace datapath's connection
 * tracking drops packets whose checksum the kernel left to the hardware.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import type { Server, Socket } from 'node:net';
import path from 'node:path';
import { Duplex } from 'node:stream';
import type { OvnCentralConfig } from '../../platform/config.js';
import { macAddressFor } from '../../resources/addresses/addresses.js';
import { run } from '../qemu/tools.js';
import { EmbeddedOvn, integrationBridgeName, type OvnEndpoints } from './daemons.js';
import type { VpcPlace } from './metadata-path.js';
import { listenInNamespace } from './namespace-listener.js';
import { mapEntries, Northbound, ovsdbMap } from './northbound.js';
import {
  type ApplyResult,
  applyTopology,
  type DesiredVpc,
  hostPortName,
  VPC_ID,
  vpcKey,
} from './topology.js';
import { type PublicLink, publicSideOf } from './uplink.js';
import { type VpcState, vpcsOf } from './vpcs.js';

export interface OvnNetworkOptions {
  /** `<data dir>/ovn`: the embedded OVN's directory (unused with an existing central). */
  dir: string;
  /** An existing OVN central and this host's Open vSwitch; null: Nimbus runs its own. */
  central: OvnCentralConfig | null;
  onRestart?: (daemon: string, error: Error | null) => void;
  /**
   * Connections guests open to the host port's TCP port 80 (the metadata address), with the VPC they came
   * from; unset: nothing listens there (the admin CLI's view).
   */
  onGuestConnection?: (place: VpcPlace, socket: Socket) => void;
}

/** The TCP port guests reach the metadata service on, at the host port's address. */
export const METADATA_PORT = 80;
/** Open metadata connections per VPC: a guest opening many more only refuses its own VPC's newest ones. */
const MAX_GUEST_CONNECTIONS = 512;

/** The endpoints of the OVN Nimbus runs under `dir`, whether it runs now or not (the admin CLI reads them). */
export function embeddedEndpoints(dir: string): OvnEndpoints {
  const resolved = path.resolve(dir);
  const env: NodeJS.ProcessEnv = { ...process.env, LC_ALL: 'C' };
  for (const project of ['OVS', 'OVN']) {
    for (const kind of ['RUNDIR', 'LOGDIR', 'DBDIR', 'SYSCONFDIR']) env[`${project}_${kind}`] = resolved;
  }
  return {
    nbUrl: `unix:${path.join(resolved, 'nb.sock')}`,
    sbUrl: `unix:${path.join(resolved, 'sb.sock')}`,
    ovsDb: `unix:${path.join(resolved, 'db.sock')}`,
    integrationBridge: integrationBridgeName(resolved),
    env,
  };
}

/**
 * The endpoints of an existing central: its databases, and this host's Open vSwitch with the integration
 * bridge its ovn-controller uses (NIMBUS_OVN_BRIDGE, `br-int` unless the operator named another).
 */
export function centralEndpoints(central: OvnCentralConfig): OvnEndpoints {
  const { nbUrl, sbUrl, ovsDb, bridge } = central;
  return { nbUrl, sbUrl, ovsDb, integrationBridge: bridge, env: { ...process.env, LC_ALL: 'C' } };
}

/** The first `length` hex digits of the text's SHA-256: short, stable names and cookies from ids. */
export const short = (text: string, length: number) =>
  createHash('sha256').update(text).digest('hex').slice(0, length);

export class OvnNetwork {
  readonly nb: Northbound;

  /** Starts (or adopts) the embedded OVN, or connects to the central named. */
  static async start(options: OvnNetworkOptions): Promise<OvnNetwork> {
    const onGuestConnection = options.onGuestConnection ?? null;
    if (options.central) return new OvnNetwork(centralEndpoints(options.central), null, onGuestConnection);
    const embedded = await EmbeddedOvn.start({
      dir: options.dir,
      ...(options.onRestart ? { onRestart: options.onRestart } : {}),
    });
    return new OvnNetwork(embedded.endpoints, embedded, onGuestConnection);
  }

  /** A network whose daemons this process neither starts nor stops (the admin CLI's view of the server's). */
  static attach(options: OvnNetworkOptions): OvnNetwork {
    return new OvnNetwork(
      options.central ? centralEndpoints(options.central) : embeddedEndpoints(options.dir),
      null,
      null,
    );
  }

  /** The metadata listener in each VPC's host namespace, by VPC key (a promise while it binds). */
  private readonly guestListeners = new Map<string, Promise<Server>>();

  private constructor(
    readonly endpoints: OvnEndpoints,
    private readonly embedded: EmbeddedOvn | null,
    private readonly onGuestConnection: ((place: VpcPlace, socket: Socket) => void) | null,
  ) {
    this.nb = new Northbound(endpoints.nbUrl);
  }

  private vsctl(...args: string[]): Promise<string> {
    return run('ovs-vsctl', [`--db=${this.endpoints.ovsDb}`, '--timeout=30', ...args], {
      env: this.endpoints.env,
      timeoutMs: 40_000,
    });
  }

  /** The tap of an instance's NIC: the same name for the same instance on the same bridge, 15 characters at most. */
  tapName(instanceId: string): string {
    return `nt${short(`${this.endpoints.integrationBridge}/${instanceId}`, 12)}`;
  }

  /**
   * Makes the instance's tap and plugs it into the integration bridge bound to the instance's logical
   * port (external_ids:iface-id); what exists already (a restart, a VM still running) is kept as it is.
   */
  async plug(instanceId: string): Promise<string> {
    const tap = this.tapName(instanceId);
    if (!existsSync(`/sys/class/net/${tap}`)) {
      await run('ip', ['tuntap', 'add', 'dev', tap, 'mode', 'tap']);
    }
    await quietInterface(tap);
    await this.vsctl(
      '--may-exist',
      'add-port',
      this.endpoints.integrationBridge,
      tap,
      '--',
      'set',
      'Interface',
      tap,
      `external_ids:iface-id=${instanceId}`,
      `external_ids:nimbus-instance=${instanceId}`,
    );
    return tap;
  }

  /** Takes the instance's tap off the bridge and deletes it; absent ones are fine. */
  async unplug(instanceId: string): Promise<void> {
    const tap = this.tapName(instanceId);
    await this.vsctl('--if-exists', 'del-port', this.endpoints.integrationBridge, tap);
    if (existsSync(`/sys/class/net/${tap}`)) await run('ip', ['link', 'del', tap]);
  }

  /** The network namespace of a VPC's host port (its name marks it as this bridge's). */
  namespaceOf(vpc: Pick<DesiredVpc, 'accountId' | 'region'>): string {
    return `${this.endpoints.integrationBridge}-${short(vpcKey(vpc), 10)}`;
  }

  private hostEndOf(vpc: Pick<DesiredVpc, 'accountId' | 'region'>): string {
    return `nh${short(`${this.endpoints.integrationBridge}/${vpcKey(vpc)}`, 12)}`;
  }

  /** The VPC's host namespace and its veth on the bridge, made when missing, set up again when present. */
  private async ensureHostPort(vpc: DesiredVpc): Promise<void> {
    const host = vpc.hostPort;
    if (!host) return;
    const namespace = this.namespaceOf(vpc);
    const hostEnd = this.hostEndOf(vpc);
    if (!existsSync(`/run/netns/${namespace}`)) await run('ip', ['netns', 'add', namespace]);
    const inside = (...args: string[]) => run('ip', ['netns', 'exec', namespace, ...args]);
    if (!existsSync(`/sys/class/net/${hostEnd}`)) {
      // A namespace left without its pair (a kill -9 between the two) gets a new one.
      await inside('ip', 'link', 'del', 'vpc0').catch(() => {});
      await run('ip', ['link', 'add', hostEnd, 'type', 'veth', 'peer', 'name', 'vpc0', 'netns', namespace]);
    }
    await inside('sysctl', '-q', '-w', 'net.ipv6.conf.all.disable_ipv6=1');
    // Only when it differs: setting an interface's address, even to the one it has, flushes the
    // namespace's neighbour table, so every reconcile (each rule change) would make the host's
    // connections to the guests (SSH, metadata) resolve the router's MAC again.
    const [link] = JSON.parse(await inside('ip', '-j', 'link', 'show', 'vpc0')) as { address?: string }[];
    if (link?.address?.toLowerCase() !== host.mac.toLowerCase()) {
      await inside('ip', 'link', 'set', 'vpc0', 'address', host.mac);
    }
    await inside('ethtool', '-K', 'vpc0', 'tx', 'off');
    await inside('ip', 'addr', 'replace', `${host.ip}/${host.routerNetwork.split('/')[1]}`, 'dev', 'vpc0');
    await inside('ip', 'link', 'set', 'lo', 'up');
    await inside('ip', 'link', 'set', 'vpc0', 'up');
    await inside('ip', 'route', 'replace', vpc.cidr, 'via', host.routerNetwork.split('/')[0]!);
    await quietInterface(hostEnd);
    await this.vsctl(
      '--may-exist',
      'add-port',
      this.endpoints.integrationBridge,
      hostEnd,
      '--',
      'set',
      'Interface',
      hostEnd,
      `external_ids:iface-id=${hostPortName(vpc)}`,
      `external_ids:nimbus-vpc=${vpcKey(vpc)}`,
    );
    await this.listenForGuests(vpc, namespace, host.ip);
  }

  /**
   * The metadata listener of the VPC's namespace, bound once per process: a restarted Nimbus binds it
   * again (the socket died with the process before it), a reconcile finding it open leaves it.
   */
  private async listenForGuests(vpc: VpcPlace, namespace: string, ip: string): Promise<void> {
    const onGuestConnection = this.onGuestConnection;
    if (!onGuestConnection) return;
    const key = vpcKey(vpc);
    let listening = this.guestListeners.get(key);
    if (!listening) {
      const place = { accountId: vpc.accountId, region: vpc.region };
      listening = listenInNamespace(namespace, ip, METADATA_PORT).then((server) => {
        server.maxConnections = MAX_GUEST_CONNECTIONS;
        server.on('connection', (socket: Socket) => onGuestConnection(place, socket));
        return server;
      });
      this.guestListeners.set(key, listening);
      // A failed bind is tried again by the next reconcile.
      listening.catch(() => this.guestListeners.delete(key));
    }
    await listening;
  }

  private async stopListeningForGuests(vpc: VpcPlace): Promise<void> {
    const key = vpcKey(vpc);
    const listening = this.guestListeners.get(key);
    this.guestListeners.delete(key);
    // Stops accepting; connections open now end with their requests (the metadata path closes idle ones).
    (await listening?.catch(() => null))?.close();
  }

  private async removeHostPort(vpc: Pick<DesiredVpc, 'accountId' | 'region'>): Promise<void> {
    await this.stopListeningForGuests(vpc);
    const hostEnd = this.hostEndOf(vpc);
    await this.vsctl('--if-exists', 'del-port', this.endpoints.integrationBridge, hostEnd);
    if (existsSync(`/sys/class/net/${hostEnd}`)) await run('ip', ['link', 'del', hostEnd]);
    const namespace = this.namespaceOf(vpc);
    if (existsSync(`/run/netns/${namespace}`)) await run('ip', ['netns', 'del', namespace]);
  }

  /** This host's chassis name: the embedded OVN's, or the system-id of the host's Open vSwitch. */
  async chassis(): Promise<string> {
    if (this.embedded) return this.embedded.chassis;
    const text = (await this.vsctl('get', 'Open_vSwitch', '.', 'external_ids:system-id')).trim();
    return text.startsWith('"') ? (JSON.parse(text) as string) : text;
  }

  /**
   * The VPCs of `state`'s instances and VPN gateways (all of one account's, or everyone's when `accountId`
   * is null), each with its public side when there is a link: its router's address on it (`routerIp`: the
   * one held, or, with `hold`, held now) and a NAT per public IP. A VPC whose router holds no address yet
   * (read only) has none.
   */
  async desiredVpcs(
    accountId: string | null,
    state: VpcState,
    link: PublicLink | undefined,
    hold: boolean,
  ): Promise<DesiredVpc[]> {
    const ofAccount = (row: { account_id: string }) => accountId === null || row.account_id === accountId;
    const mine = state.instances.filter(ofAccount);
    const desired = vpcsOf(mine, state.rules, state.vpns.filter(ofAccount));
    if (!link) return desired;
    const chassis = await this.chassis();
    const held = new Map(
      (await link.routers.held(accountId)).map((h) => [`${h.accountId}/${h.region}`, h.ip] as const),
    );
    const withPublic: DesiredVpc[] = [];
    for (const vpc of desired) {
      const ip = hold
        ? await link.routers.hold(vpc.accountId, vpc.region)
        : held.get(`${vpc.accountId}/${vpc.region}`);
      const members = mine.filter((i) => i.account_id === vpc.accountId && i.region === vpc.region);
      const side =
        ip === undefined || ip === null
          ? undefined
          : publicSideOf(
              { key: vpcKey(vpc), region: vpc.region, cidr: vpc.cidr },
              members.map((i) => ({ id: i.id, public_ip: i.public_ip ?? null, private_ip: i.private_ip })),
              link,
              { ip, mac: macAddressFor(`${vpcKey(vpc)}/public`) },
              chassis,
            );
      withPublic.push(side ? { ...vpc, public: side } : vpc);
    }
    return withPublic;
  }

  /**
   * Makes OVN and this host hold exactly the VPCs of `state` (all of one account's, or everyone's when
   * `accountId` is null): each VPC's rows applied in one transaction, its host port made; the rows,
   * host ports and namespaces of VPCs left with no instance nor VPN removed. Idempotent. With firewall
   * rules, each port's firewall is part of its VPC (vpcs.ts). With a public `link`, each VPC's router
   * holds an address on it, given back once the VPC is out of OVN.
   */
  async reconcile(accountId: string | null, state: VpcState, link?: PublicLink): Promise<ApplyResult> {
    const desired = await this.desiredVpcs(accountId, state, link, true);
    const total: ApplyResult = { inserted: 0, updated: 0, deleted: 0 };
    const add = (result: ApplyResult) => {
      total.inserted += result.inserted;
      total.updated += result.updated;
      total.deleted += result.deleted;
    };
    if (accountId === null) {
      add(await applyTopology(this.nb, desired));
    } else {
      // The account's VPCs OVN holds now (those left with no instance are to go) and those desired.
      const switches = await this.nb.select(
        'Logical_Switch',
        [['external_ids', 'includes', ovsdbMap({ 'nimbus:account': accountId })]],
        ['external_ids'],
      );
      const scope = new Set([
        ...desired.map(vpcKey),
        ...switches.flatMap((row) => mapEntries(row.external_ids)[VPC_ID] ?? []),
      ]);
      add(await applyTopology(this.nb, desired, [...scope]));
    }
    for (const vpc of desired) await this.ensureHostPort(vpc);
    await this.removeStrayHostPorts(desired, accountId);
    if (link) {
      // Only now that OVN no longer holds them: an address given back may go to an instance at once.
      const wanted = new Set(desired.map(vpcKey));
      for (const held of await link.routers.held(accountId)) {
        if (!wanted.has(vpcKey(held))) await link.routers.release(held.accountId, held.region);
      }
    }
    return total;
  }

  /** Host ports and namespaces of this bridge for VPCs not desired (of `accountId`, or of any account). */
  private async removeStrayHostPorts(
    desired: readonly DesiredVpc[],
    accountId: string | null,
  ): Promise<void> {
    const wanted = new Set(desired.map(vpcKey));
    for (const { vpc } of await this.hostPortInterfaces()) {
      if (wanted.has(vpc)) continue;
      const place = parseVpcKey(vpc);
      if (!place || (accountId !== null && place.accountId !== accountId)) continue;
      await this.removeHostPort(place);
    }
  }

  /** The host ports' interfaces on the bridge, by the VPC each serves. */
  async hostPortInterfaces(): Promise<{ name: string; vpc: string }[]> {
    return (await this.interfacesMarked('nimbus-vpc')).map(({ name, mark }) => ({ name, vpc: mark }));
  }

  /** The taps on the bridge, by the instance each serves. */
  async instanceTaps(): Promise<{ name: string; instanceId: string }[]> {
    return (await this.interfacesMarked('nimbus-instance')).map(({ name, mark }) => ({
      name,
      instanceId: mark,
    }));
  }

  /** The VPN gateways' veths on the bridge (drivers/ovn/vpn-gateways.ts), by the VPN each serves. */
  async gatewayInterfaces(): Promise<{ name: string; vpnId: string }[]> {
    return (await this.interfacesMarked('nimbus-vpn')).map(({ name, mark }) => ({ name, vpnId: mark }));
  }

  private async interfacesMarked(key: string): Promise<{ name: string; mark: string }[]> {
    const output = await this.vsctl('--format=json', '--columns=name,external_ids', 'list', 'Interface');
    const table = JSON.parse(output) as { data: [string, ['map', [string, string][]]][] };
    return table.data.flatMap(([name, [, ids]]) => {
      const mark = ids.find(([k]) => k === key)?.[1];
      return mark ? [{ name, mark }] : [];
    });
  }

  /** The network namespaces of this bridge's host ports and VPN gateways (stray ones included). */
  hostNamespaces(): string[] {
    const prefix = `${this.endpoints.integrationBridge}-`;
    return existsSync('/run/netns') ? readdirSync('/run/netns').filter((n) => n.startsWith(prefix)) : [];
  }

  /**
   * A byte stream to TCP port `port` of `ip` in the VPC, from its host namespace (socat under `ip netns
   * exec`, which ends with the stream); null when the VPC has no host port here yet.
   */
  connect(vpc: Pick<DesiredVpc, 'accountId' | 'region'>, ip: string, port: number): Duplex | null {
    const namespace = this.namespaceOf(vpc);
    if (!existsSync(`/run/netns/${namespace}`)) return null;
    const child = spawn(
      'ip',
      ['netns', 'exec', namespace, 'socat', '-', `TCP:${ip}:${port},connect-timeout=5`],
      { stdio: ['pipe', 'pipe', 'ignore'] },
    );
    const stream = Duplex.from({ readable: child.stdout, writable: child.stdin });
    stream.on('close', () => child.kill());
    child.on('exit', () => stream.destroy());
    child.on('error', (error) => stream.destroy(error));
    return stream;
  }

  /** Stops the embedded OVN (when Nimbus runs it) and closes the database connection. */
  async close(): Promise<void> {
    for (const key of [...this.guestListeners.keys()]) {
      const place = parseVpcKey(key);
      if (place) await this.stopListeningForGuests(place);
    }
    this.nb.close();
    await this.embedded?.close();
  }
}

/** The account and region of a VPC key (`nimbus-<account>-<region>`; ids hold no hyphen, regions do). */
export function parseVpcKey(key: string): { accountId: string; region: string } | null {
  const match = /^nimbus-([^-]+)-(.+)$/.exec(key);
  return match ? { accountId: match[1]!, region: match[2]! } : null;
}

/** Transmit checksum offload off and IPv6 off on a host-side interface, then up. */
async function quietInterface(name: string): Promise<void> {
  await run('ethtool', ['-K', name, 'tx', 'off']);
  // The root namespace's own IPv6 chatter (router solicitations) would go out on the bridge.
  await run('sysctl', ['-q', '-w', `net.ipv6.conf.${name}.disable_ipv6=1`]);
  await run('ip', ['link', 'set', name, 'up']);
}
