/**
 * What the OVN suites share: whether OVN can run here (under CI=true it must), and network namespaces
 * standing in for VMs — a veth pair whose one end is plugged into the integration bridge and bound to a
 * logical port by external_ids:iface-id, the other end `eth0` inside a namespace of the suite's own.
 * Every namespace, veth and OVS port made here is removed by `remove`, which a suite calls in afterAll.
 */
import { execFileSync, spawn } from 'node:child_process';
import { afterAll, beforeAll } from 'vitest';
import { missingOvnPrograms, type OvnEndpoints } from '../../src/drivers/ovn/daemons.js';
import { describeMissing } from '../../src/drivers/qemu/tools.js';

const missing = missingOvnPrograms();
const isRoot = process.getuid?.() === 0;
export const OVN_SKIP_REASON =
  missing.length > 0
    ? `OVN is not installed: ${describeMissing(missing)}`
    : isRoot
      ? null
      : 'needs root (namespaces, OVS)';
if (OVN_SKIP_REASON !== null && process.env.CI === 'true') {
  throw new Error(`CI=true but ${OVN_SKIP_REASON} (npm test's set-up installs the packages as root)`);
}
export const CAN_RUN_OVN = OVN_SKIP_REASON === null;

export function sh(program: string, args: readonly string[], env?: NodeJS.ProcessEnv): string {
  return execFileSync(program, args, {
    encoding: 'utf8',
    env: env ?? process.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/** Whether the command exits 0 (its output is not wanted). */
export function succeeds(program: string, args: readonly string[]): boolean {
  try {
    sh(program, args);
    return true;
  } catch {
    return false;
  }
}

export interface Guest {
  namespace: string;
  /** The veth end on the bridge. */
  hostEnd: string;
  mac: string;
}

/** Namespaces and veths of one suite, named after its process so parallel suites never collide. */
export class GuestNamespaces {
  private readonly made: Guest[] = [];
  private readonly tag = (process.pid % 100_000).toString(36);

  constructor(private readonly ovn: OvnEndpoints) {}

  /**
   * A namespace whose eth0 has `mac` and sits on logical port `portName`; with `address` (a.b.c.d/n) set
   * statically, otherwise left for DHCP. Transmit checksum offload is off on both ends: the userspace
   * datapath's conntrack would drop what the kernel left for the hardware to checksum.
   */
  plug(portName: string, mac: string, address?: string): Guest {
    const n = this.made.length;
    const guest = { namespace: `novn-${this.tag}-${n}`, hostEnd: `nv${this.tag}x${n}`.slice(0, 15), mac };
    this.made.push(guest);
    sh('ip', ['netns', 'add', guest.namespace]);
    const inside = (...args: string[]) => sh('ip', ['netns', 'exec', guest.namespace, ...args]);
    sh('ip', [
      'link',
      'add',
      guest.hostEnd,
      'type',
      'veth',
      'peer',
      'name',
      'eth0',
      'netns',
      guest.namespace,
    ]);
    inside('sysctl', '-q', '-w', 'net.ipv6.conf.all.disable_ipv6=1');
    inside('ip', 'link', 'set', 'eth0', 'address', mac);
    inside('ethtool', '-K', 'eth0', 'tx', 'off');
    sh('ethtool', ['-K', guest.hostEnd, 'tx', 'off']);
    // The root namespace's IPv6 (router solicitations, MLD reports) on the bridge's end would reach eth0
    // straight over the veth, never through OVN.
    sh('sysctl', ['-q', '-w', `net.ipv6.conf.${guest.hostEnd}.disable_ipv6=1`]);
    if (address) inside('ip', 'addr', 'add', address, 'dev', 'eth0');
    inside('ip', 'link', 'set', 'lo', 'up');
    inside('ip', 'link', 'set', 'eth0', 'up');
    sh('ip', ['link', 'set', guest.hostEnd, 'up']);
    sh(
      'ovs-vsctl',
      [
        `--db=${this.ovn.ovsDb}`,
        'add-port',
        this.ovn.integrationBridge,
        guest.hostEnd,
        '--',
        'set',
        'Interface',
        guest.hostEnd,
        `external_ids:iface-id=${portName}`,
      ],
      this.ovn.env,
    );
    return guest;
  }

  /** Whether `from` gets an answer to one ping of `address` within a second. */
  pings(from: Guest, address: string): boolean {
    return succeeds('ip', ['netns', 'exec', from.namespace, 'ping', '-c', '1', '-W', '1', address]);
  }

  /** Packets eth0 in `guest`'s namespace has received. */
  received(guest: Guest): number {
    const stats = JSON.parse(
      sh('ip', ['netns', 'exec', guest.namespace, 'ip', '-s', '-j', 'link', 'show', 'eth0']),
    );
    return stats[0].stats64.rx.packets as number;
  }

  /** Removes every namespace (its veth pair goes with it) and OVS port made; safe to call twice. */
  remove(): void {
    for (const guest of this.made.splice(0)) {
      try {
        sh('ovs-vsctl', [`--db=${this.ovn.ovsDb}`, '--if-exists', 'del-port', guest.hostEnd], this.ovn.env);
      } catch {
        // the daemons may be gone already; the port dies with the temporary database
      }
      if (succeeds('ip', ['link', 'show', guest.hostEnd])) succeeds('ip', ['link', 'del', guest.hostEnd]);
      succeeds('ip', ['netns', 'del', guest.namespace]);
    }
  }
}

/** Processes whose command line names `marker` (a suite's temporary directory). */
export function processesNaming(marker: string): number[] {
  const found: number[] = [];
  for (const entry of sh('ps', ['-e', '-o', 'pid=,stat=,args=']).split('\n')) {
    const match = /^\s*(\d+)\s+(\S+)\s+(.*)$/.exec(entry);
    if (match && !match[2]!.startsWith('Z') && match[3]!.includes(marker)) found.push(Number(match[1]));
  }
  return found;
}

/**
 * The "internet" side of a public uplink: a namespace whose eth0 holds `address` (the upstream router's,
 * a.b.c.d/n), the other end of its veth pair, `uplink`, left in the root namespace without an address
 * for Nimbus to plug into its provider bridge. Transmit checksum offload is off on the namespace's end
 * (Nimbus turns it off on the uplink); `remove` takes the namespace and the pair away.
 */
export class InternetNamespace {
  readonly namespace: string;
  readonly uplink: string;

  constructor(address: string) {
    const tag = (process.pid % 100_000).toString(36);
    this.namespace = `novn-${tag}-inet`;
    this.uplink = `nu${tag}up`.slice(0, 15);
    try {
      sh('ip', ['netns', 'add', this.namespace]);
      sh('ip', ['link', 'add', this.uplink, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', this.namespace]);
      const inside = (...args: string[]) => sh('ip', ['netns', 'exec', this.namespace, ...args]);
      inside('sysctl', '-q', '-w', 'net.ipv6.conf.all.disable_ipv6=1');
      inside('ethtool', '-K', 'eth0', 'tx', 'off');
      // The root namespace's IPv6 chatter on the uplink would reach the provider bridge.
      sh('sysctl', ['-q', '-w', `net.ipv6.conf.${this.uplink}.disable_ipv6=1`]);
      inside('ip', 'addr', 'add', address, 'dev', 'eth0');
      inside('ip', 'link', 'set', 'lo', 'up');
      inside('ip', 'link', 'set', 'eth0', 'up');
    } catch (error) {
      // The suite never gets hold of a half-made side, so its afterAll could not remove it.
      this.remove();
      throw error;
    }
  }

  /** Safe to call twice. */
  remove(): void {
    if (succeeds('ip', ['link', 'show', this.uplink])) succeeds('ip', ['link', 'del', this.uplink]);
    succeeds('ip', ['netns', 'del', this.namespace]);
  }
}

const TCP_SERVER = `
import net from 'node:net';
const [name, port] = process.argv.slice(1);
// A probe reset mid-answer (a NAT moving under it) must not end the listener.
net.createServer((socket) => socket.on('error', () => {}).end(name + ' ' + socket.remoteAddress + '\\n'))
  .listen(Number(port), '0.0.0.0', () => console.log('listening'));
`;
const TCP_CLIENT = `
import net from 'node:net';
const [host, port] = process.argv.slice(1);
const socket = net.connect({ host, port: Number(port) });
let answer = '';
socket.setTimeout(1000, () => process.exit(2));
socket.on('data', (chunk) => { answer += chunk; });
socket.on('end', () => { process.stdout.write(answer); process.exit(0); });
socket.on('error', () => process.exit(1));
`;

/** The command line running `script` (an ES module) with `args` under Node inside `namespace`. */
function nodeIn(namespace: string, script: string, args: readonly string[]): string[] {
  return ['netns', 'exec', namespace, process.execPath, '--input-type=module', '-e', script, ...args];
}

/**
 * A TCP listener inside `namespace` answering each connection with `<name> <the caller's address>` and
 * closing it; resolves once it listens. `stop` ends it (afterAll calls it, also when a test failed).
 */
export async function serveTcp(namespace: string, port: number, name: string): Promise<{ stop: () => void }> {
  const server = spawn('ip', nodeIn(namespace, TCP_SERVER, [name, String(port)]), {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    server.once('exit', (code) => reject(new Error(`the TCP listener in ${namespace} exited (${code})`)));
    server.stdout!.once('data', () => resolve());
  });
  server.removeAllListeners('exit');
  return { stop: () => server.kill('SIGKILL') };
}

/** What a TCP connection from `namespace` to host:port is answered with; null when none within a second. */
export function askTcp(namespace: string, host: string, port: number): string | null {
  try {
    return sh('ip', nodeIn(namespace, TCP_CLIENT, [host, String(port)])).trim();
  } catch {
    return null;
  }
}

const TCP_SINK = `
import net from 'node:net';
const [port] = process.argv.slice(1);
net.createServer((socket) => socket.on('error', () => {}).resume())
  .listen(Number(port), '0.0.0.0', () => console.log('listening'));
`;
const TCP_SEND = `
import net from 'node:net';
const [host, port, bytes] = process.argv.slice(1);
const socket = net.connect({ host, port: Number(port) }, () => socket.end(Buffer.alloc(Number(bytes))));
socket.setTimeout(10000, () => process.exit(2));
socket.on('close', (failed) => process.exit(failed ? 1 : 0));
socket.on('error', () => process.exit(1));
`;

/** A TCP listener inside `namespace` that reads and drops whatever it is sent (bytes to count). */
export async function sinkTcp(namespace: string, port: number): Promise<{ stop: () => void }> {
  const server = spawn('ip', nodeIn(namespace, TCP_SINK, [String(port)]), {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    server.once('exit', (code) => reject(new Error(`the TCP sink in ${namespace} exited (${code})`)));
    server.stdout!.once('data', () => resolve());
  });
  server.removeAllListeners('exit');
  return { stop: () => server.kill('SIGKILL') };
}

/** Sends `bytes` zero bytes over one TCP connection from `namespace` to host:port; throws when it cannot. */
export function sendTcp(namespace: string, host: string, port: number, bytes: number): void {
  sh('ip', nodeIn(namespace, TCP_SEND, [host, String(port), String(bytes)]));
}

const TCP_SOURCE = `
import net from 'node:net';
const [port, bytes] = process.argv.slice(1);
net.createServer((socket) => socket.on('error', () => {}).end(Buffer.alloc(Number(bytes))))
  .listen(Number(port), '0.0.0.0', () => console.log('listening'));
`;
const TCP_FETCH = `
import net from 'node:net';
const [host, port] = process.argv.slice(1);
let received = 0;
const socket = net.connect({ host, port: Number(port) });
socket.on('data', (chunk) => { received += chunk.length; });
socket.setTimeout(10000, () => process.exit(2));
socket.on('end', () => { console.log(received); socket.end(); });
socket.on('error', () => process.exit(1));
`;

/** A TCP listener inside `namespace` that sends `bytes` zero bytes to each connection and closes it. */
export async function sourceTcp(
  namespace: string,
  port: number,
  bytes: number,
): Promise<{ stop: () => void }> {
  const server = spawn('ip', nodeIn(namespace, TCP_SOURCE, [String(port), String(bytes)]), {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    server.once('exit', (code) => reject(new Error(`the TCP source in ${namespace} exited (${code})`)));
    server.stdout!.once('data', () => resolve());
  });
  server.removeAllListeners('exit');
  return { stop: () => server.kill('SIGKILL') };
}

/** Reads one TCP connection from `namespace` to host:port to its end; the bytes received. */
export function fetchTcp(namespace: string, host: string, port: number): number {
  return Number(sh('ip', nodeIn(namespace, TCP_FETCH, [host, String(port)])).trim());
}

/** The lock the OVN suites take in turn (`flock` on this file), whichever vitest worker runs them. */
const OVN_SUITE_LOCK = '/tmp/nimbus-ovn-suites.lock';
/** The longest an OVN suite waits for the one before it: the VM suites take minutes on a loaded host. */
const OVN_SUITE_WAIT_MS = 30 * 60_000;

/**
 * Has the calling describe block run alone among the OVN suites: each runs its own OVS and OVN daemons,
 * and two at once on two shared cores leave ovn-controller too slow for the suites' own time limits
 * (measured: a chassis taking over 30 s to install flows). The other suites still run beside it.
 * The lock is held by a `flock` child, so a worker that dies releases it with its pipes.
 */
export function oneOvnSuiteAtATime(): void {
  let holder: ReturnType<typeof spawn> | null = null;
  beforeAll(async () => {
    const child = spawn('flock', ['--exclusive', OVN_SUITE_LOCK, '--command', 'echo held && exec cat'], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    holder = child;
    await new Promise<void>((resolve, reject) => {
      child.stdout?.once('data', () => resolve());
      child.once('error', reject);
      child.once('exit', (code) => reject(new Error(`flock ${OVN_SUITE_LOCK} exited (${code})`)));
    });
  }, OVN_SUITE_WAIT_MS);
  afterAll(() => {
    holder?.stdin?.end();
    holder?.kill();
  });
}
