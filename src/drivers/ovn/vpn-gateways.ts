/**
 * VPN gateways that carry packets on OVN (issue 32, item 2; docs/operations.md, "VPN gateways on OVN"):
 * each gateway is `wireguard-go` (Debian's; this kernel has no WireGuard module) in a network namespace
 * of its own, whose `eth0` is the other end of a veth pair plugged into the integration bridge as the
 * gateway's logical port (vpn-gateway-rows.ts writes that port, the route to the tunnel and the NAT of
 * the public endpoint). Peers' packets arrive on the WireGuard device, are forwarded out of eth0 into the
 * VPC, and the router sends the answers back by its route to the tunnel network.
 *
 * Nothing of a gateway lives in this process: wireguard-go runs in a session of its own and outlives a
 * restart (or a kill -9) of Nimbus, and everything `inspect` reports is read from the host — the device,
 * its address and what `wg show … dump` says the device runs — so a restarted Nimbus re-adopts running
 * tunnels with their keys and peers as they are. The configuration reaches wireguard-go by `wg syncconf`
 * on standard input: the private key is never on a command line nor in a file. `syncconf` takes a peer
 * out at once (removing a peer cuts it off as soon as the reconcile runs).
 *
 * A gateway found in part (a kill -9 between two steps, wireguard-go killed) reports `active` with no
 * configuration digest: the reconciler then loads the configuration, and `configure` makes whatever is
 * missing first, as `provision` does.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, openSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { GatewaySpec, GatewayState } from '../driver.js';
import { run } from '../qemu/tools.js';
import type { OvnEndpoints } from './daemons.js';
import { short } from './network.js';
import { GATEWAY_PREFIX, GATEWAY_ROUTER_IP, gatewayIp, gatewayMac } from './vpn-gateway-rows.js';

/** Where wireguard-go keeps each device's control socket (the same path in every namespace). */
const WIREGUARD_RUN_DIR = '/var/run/wireguard';
/** How long wireguard-go may take to open its control socket after it starts. */
const START_TIMEOUT_MS = 10_000;

/** What a gateway's wg-quick file (resources/vpns/wireguard.ts renderGatewayConfig) says. */
export interface GatewayConfig {
  privateKey: string;
  /** The gateway's tunnel address with the tunnel's prefix, e.g. 100.96.0.1/24. */
  address: string;
  listenPort: number;
  peers: { publicKey: string; allowedIps: string[] }[];
}

/** Reads a gateway's wg-quick file; throws on one that lacks what a gateway needs. */
export function parseGatewayConfig(text: string): GatewayConfig {
  let section = '';
  const config: Partial<GatewayConfig> & { peers: GatewayConfig['peers'] } = { peers: [] };
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    if (line.startsWith('[')) {
      section = line.toLowerCase();
      if (section === '[peer]') config.peers.push({ publicKey: '', allowedIps: [] });
      continue;
    }
    const at = line.indexOf('=');
    if (at < 0) continue;
    const key = line.slice(0, at).trim().toLowerCase();
    const value = line.slice(at + 1).trim();
    if (section === '[interface]') {
      if (key === 'privatekey') config.privateKey = value;
      else if (key === 'address') config.address = value;
      else if (key === 'listenport') config.listenPort = Number(value);
    } else if (section === '[peer]') {
      const peer = config.peers[config.peers.length - 1]!;
      if (key === 'publickey') peer.publicKey = value;
      else if (key === 'allowedips') peer.allowedIps = value.split(',').map((ip) => ip.trim());
    }
  }
  const { privateKey, address, listenPort } = config;
  if (!privateKey || !address || !listenPort || !Number.isInteger(listenPort)) {
    throw new Error('a VPN gateway configuration needs PrivateKey, Address and ListenPort');
  }
  return { privateKey, address, listenPort, peers: config.peers };
}

/** What `wg syncconf` loads: the interface's key and port and its peers (wg-quick's Address is not wg's). */
export function wgConfigOf(config: GatewayConfig): string {
  const lines = ['[Interface]', `PrivateKey = ${config.privateKey}`, `ListenPort = ${config.listenPort}`];
  for (const peer of config.peers) {
    lines.push('', '[Peer]', `PublicKey = ${peer.publicKey}`, `AllowedIPs = ${peer.allowedIps.join(', ')}`);
  }
  return `${lines.join('\n')}\n`;
}

/**
 * A configuration in one canonical text (peers and their addresses sorted), so the one a device runs
 * and the one wanted compare equal when they mean the same.
 */
export function canonicalGatewayConfig(config: GatewayConfig): string {
  const peers = config.peers
    .map((peer) => [peer.publicKey, [...peer.allowedIps].sort()] as const)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return JSON.stringify([config.privateKey, config.address, config.listenPort, peers]);
}

/** One peer as the running device reports it (`wg show <device> dump`). */
export interface RunningPeer {
  publicKey: string;
  allowedIps: string[];
  /** Seconds since the epoch of the last handshake; 0: none yet. */
  latestHandshake: number;
  rxBytes: number;
  txBytes: number;
}

/** `wg show <device> dump`: the device's line (private key, public key, port, fwmark), then one per peer. */
export function parseDump(dump: string): { privateKey: string; listenPort: number; peers: RunningPeer[] } {
  const [device, ...peers] = dump
    .trim()
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => line.split('\t'));
  if (!device || device.length < 3) throw new Error('wg show dump: no device line');
  return {
    privateKey: device[0]!,
    listenPort: Number(device[2]),
    peers: peers.map((fields) => ({
      publicKey: fields[0]!,
      allowedIps: fields[3] === '(none)' || fields[3] === undefined ? [] : fields[3].split(','),
      latestHandshake: Number(fields[4] ?? 0),
      rxBytes: Number(fields[5] ?? 0),
      txBytes: Number(fields[6] ?? 0),
    })),
  };
}

/** Runs `program` with `input` on its standard input (never on its command line); resolves to stdout. */
function runWithInput(program: string, args: readonly string[], input: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(program, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-2000);
    });
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve(stdout) : reject(new Error(`${program} ${args.join(' ')}: ${stderr.trim()}`)),
    );
    child.stdin.end(input);
  });
}

export class OvnGateways {
  constructor(
    private readonly endpoints: OvnEndpoints,
    /** Where each gateway's wireguard-go writes its log (`<data dir>/ovn/gateways`). */
    private readonly logDir: string,
  ) {}

  /** The host names of a gateway: its namespace, its veth end on the bridge, its WireGuard device. */
  names(vpnId: string): { namespace: string; hostEnd: string; device: string } {
    const bridge = this.endpoints.integrationBridge;
    return {
      namespace: `${bridge}-vpn-${short(vpnId, 10)}`,
      hostEnd: `ng${short(`${bridge}/${vpnId}`, 12)}`,
      device: `wg${short(`${bridge}/${vpnId}/wg`, 12)}`,
    };
  }

  private inside(namespace: string, ...args: string[]): Promise<string> {
    return run('ip', ['netns', 'exec', namespace, ...args]);
  }

  private vsctl(...args: string[]): Promise<string> {
    return run('ovs-vsctl', [`--db=${this.endpoints.ovsDb}`, '--timeout=30', ...args], {
      env: this.endpoints.env,
      timeoutMs: 40_000,
    });
  }

  /** Makes whatever of the gateway is missing and loads `spec.config`; what runs already is kept. */
  async provision(spec: GatewaySpec): Promise<void> {
    const config = parseGatewayConfig(spec.config);
    await this.ensurePort(spec.id);
    await this.ensureDevice(spec.id);
    await this.load(spec.id, config);
  }

  /** Loads the configuration (peers added or removed); a gateway found in part is made whole first. */
  configure(spec: GatewaySpec): Promise<void> {
    return this.provision(spec);
  }

  /**
   * Takes the gateway away: its device (wireguard-go exits with it), then any wireguard-go left, its port
   * on the bridge, its veth and its namespace. Absent parts are fine.
   */
  async destroy(spec: GatewaySpec): Promise<void> {
    const { namespace, hostEnd, device } = this.names(spec.id);
    if (existsSync(`/run/netns/${namespace}`)) {
      await this.inside(namespace, 'ip', 'link', 'del', device).catch(() => {});
    }
    for (const pid of await this.wireguardPids(device)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
    await run('rm', ['-f', path.join(WIREGUARD_RUN_DIR, `${device}.sock`)]);
    await this.vsctl('--if-exists', 'del-port', this.endpoints.integrationBridge, hostEnd);
    if (existsSync(`/sys/class/net/${hostEnd}`)) await run('ip', ['link', 'del', hostEnd]);
    if (existsSync(`/run/netns/${namespace}`)) await run('ip', ['netns', 'del', namespace]);
  }

  /**
   * Where the gateway is, read from the host: absent when nothing of it is left; active with the digest of
   * `spec.config` when the device runs exactly it, active with another digest (or none) otherwise.
   */
  async inspect(spec: GatewaySpec, digestOf: (config: string) => string): Promise<GatewayState> {
    const { namespace, hostEnd, device } = this.names(spec.id);
    const anything =
      existsSync(`/run/netns/${namespace}`) ||
      existsSync(`/sys/class/net/${hostEnd}`) ||
      existsSync(path.join(WIREGUARD_RUN_DIR, `${device}.sock`)) ||
      (await this.wireguardPids(device)).length > 0;
    if (!anything) return { state: 'absent', configDigest: null, settlesAt: null };
    const running = await this.running(spec.id);
    if (!running) return { state: 'active', configDigest: null, settlesAt: null };
    let digest = `running:${createHash('sha256').update(running).digest('hex')}`;
    if (spec.config !== '' && running === canonicalGatewayConfig(parseGatewayConfig(spec.config))) {
      digest = digestOf(spec.config);
    }
    return { state: 'active', configDigest: digest, settlesAt: null };
  }

  /**
   * The VPNs whose gateway is on this bridge but whose wireguard-go does not answer (killed, crashed): the
   * driver's watcher has their jobs make them whole again.
   */
  async broken(): Promise<string[]> {
    const output = await this.vsctl('--format=json', '--columns=external_ids', 'list', 'Interface');
    const table = JSON.parse(output) as { data: [['map', [string, string][]]][] };
    const vpnIds = table.data.flatMap(([[, ids]]) =>
      ids.filter(([k]) => k === 'nimbus-vpn').map(([, v]) => v),
    );
    const broken: string[] = [];
    for (const vpnId of vpnIds) {
      const { namespace, device } = this.names(vpnId);
      const answers = await this.inside(namespace, 'wg', 'show', device, 'listen-port').then(
        () => true,
        () => false,
      );
      if (!answers) broken.push(vpnId);
    }
    return broken;
  }

  /** Each peer's handshake and bytes as the running device counts them; null when it does not run. */
  async peers(vpnId: string): Promise<RunningPeer[] | null> {
    const { namespace, device } = this.names(vpnId);
    if (!existsSync(`/run/netns/${namespace}`)) return null;
    const dump = await this.inside(namespace, 'wg', 'show', device, 'dump').catch(() => null);
    return dump === null ? null : parseDump(dump).peers;
  }

  /** The canonical configuration the device runs (canonicalGatewayConfig), or null when it does not run whole. */
  private async running(vpnId: string): Promise<string | null> {
    const { namespace, device } = this.names(vpnId);
    if (!existsSync(`/run/netns/${namespace}`)) return null;
    try {
      const dump = parseDump(await this.inside(namespace, 'wg', 'show', device, 'dump'));
      const addresses = JSON.parse(
        await this.inside(namespace, 'ip', '-j', '-4', 'addr', 'show', 'dev', device),
      ) as {
        addr_info?: { local: string; prefixlen: number }[];
      }[];
      const address = addresses[0]?.addr_info?.[0];
      if (!address) return null;
      return canonicalGatewayConfig({
        privateKey: dump.privateKey,
        address: `${address.local}/${address.prefixlen}`,
        listenPort: dump.listenPort,
        peers: dump.peers.map((peer) => ({ publicKey: peer.publicKey, allowedIps: peer.allowedIps })),
      });
    } catch {
      return null;
    }
  }

  /**
   * The namespace and its eth0 on the VPC: the gateway's link-local address and MAC, the router as default
   * route, forwarding on, plugged into the bridge as the VPN's logical port.
   */
  private async ensurePort(vpnId: string): Promise<void> {
    const { namespace, hostEnd } = this.names(vpnId);
    if (!existsSync(`/run/netns/${namespace}`)) await run('ip', ['netns', 'add', namespace]);
    const inside = (...args: string[]) => this.inside(namespace, ...args);
    if (!existsSync(`/sys/class/net/${hostEnd}`)) {
      await inside('ip', 'link', 'del', 'eth0').catch(() => {});
      await run('ip', ['link', 'add', hostEnd, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', namespace]);
    }
    await inside('sysctl', '-q', '-w', 'net.ipv6.conf.all.disable_ipv6=1');
    await inside('sysctl', '-q', '-w', 'net.ipv4.ip_forward=1');
    // Only when it differs: setting it flushes the namespace's neighbour table (as OvnNetwork's host port).
    const [link] = JSON.parse(await inside('ip', '-j', 'link', 'show', 'eth0')) as { address?: string }[];
    if (link?.address?.toLowerCase() !== gatewayMac(vpnId).toLowerCase()) {
      await inside('ip', 'link', 'set', 'eth0', 'address', gatewayMac(vpnId));
    }
    // The userspace datapath's conntrack (the NAT) drops packets whose checksum was left to hardware.
    await inside('ethtool', '-K', 'eth0', 'tx', 'off');
    await inside('ip', 'addr', 'replace', `${gatewayIp(vpnId)}/${GATEWAY_PREFIX}`, 'dev', 'eth0');
    await inside('ip', 'link', 'set', 'lo', 'up');
    await inside('ip', 'link', 'set', 'eth0', 'up');
    await inside('ip', 'route', 'replace', 'default', 'via', GATEWAY_ROUTER_IP);
    await run('ethtool', ['-K', hostEnd, 'tx', 'off']);
    await run('sysctl', ['-q', '-w', `net.ipv6.conf.${hostEnd}.disable_ipv6=1`]);
    await run('ip', ['link', 'set', hostEnd, 'up']);
    await this.vsctl(
      '--may-exist',
      'add-port',
      this.endpoints.integrationBridge,
      hostEnd,
      '--',
      'set',
      'Interface',
      hostEnd,
      `external_ids:iface-id=${vpnId}`,
      `external_ids:nimbus-vpn=${vpnId}`,
    );
  }

  /**
   * wireguard-go on the gateway's device, started when its control socket does not answer: in the
   * foreground of a session of its own (it outlives Nimbus), its output appended to its log.
   */
  private async ensureDevice(vpnId: string): Promise<void> {
    const { namespace, device } = this.names(vpnId);
    const answers = () =>
      this.inside(namespace, 'wg', 'show', device, 'listen-port').then(
        () => true,
        () => false,
      );
    if (await answers()) return;
    for (const pid of await this.wireguardPids(device)) process.kill(pid, 'SIGKILL');
    await this.inside(namespace, 'ip', 'link', 'del', device).catch(() => {});
    await run('rm', ['-f', path.join(WIREGUARD_RUN_DIR, `${device}.sock`)]);
    mkdirSync(this.logDir, { recursive: true, mode: 0o700 });
    const log = openSync(path.join(this.logDir, `${vpnId}.log`), 'a', 0o600);
    try {
      const child = spawn('ip', ['netns', 'exec', namespace, 'wireguard-go', '--foreground', device], {
        detached: true,
        stdio: ['ignore', log, log],
        env: { ...process.env, LOG_LEVEL: 'error' },
      });
      child.unref();
    } finally {
      closeSync(log);
    }
    const deadline = Date.now() + START_TIMEOUT_MS;
    while (!(await answers())) {
      if (Date.now() > deadline) {
        throw new Error(
          `wireguard-go for ${vpnId} did not open its control socket in ${START_TIMEOUT_MS} ms`,
        );
      }
      await sleep(50);
    }
  }

  /** Loads the keys, port and peers (syncconf drops peers no longer listed), then the tunnel address. */
  private async load(vpnId: string, config: GatewayConfig): Promise<void> {
    const { namespace, device } = this.names(vpnId);
    // Node's stdin is a socket, which wg cannot fopen as /dev/stdin: `cat` hands it on through a pipe.
    await runWithInput(
      'ip',
      ['netns', 'exec', namespace, 'sh', '-c', 'cat | exec wg syncconf "$0" /dev/stdin', device],
      wgConfigOf(config),
    );
    const current = JSON.parse(
      await this.inside(namespace, 'ip', '-j', '-4', 'addr', 'show', 'dev', device),
    ) as {
      addr_info?: { local: string; prefixlen: number }[];
    }[];
    for (const address of current[0]?.addr_info ?? []) {
      const text = `${address.local}/${address.prefixlen}`;
      if (text !== config.address) await this.inside(namespace, 'ip', 'addr', 'del', text, 'dev', device);
    }
    await this.inside(namespace, 'ip', 'addr', 'replace', config.address, 'dev', device);
    await this.inside(namespace, 'ip', 'link', 'set', device, 'up');
  }

  /** The wireguard-go processes serving `device` (found by their command line). */
  private async wireguardPids(device: string): Promise<number[]> {
    const out = await run('ps', ['-e', '-o', 'pid=,stat=,args=']);
    const pids: number[] = [];
    for (const line of out.split('\n')) {
      const match = /^\s*(\d+)\s+(\S+)\s+(.*)$/.exec(line);
      if (!match || match[2]!.startsWith('Z')) continue;
      const args = match[3]!.split(/\s+/);
      if (args[0]?.endsWith('wireguard-go') && args.includes(device)) pids.push(Number(match[1]));
    }
    return pids;
  }
}
