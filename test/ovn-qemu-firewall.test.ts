/**
 * The firewall decides real VM packets, and names resolve inside the VPC (issue 31, items 4 and 5): a
 * child server with NIMBUS_DRIVER=qemu and NIMBUS_NETWORK=ovn, driven through its HTTPS API, two VMs of
 * one account. From VM B (over SSH into B) a port on VM A that the rules leave open answers and one a
 * rule closes times out; every rule made or deleted through the API reaches the data path, and how soon
 * after the API's answer is printed (the 2 s target is docs/benchmarks.md's), measured by a probe loop
 * running in B whose lines the test timestamps as they arrive;
 * B resolves A's `.internal` names (by id and by name) through OVN's DNS, and stops once A is deleted.
 * Deleting a rule, then A, then B leaves no ACL, port group, address set or DNS row behind, and
 * `nimbus admin network check` agrees with OVN throughout.
 *
 * The listener in A is busybox's httpd (the guest image is busybox and dropbear); the probes are
 * busybox's nc and nslookup. Clean-up as test/ovn-qemu-vpc.test.ts: the server stopped, QEMU killed,
 * taps and namespaces deleted, any daemon left killed, the data dir removed, even when a case fails.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OvnNetwork } from '../src/drivers/ovn/network.js';
import { readRows } from '../src/drivers/ovn/topology.js';
import { type ChildServer, spawnServer } from './helpers/child-server.js';
import { runNimbus } from './helpers/cli.js';
import { waitFor } from './helpers/common.js';
import { CAN_RUN_OVN, oneOvnSuiteAtATime } from './helpers/ovn.js';
import { ovnQemuEnv, removeOvnServer } from './helpers/ovn-server.js';
import { qemuAvailable, ssh, sshArguments, sshKeyPair } from './helpers/qemu.js';

type Json = Record<string, any>;

const canRun = CAN_RUN_OVN && (await qemuAvailable());

/** Two guests booting at once under TCG on a shared host. */
const BOOT_MS = 420_000;
/** Issue 31 item 4: a rule change reaches the data path within this of the API's answer. */
const RULE_TO_DATA_PATH_MS = 2_000;
/** How long a change may take before the case fails: it did not reach the packets at all. */
const CHANGE_TIMEOUT_MS = 60_000;
/**
 * How long one probe may take: busybox's `nc -w` bounds only the connect, so a probe whose connection a
 * closing change cuts after the connect (its request dropped, no reset) would otherwise wait for good
 * (test/ovn-firewall-established.test.ts shows it); `timeout` ends it and the loop says `cut`.
 */
const PROBE_LIMIT_S = 2;
/** A probe ends within PROBE_LIMIT_S; a loop silent this long has lost its SSH session, which fails. */
const SILENT_SESSION_MS = 8_000;
const ROUNDS = 10;
const OPEN = 8080;
const CLOSED = 8081;
const FIREWALL_TABLES = new Set(['ACL', 'Address_Set', 'Port_Group', 'DNS']);

/**
 * A loop running in a guest over one SSH session: a TCP probe of `ip:port` after another, each line
 * stamped with the host's clock as it arrives. `start` is printed before each probe, so the first probe
 * that shows a new state began no earlier than the line before its result. A probe ends `open` (A
 * answered), `closed` (no connection) or `cut` (connected, then no answer: a closing change reached the
 * data path during it). The session must last the whole loop: one that ends or goes silent fails.
 */
class ProbeLoop {
  readonly lines: { at: number; text: string }[] = [];
  private readonly child: ChildProcess;
  private rest = '';
  private stopped = false;
  /** Why the session was lost, once it was. */
  private lost: string | null = null;
  private readonly watchdog: NodeJS.Timeout;

  constructor(
    endpoint: { host: string; port: number; user: string },
    privateKey: string,
    ip: string,
    port: number,
  ) {
    const request = `printf 'GET / HTTP/1.0\\r\\n\\r\\n'`;
    const probe = `r=$(${request} | timeout ${PROBE_LIMIT_S} nc -w 1 ${ip} ${port} 2>/dev/null; echo "rc=$?")`;
    // 143: timeout ended nc, which had connected (a refused or unanswered connect ends by itself).
    const verdict = `case "$r" in *hello*) echo open;; *rc=143*) echo cut;; *) echo closed;; esac`;
    const script = `while :; do echo start; ${probe} 2>/dev/null; ${verdict}; done`;
    const startedAt = Date.now();
    this.child = spawn('ssh', [...sshArguments(endpoint, privateKey), script], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    this.child.stdout!.setEncoding('utf8');
    this.child.stdout!.on('data', (chunk: string) => {
      const at = Date.now();
      const parts = (this.rest + chunk).split('\n');
      this.rest = parts.pop() ?? '';
      for (const text of parts) this.lines.push({ at, text: text.trim() });
    });
    this.watchdog = setInterval(() => {
      // The session's first line may wait for SSH's handshake with a TCG guest on a loaded host.
      const [last, limit] =
        this.lines.length === 0 ? [startedAt, 30_000] : [this.lines.at(-1)!.at, SILENT_SESSION_MS];
      if (Date.now() - last > limit) this.lose(`silent for ${limit} ms`);
    }, 500);
    this.child.on('exit', (code, signal) => this.lose(`ended (${code ?? signal})`));
  }

  private lose(why: string): void {
    clearInterval(this.watchdog);
    if (this.stopped || this.lost !== null) return;
    this.lost = `the probe loop's SSH session was lost: ${why}; ${this.describe()}`;
    this.child.kill('SIGKILL');
  }

  /** The last lines, for a failure's message. */
  describe(): string {
    const recent = this.lines.slice(-6).map((line) => `${line.text}@${line.at}`);
    return `last lines ${recent.join(' ')}; now ${Date.now()}`;
  }

  /** Probes a closing change cut after their connect. */
  cuts(): number {
    return this.lines.filter((line) => line.text === 'cut').length;
  }

  /** The state of the last probe that finished (a cut one shows the port closed). */
  last(): 'open' | 'closed' | undefined {
    for (let i = this.lines.length - 1; i >= 0; i--) {
      const text = this.lines[i]!.text;
      if (text === 'open') return 'open';
      if (text === 'closed' || text === 'cut') return 'closed';
    }
    return undefined;
  }

  /**
   * How long after `since` the data path showed `state`: for `closed`, when the first probe to time
   * out or be cut began (a probe begun while the port was open answers within milliseconds; a cut one
   * connected just before the change); for `open`, when the first probe to answer finished (one begun
   * while closed may have waited for a SYN's retry). Fails at once if the session was lost.
   */
  async reached(state: 'open' | 'closed', since: number, timeoutMs = 15_000): Promise<number> {
    const shows = state === 'open' ? ['open'] : ['closed', 'cut'];
    return waitFor(
      `the probe loop to see ${state}`,
      () => {
        if (this.lost !== null) throw new Error(this.lost);
        const first = this.lines.findIndex((line) => line.at >= since && shows.includes(line.text));
        if (first < 0) return undefined;
        const shown = this.lines[first]!;
        if (state === 'open') return shown.at - since;
        const begun = this.lines.slice(0, first).findLast((line) => line.text === 'start');
        return Math.max(0, (begun?.at ?? shown.at) - since);
      },
      { timeoutMs, intervalMs: 20, lastSeen: () => this.describe() },
    );
  }

  /** Ends the loop (lostBecause still tells whether its session was lost before). */
  stop(): void {
    this.stopped = true;
    clearInterval(this.watchdog);
    this.child.kill('SIGKILL');
  }

  /** Why the session was lost, or null. */
  lostBecause(): string | null {
    return this.lost;
  }
}

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

describe.runIf(canRun)('the firewall and DNS of QEMU VMs on OVN, through the API', () => {
  oneOvnSuiteAtATime();
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-ovn-fw-'));
  const network = OvnNetwork.attach({ dir: path.join(dataDir, 'ovn'), central: null });
  let server: ChildServer | undefined;
  let env: Record<string, string> = {};
  let keys: { privateKey: string; publicKey: string };
  let key = '';
  const vms: Record<'a' | 'b', Json> = { a: {}, b: {} };
  const made: string[] = [];
  const loops: ProbeLoop[] = [];

  const api = (method: string, url: string, body?: unknown) =>
    server!.request(method, url, { key, ...(body === undefined ? {} : { body }) });
  /** A change that never showed fails with what the server logged last (the VPC job's runs among it). */
  const withServerLog = <T>(waiting: Promise<T>): Promise<T> =>
    waiting.catch((error: Error) => {
      throw new Error(`${error.message}\nserver log (end):\n${server?.output().slice(-4000) ?? ''}`);
    });
  const inGuest = (vm: Json, command: string) => ssh(vm.ssh, keys.privateKey, command, 90_000);
  const admin = (...args: string[]) =>
    runNimbus(['admin', ...args], {
      env: { ...process.env, NIMBUS_DATA_DIR: dataDir, ...env },
      timeoutMs: 120_000,
    });
  /** Whether A's `port` answers B with the page A's httpd serves. */
  const answers = async (port: number) =>
    (
      await inGuest(
        vms.b,
        `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | timeout 5 nc -w 3 ${vms.a.private_ip} ${port} 2>/dev/null | grep -c hello`,
      )
    ).stdout.trim() === '1';
  /** What B's resolver (OVN, asked at the address DHCP gave) answers for `name`. */
  const resolves = async (name: string) =>
    (await inGuest(vms.b, `timeout 10 nslookup ${name} 2>&1; true`)).stdout;
  const firewallRows = async () =>
    (await readRows(network.nb)).filter((row) => FIREWALL_TABLES.has(row.table));
  const createRule = async (body: Json) => {
    const reply = await api('POST', '/v1/firewall/rules', body);
    expect(reply.status, reply.text).toBe(201);
    return reply.body.data as Json;
  };
  const denyOnA = (port: number, name: string) => ({
    name,
    direction: 'inbound',
    action: 'deny',
    protocol: 'tcp',
    ports: String(port),
    sources: ['10.10.0.0/16'],
    priority: 100,
    targets: { instance_ids: [vms.a.id] },
    region: 'us-east-1',
  });

  beforeAll(async () => {
    keys = await sshKeyPair();
    env = await ovnQemuEnv();
    server = await spawnServer({ dataDir, env, startTimeoutMs: 120_000 });
    key = server.rootKey;
    const made = await api('POST', '/v1/ssh-keys', { name: 'k', public_key: keys.publicKey });
    expect(made.status, made.text).toBe(201);
  }, 600_000);

  afterAll(async () => {
    for (const loop of loops) loop.stop();
    await removeOvnServer({ server, dataDir, network, instanceIds: made });
    rmSync(path.dirname(keys?.privateKey ?? path.join(dataDir, 'x')), { recursive: true, force: true });
    expect(network.hostNamespaces()).toEqual([]);
  }, 120_000);

  it(
    'boots two VMs, each port with its firewall in OVN',
    async () => {
      for (const [name, vmName] of [
        ['a', 'fw-alpha'],
        ['b', 'fw-beta'],
      ] as const) {
        const reply = await api('POST', '/v1/instances', {
          name: vmName,
          instance_type: 'compute-1x',
          region: 'us-east-1',
          image: 'debian-12',
          ssh_keys: ['k'],
        });
        expect(reply.status, reply.text).toBe(202);
        made.push(reply.body.data.id);
        vms[name] = reply.body.data;
      }
      for (const name of ['a', 'b'] as const) {
        vms[name] = await waitFor(
          `${name} running`,
          async () => {
            const reply = await api('GET', `/v1/instances/${vms[name].id}`);
            expect(reply.body.data?.status).not.toBe('error');
            return reply.body.data?.status === 'running' ? (reply.body.data as Json) : undefined;
          },
          { timeoutMs: BOOT_MS, intervalMs: 1000 },
        );
      }
      const groups = (await firewallRows()).filter((row) => row.table === 'Port_Group').map((r) => r.key);
      expect(groups.sort()).toEqual(made.map((id) => `nimbus_${id}`).sort());
      // A's listeners: busybox httpd on two ports, serving one page.
      const started = await inGuest(
        vms.a,
        `mkdir -p /tmp/www && echo hello > /tmp/www/index.html && busybox httpd -p ${OPEN} -h /tmp/www && busybox httpd -p ${CLOSED} -h /tmp/www && echo up`,
      );
      expect(started.stdout, started.stderr).toContain('up');
    },
    BOOT_MS + 120_000,
  );

  it('answers on a port the rules leave open and times out on one a rule closes', async () => {
    // The defaults let the private network in: both answer.
    await waitFor('A:8081 answering B', async () => ((await answers(CLOSED)) ? true : undefined), {
      timeoutMs: 60_000,
      intervalMs: 1000,
    });
    await createRule(denyOnA(CLOSED, 'close-8081'));
    await waitFor('A:8081 closed to B', async () => ((await answers(CLOSED)) ? undefined : true), {
      timeoutMs: 30_000,
      intervalMs: 500,
    });
    expect(await answers(OPEN)).toBe(true);
    // The rule decides packets, not Nimbus's own traffic: SSH through the host port still works.
    expect((await inGuest(vms.a, 'echo still')).stdout).toContain('still');
    const check = await admin('network', 'check');
    expect(check.code, check.stdout + check.stderr).toBe(0);
  }, 180_000);

  // The 2 s target is a benchmark figure (docs/benchmarks.md, from this case's printed line), not an
  // assertion: on a loaded shared host a timed assertion fails for the host's sake, not the code's.
  it("takes every rule change to the data path, and prints how soon after the API's answer", async () => {
    const loop = new ProbeLoop(vms.b.ssh, keys.privateKey, vms.a.private_ip, OPEN);
    loops.push(loop);
    const closing: number[] = [];
    const opening: number[] = [];
    try {
      await waitFor('the probe loop to see A:8080 open', () => (loop.last() === 'open' ? true : undefined), {
        timeoutMs: 60_000,
        intervalMs: 50,
      });
      for (let round = 0; round < ROUNDS; round++) {
        const rule = await createRule(denyOnA(OPEN, `close-8080-${round}`));
        closing.push(await withServerLog(loop.reached('closed', Date.now(), CHANGE_TIMEOUT_MS)));
        const deleted = await api('DELETE', `/v1/firewall/rules/${rule.id}`);
        expect(deleted.status, deleted.text).toBe(200);
        opening.push(await withServerLog(loop.reached('open', Date.now(), CHANGE_TIMEOUT_MS)));
      }
    } finally {
      loop.stop();
    }
    // One SSH session carried the whole loop, through every change.
    expect(loop.lostBecause()).toBeNull();
    const all = [...closing, ...opening];
    console.info(
      `rule change → data path (ms), ${all.length} changes: closing ${closing.join(', ')}; opening ${opening.join(', ')}; p50 ${percentile(all, 50)}, p99 ${percentile(all, 99)} (target ${RULE_TO_DATA_PATH_MS}); probes cut by a closing change ${loop.cuts()}`,
    );
    expect(all).toHaveLength(2 * ROUNDS);
  }, 420_000);

  it('follows a preset change and a tag change too', async () => {
    // A rule selecting instances by tag: B's new tag makes it close B's port 22 to the private network,
    // so A's SSH to B (a tcp connection within the VPC) times out; taking the tag off opens it again.
    await createRule({
      ...denyOnA(22, 'tagged-no-ssh'),
      targets: { tags: { locked: 'yes' } },
    });
    const greets = async () =>
      (await inGuest(vms.a, `timeout 5 nc -w 3 ${vms.b.private_ip} 22 < /dev/null | head -c 4`)).stdout ===
      'SSH-';
    expect(await greets()).toBe(true);
    expect((await api('PATCH', `/v1/instances/${vms.b.id}`, { tags: { locked: 'yes' } })).status).toBe(200);
    await waitFor('B:22 closed to A by the tag', async () => ((await greets()) ? undefined : true), {
      timeoutMs: 20_000,
      intervalMs: 500,
    });
    // Nimbus's own path to B (the host port) is untouched by the rule.
    expect((await inGuest(vms.b, 'echo still')).stdout).toContain('still');
    expect((await api('PATCH', `/v1/instances/${vms.b.id}`, { tags: {} })).status).toBe(200);
    await waitFor('B:22 open to A again', async () => ((await greets()) ? true : undefined), {
      timeoutMs: 20_000,
      intervalMs: 500,
    });
    // A preset's ACLs follow the instance's preset: `web` adds its openings to A's port group.
    const presetAcls = async () =>
      (await firewallRows()).filter(
        (row) =>
          row.table === 'ACL' &&
          (row.columns.external_ids as Record<string, string>)['nimbus:instance'] === vms.a.id &&
          (row.columns.external_ids as Record<string, string>)['nimbus:rule'] === 'preset',
      ).length;
    expect(await presetAcls()).toBe(1);
    expect((await api('PATCH', `/v1/instances/${vms.a.id}`, { firewall_preset: 'web' })).status).toBe(200);
    await waitFor('A’s web preset in OVN', async () => ((await presetAcls()) === 3 ? true : undefined), {
      timeoutMs: 10_000,
      intervalMs: 100,
    });
  }, 180_000);

  it("resolves the other VM's .internal names through OVN, and stops once it is deleted", async () => {
    expect(vms.a.internal_hostname).toBe(`${vms.a.id}.us-east-1.internal`);
    const byId = await resolves(vms.a.internal_hostname);
    expect(byId).toContain(vms.a.private_ip);
    const byName = await resolves('fw-alpha.us-east-1.internal');
    expect(byName).toContain(vms.a.private_ip);
    // And A resolves B the same way.
    expect(
      (await inGuest(vms.a, `timeout 10 nslookup ${vms.b.internal_hostname} 2>&1; true`)).stdout,
    ).toContain(vms.b.private_ip);

    expect((await api('DELETE', `/v1/instances/${vms.a.id}`)).status).toBe(202);
    await waitFor(
      'A gone',
      async () => ((await api('GET', `/v1/instances/${vms.a.id}`)).status === 404 ? true : undefined),
      { timeoutMs: 120_000, intervalMs: 500 },
    );
    await waitFor(
      'A’s names gone from B’s resolver',
      async () => {
        const [id, name] = [
          await resolves(vms.a.internal_hostname),
          await resolves('fw-alpha.us-east-1.internal'),
        ];
        return id.includes(vms.a.private_ip) || name.includes(vms.a.private_ip) ? undefined : true;
      },
      { timeoutMs: 30_000, intervalMs: 1000 },
    );
    expect(await resolves(vms.b.internal_hostname)).toContain(vms.b.private_ip);
    // Nothing of A's firewall left: its port group and ACLs went with its port.
    const rows = await firewallRows();
    expect(rows.filter((row) => JSON.stringify(row.columns).includes(vms.a.id))).toEqual([]);
    expect((await admin('network', 'check')).code).toBe(0);
  }, 240_000);

  it('leaves no ACL, port group, address set or DNS row once the rules and the last instance are gone', async () => {
    const listed = await api('GET', '/v1/firewall/rules?limit=100');
    for (const rule of listed.body.data as Json[]) {
      expect((await api('DELETE', `/v1/firewall/rules/${rule.id}`)).status).toBe(200);
    }
    await waitFor(
      'no user rule left in OVN',
      async () =>
        (await firewallRows()).some(
          (row) =>
            (row.columns.external_ids as Record<string, string>)['nimbus:rule']?.startsWith('fwr') ?? false,
        )
          ? undefined
          : true,
      { timeoutMs: 10_000, intervalMs: 100 },
    );
    expect((await api('DELETE', `/v1/instances/${vms.b.id}`)).status).toBe(202);
    await waitFor(
      'the VPC gone',
      async () => ((await readRows(network.nb)).length === 0 ? true : undefined),
      {
        timeoutMs: 120_000,
        intervalMs: 500,
      },
    );
    expect(await firewallRows()).toEqual([]);
    expect((await admin('network', 'check')).code).toBe(0);
  }, 180_000);
});
