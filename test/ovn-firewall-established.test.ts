/**
 * Established connections across firewall changes, on real OVN (issue 31: an SSH session through the
 * host port went silent right after a rule change). The embedded daemons in a temporary directory, the
 * driver's own network code (OvnNetwork.reconcile: the VPC's rows, its host port and namespace, all
 * re-applied at every change as the `vpc` job does), and two network namespaces standing in for
 * instances A (10.10.0.10) and B (10.10.0.20), each running a TCP echo server.
 *
 * Two long connections carry a heartbeat (a line every 20 ms, echoed) while rules are created and
 * deleted around them — rules that re-index the priorities of both instances' ACLs but decide neither
 * connection:
 *   - the SSH proxy's path: from the VPC's host namespace (OvnNetwork.connect, 169.254.169.254) to B;
 *   - an instance-to-instance connection, B to A, through the default allow of the private network.
 * Neither may miss a beat. And the other side of a stateful firewall: a connection that a new deny
 * rule covers is cut at once (its packets dropped; no reset), and busybox's `nc` — the guests' probe in
 * test/ovn-qemu-firewall.test.ts, whose `-w` bounds only the connect — then waits on it for good, which
 * is what the VM suite's probe loop showed as a silent session.
 *
 * Nothing is routed in the root namespace; every namespace, veth, OVS port and process is removed at
 * the end, even when a case fails.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Duplex } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OvnNetwork } from '../src/drivers/ovn/network.js';
import { vpcKey } from '../src/drivers/ovn/topology.js';
import type { VpcInstance } from '../src/drivers/ovn/vpcs.js';
import { macAddressFor } from '../src/resources/addresses/addresses.js';
import type { FirewallRule } from '../src/resources/networking/firewall-rules.js';
import { sleep, waitFor } from './helpers/common.js';
import { firewallRule } from './helpers/firewall.js';
import { CAN_RUN_OVN, GuestNamespaces, oneOvnSuiteAtATime, processesNaming, sh } from './helpers/ovn.js';

const ACCOUNT = 'acct_ovnestablished';
const REGION = 'us-east-1';
const PRIVATE = '10.10.0.0/16';
const ROUTER = '10.10.0.1';
const A: VpcInstance = {
  id: 'ins_estalpha',
  account_id: ACCOUNT,
  region: REGION,
  name: 'alpha',
  private_ip: '10.10.0.10',
  tags: {},
  firewall_preset: 'ssh-only',
};
const B: VpcInstance = { ...A, id: 'ins_estbeta', name: 'beta', private_ip: '10.10.0.20' };
/** The echo port both connections use (the defaults let the private network in; the host port always passes). */
const ECHO = 7000;
/** The port the rules deny, on which a connection is cut. */
const DENIED = 8080;
const BEAT_MS = 20;
/**
 * The longest an echo may take on a healthy connection: a lost segment costs the 200 ms minimum
 * retransmission timeout, a loaded host some more; a connection a change blocked never answers again.
 */
const MAX_GAP_MS = 1_500;

/** A TCP echo server on each port, one process (killed, it leaves no forked child behind). */
const ECHO_SERVER = `
import net from 'node:net';
for (const port of process.argv.slice(1).map(Number)) {
  net.createServer((socket) => { socket.on('error', () => {}); socket.pipe(socket); })
    .listen(port, '0.0.0.0', () => console.log('listening ' + port));
}
`;

/**
 * A line written every BEAT_MS on a stream to an echo server, and the time each came back: how long
 * the connection went without an answer shows whether a change touched it.
 */
class Heartbeat {
  private readonly sentAt = new Map<number, number>();
  private readonly echoedAt: number[] = [];
  private next = 0;
  private rest = '';
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly stream: Duplex) {
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      const lines = (this.rest + chunk).split('\n');
      this.rest = lines.pop() ?? '';
      for (const line of lines) if (this.sentAt.has(Number(line))) this.echoedAt.push(Date.now());
    });
    stream.on('error', () => {});
    this.timer = setInterval(() => {
      this.sentAt.set(this.next, Date.now());
      stream.write(`${this.next++}\n`);
    }, BEAT_MS);
  }

  echoes(): number {
    return this.echoedAt.length;
  }

  /** The longest time without an echo since `since`, up to now. */
  longestSilence(since: number): number {
    const times = [since, ...this.echoedAt.filter((at) => at > since), Date.now()];
    let longest = 0;
    for (let i = 1; i < times.length; i++) longest = Math.max(longest, times[i]! - times[i - 1]!);
    return longest;
  }

  stop(): void {
    clearInterval(this.timer);
    this.stream.destroy();
  }
}

describe.runIf(CAN_RUN_OVN)('established connections across firewall changes, on OVN', () => {
  oneOvnSuiteAtATime();
  let dir: string;
  let network: OvnNetwork;
  let guests: GuestNamespaces;
  const namespaces: Record<'a' | 'b', string> = { a: '', b: '' };
  const processes: ChildProcess[] = [];
  const beats: Heartbeat[] = [];
  const vpc = { accountId: ACCOUNT, region: REGION };

  /** The VPC with `rules`, as the `vpc` job applies it, once every chassis has it in its flows. */
  const apply = async (rules: readonly FirewallRule[]) => {
    await network.reconcile(ACCOUNT, { instances: [A, B], rules: new Map([[vpcKey(vpc), rules]]), vpns: [] });
    await network.nb.syncHypervisors();
  };
  /** A byte stream from `namespace` to ip:port (socat, as the host port's connections are made). */
  const connectFrom = (namespace: string, ip: string, port: number): Duplex => {
    const child = spawn('ip', ['netns', 'exec', namespace, 'socat', '-', `TCP:${ip}:${port}`], {
      stdio: ['pipe', 'pipe', 'ignore'],
    });
    processes.push(child);
    const stream = Duplex.from({ readable: child.stdout, writable: child.stdin });
    stream.on('close', () => child.kill('SIGKILL'));
    return stream;
  };
  const deny = (instance: VpcInstance, port: number) =>
    firewallRule({
      direction: 'inbound',
      action: 'deny',
      protocol: 'tcp',
      ports: String(port),
      remote: [PRIVATE],
      priority: 100,
      targets: { instance_ids: [instance.id], tags: {} },
      accountId: ACCOUNT,
    });

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-ovn-established-'));
    network = await OvnNetwork.start({ dir: path.join(dir, 'ovn'), central: null });
    guests = new GuestNamespaces(network.endpoints);
    for (const [name, instance] of [
      ['a', A],
      ['b', B],
    ] as const) {
      const guest = guests.plug(instance.id, macAddressFor(instance.id), `${instance.private_ip}/16`);
      namespaces[name] = guest.namespace;
      // The host port's address (169.254.169.254) is reached through the VPC's router.
      sh('ip', ['netns', 'exec', guest.namespace, 'ip', 'route', 'add', 'default', 'via', ROUTER]);
      const server = spawn(
        'ip',
        [
          'netns',
          'exec',
          guest.namespace,
          process.execPath,
          '--input-type=module',
          '-e',
          ECHO_SERVER,
          String(ECHO),
          String(DENIED),
        ],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      processes.push(server);
      await new Promise<void>((resolve, reject) => {
        server.once('exit', (code) =>
          reject(new Error(`the echo server in ${guest.namespace} exited (${code})`)),
        );
        let seen = '';
        server.stdout!.on('data', (chunk: Buffer) => {
          seen += chunk.toString();
          if (seen.split('listening').length > 2) resolve();
        });
      });
    }
    await apply([]);
  }, 180_000);

  afterAll(async () => {
    for (const beat of beats) beat.stop();
    for (const child of processes) child.kill('SIGKILL');
    guests?.remove();
    if (network) {
      // No instance left: the VPC's rows, host port and namespace go.
      await network.reconcile(ACCOUNT, { instances: [], rules: new Map(), vpns: [] }).catch(() => {});
      expect(network.hostNamespaces()).toEqual([]);
      await network.close();
    }
    if (dir) {
      await waitFor('no process of the suite left', () =>
        processesNaming(dir).length === 0 ? true : undefined,
      );
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("keeps the host port's connection and an instance-to-instance one answering while rules change around them", async () => {
    // ovn-controller binds the ports shortly after the first apply (on a loaded host, seconds).
    const fromHost = await waitFor(
      'the host namespace reaching B',
      async () => {
        const stream = network.connect(vpc, B.private_ip, ECHO);
        if (!stream) return undefined;
        const beat = new Heartbeat(stream);
        await sleep(500);
        if (beat.echoes() > 0) return beat;
        beat.stop();
        return undefined;
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    beats.push(fromHost);
    const betweenInstances = new Heartbeat(connectFrom(namespaces.b, A.private_ip, ECHO));
    beats.push(betweenInstances);
    await waitFor('B reaching A', () => (betweenInstances.echoes() > 0 ? true : undefined), {
      timeoutMs: 30_000,
      intervalMs: 50,
    });
    // Each change adds or removes a deny above the defaults on A, on B, or both: every ACL of a rule
    // below it moves one priority down or back up, and the host port is set up again.
    const sets = [[deny(A, DENIED)], [deny(A, DENIED), deny(B, DENIED)], [deny(B, DENIED)], []];
    const started = Date.now();
    for (let change = 0; change < 12; change++) {
      await apply(sets[change % sets.length]!);
      await sleep(150);
    }
    await sleep(MAX_GAP_MS);
    const silences = {
      hostPortToB: fromHost.longestSilence(started),
      bToA: betweenInstances.longestSilence(started),
    };
    console.info(`longest silence over 12 rule changes (ms): ${JSON.stringify(silences)}`);
    expect(silences.hostPortToB).toBeLessThan(MAX_GAP_MS);
    expect(silences.bToA).toBeLessThan(MAX_GAP_MS);
  }, 120_000);

  it("leaves the host namespace's neighbour table alone when a change applies the host port again", async () => {
    // Setting an interface's MAC, even to the one it has, flushes its neighbour table, permanent entries
    // included: each rule change made Nimbus's connections to the guests resolve the router again.
    const namespace = network.namespaceOf(vpc);
    const marker = ['169.254.7.7', 'lladdr', '02:00:00:00:07:07', 'dev', 'vpc0', 'nud', 'permanent'];
    sh('ip', ['netns', 'exec', namespace, 'ip', 'neigh', 'replace', ...marker]);
    await apply([deny(A, DENIED)]);
    await apply([]);
    expect(sh('ip', ['netns', 'exec', namespace, 'ip', 'neigh', 'show', '169.254.7.7'])).toContain(
      '02:00:00:00:07:07',
    );
  });

  it('cuts a connection that a new deny rule covers, and busybox nc then waits on it for good', async () => {
    await apply([]);
    const cut = new Heartbeat(connectFrom(namespaces.b, A.private_ip, DENIED));
    beats.push(cut);
    await waitFor('B reaching A on the port', () => (cut.echoes() > 0 ? true : undefined), {
      timeoutMs: 30_000,
      intervalMs: 50,
    });
    // busybox nc as the VM suite's probe runs it, connected, its request not sent yet.
    const nc = spawn(
      'ip',
      ['netns', 'exec', namespaces.b, 'busybox', 'nc', '-w', '1', A.private_ip, String(DENIED)],
      { stdio: ['pipe', 'pipe', 'ignore'] },
    );
    processes.push(nc);
    let ncExited = false;
    nc.on('exit', () => {
      ncExited = true;
    });
    await waitFor(
      'busybox nc connected',
      () =>
        sh('ip', ['netns', 'exec', namespaces.b, 'ss', '-tnH', 'state', 'established', `dport = ${DENIED}`])
          .split('\n')
          .filter(Boolean).length >= 2
          ? true
          : undefined,
      { timeoutMs: 10_000, intervalMs: 50 },
    );

    await apply([deny(A, DENIED)]);
    const denied = Date.now();
    nc.stdin!.end('hello\n');
    await sleep(MAX_GAP_MS);
    const seen = cut.echoes();
    // Neither connection hears from A again: their packets are dropped, and no reset comes back.
    await sleep(3_000);
    expect(cut.echoes(), 'echoes on the cut connection after the deny').toBe(seen);
    expect(cut.longestSilence(denied)).toBeGreaterThan(3_000);
    // `-w 1` bounds the connect only: nc still waits for an answer that cannot come.
    expect(ncExited).toBe(false);
    nc.kill('SIGKILL');
  }, 120_000);
});
