import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OVN_PROGRAMS } from '../src/drivers/ovn/daemons.js';
import { OvnNetwork } from '../src/drivers/ovn/network.js';
import { readRows } from '../src/drivers/ovn/topology.js';
import { DRIVER_PROGRAMS } from '../src/drivers/qemu/qemu.js';
import { type ChildServer, spawnServer } from './helpers/child-server.js';
import { runNimbus, serveUntilExit } from './helpers/cli.js';
import { waitFor } from './helpers/common.js';
import { CAN_RUN_OVN, oneOvnSuiteAtATime, processesNaming, sh } from './helpers/ovn.js';
import { ovnQemuEnv, removeOvnServer } from './helpers/ovn-server.js';
import { qemuAvailable, ssh, sshKeyPair } from './helpers/qemu.js';

type Json = Record<string, any>;

const canRun = CAN_RUN_OVN && (await qemuAvailable());

// The pattern of test/qemu-driver-programs.test.ts: stand-in programs on a PATH of their own, nothing booted.
describe('serve with NIMBUS_NETWORK=ovn', { timeout: 60_000 }, () => {
  it("refuses to start without OVN's programs, naming them and their Debian packages once", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-ovn-programs-'));
    try {
      const missing = ['ovn-controller', 'ovn-northd', 'ovs-vswitchd'];
      for (const program of [...DRIVER_PROGRAMS, ...OVN_PROGRAMS].flatMap((need) => need.programs)) {
        if (missing.includes(program)) continue;
        writeFileSync(path.join(dir, program), '#!/bin/sh\nexit 0\n');
        chmodSync(path.join(dir, program), 0o755);
      }
      const { code, stderr } = await serveUntilExit({
        PATH: dir,
        NIMBUS_DRIVER: 'qemu',
        NIMBUS_NETWORK: 'ovn',
        NIMBUS_DATA_DIR: path.join(dir, 'data'),
        NIMBUS_IMAGE_DIR: path.join(dir, 'images'),
      });
      expect(code).toBe(2);
      expect(stderr).toContain('NIMBUS_DRIVER=qemu NIMBUS_NETWORK=ovn needs programs that are not installed');
      expect(stderr).toContain('ovn-controller (Debian package ovn-host)');
      expect(stderr).toContain('ovn-northd (Debian package ovn-central)');
      expect(stderr).toContain('apt-get install openvswitch-switch ovn-central ovn-host');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
/** Three guests booting at once under TCG on a shared host. */
const BOOT_MS = 420_000;

describe.runIf(canRun)('QEMU VMs on OVN through the API', () => {
  oneOvnSuiteAtATime();
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-ovn-qemu-'));
  const network = OvnNetwork.attach({ dir: path.join(dataDir, 'ovn'), central: null });
  let server: ChildServer | undefined;
  let env: Record<string, string> = {};
  let keys: { privateKey: string; publicKey: string };
  const accounts: { a: string; b: string } = { a: '', b: '' };
  const vms: Record<'a1' | 'a2' | 'b1', Json> = { a1: {}, a2: {}, b1: {} };
  const made: string[] = [];

  const start = async () => {
    server = await spawnServer({ dataDir, env, startTimeoutMs: 120_000 });
  };
  const api = (method: string, url: string, key: string, body?: unknown) =>
    server!.request(method, url, { key, ...(body === undefined ? {} : { body }) });
  const inGuest = (vm: Json, command: string) => ssh(vm.ssh, keys.privateKey, command, 90_000);
  const admin = (...args: string[]) =>
    runNimbus(['admin', ...args], {
      env: { ...process.env, NIMBUS_DATA_DIR: dataDir, ...env },
      timeoutMs: 120_000,
    });
  /** Nimbus's rows in the northbound database, as comparable text. */
  const rows = async () =>
    (await readRows(network.nb))
      .map((row) => `${row.table} ${row.key} ${JSON.stringify(row.columns)}`)
      .sort();
  /** The VPCs Nimbus's rows belong to. */
  const vpcsInOvn = async () =>
    new Set(
      (await readRows(network.nb)).map(
        (row) => (row.columns.external_ids as Record<string, string>)['nimbus:vpc'],
      ),
    );
  const pings = async (from: Json, address: string) =>
    (
      await inGuest(from, `/usr/local/bin/ping -c 2 -W 2 ${address} > /dev/null && echo reached`)
    ).stdout.includes('reached');
  /** Whether `address`'s port 22 answers `from` with an SSH greeting (TCP, through the VPC). */
  const greets = async (from: Json, address: string) =>
    (await inGuest(from, `nc -w 3 ${address} 22 < /dev/null | head -c 4`)).stdout === 'SSH-';

  beforeAll(async () => {
    keys = await sshKeyPair();
    env = await ovnQemuEnv({ NIMBUS_METRICS_INTERVAL_SECONDS: '1' });
    await start();
    accounts.a = server!.rootKey;
    const other = await admin('create-account', '--email', `ovn-b-${Date.now()}@example.com`, '--json');
    expect(other.code, other.stderr).toBe(0);
    accounts.b = JSON.parse(other.stdout).api_key;
    for (const key of [accounts.a, accounts.b]) {
      const made = await api('POST', '/v1/ssh-keys', key, { name: 'k', public_key: keys.publicKey });
      expect(made.status, made.text).toBe(201);
    }
  }, 600_000);

  afterAll(async () => {
    await removeOvnServer({ server, dataDir, network, instanceIds: made });
    rmSync(path.dirname(keys?.privateKey ?? path.join(dataDir, 'x')), { recursive: true, force: true });
    expect(network.hostNamespaces()).toEqual([]);
  }, 120_000);

  it(
    'boots VMs whose guests take their private address and gateway from OVN',
    async () => {
      const create = async (key: string, name: string) => {
        const reply = await api('POST', '/v1/instances', key, {
          name,
          instance_type: 'compute-1x',
          region: 'us-east-1',
          image: 'debian-12',
          ssh_keys: ['k'],
          // busybox's ping needs a raw socket, so root: the user data (run as root) installs a setuid
          // copy, as a distribution's ping is.
          user_data:
            '#!/bin/sh\nmkdir -p /usr/local/bin\ncp /bin/busybox /usr/local/bin/ping\nchmod 4755 /usr/local/bin/ping\n',
        });
        expect(reply.status, reply.text).toBe(202);
        made.push(reply.body.data.id);
        return reply.body.data as Json;
      };
      const created = {
        a1: await create(accounts.a, 'alpha-one'),
        a2: await create(accounts.a, 'alpha-two'),
        b1: await create(accounts.b, 'beta-one'),
      };
      for (const [name, vm] of Object.entries(created) as [keyof typeof vms, Json][]) {
        const key = name.startsWith('a') ? accounts.a : accounts.b;
        vms[name] = await waitFor(
          `${name} running`,
          async () => {
            const reply = await api('GET', `/v1/instances/${vm.id}`, key);
            expect(reply.body.data?.status).not.toBe('error');
            return reply.body.data?.status === 'running' ? (reply.body.data as Json) : undefined;
          },
          { timeoutMs: BOOT_MS, intervalMs: 1000 },
        );
      }
      // Overlapping blocks: each account's first instance has the same address.
      expect(vms.b1.private_ip).toBe(vms.a1.private_ip);
      for (const name of ['a1', 'a2', 'b1'] as const) {
        const vm = vms[name];
        const seen = await inGuest(vm, 'hostname; ip -4 -o addr show dev eth0; ip route show default');
        expect(seen.code, seen.stderr).toBe(0);
        // The seed names the guest (the API's hostname); the address and gateway came from OVN's DHCP.
        const [hostname] = seen.stdout.split('\n');
        expect(hostname).toBe(vm.hostname);
        expect(seen.stdout).toContain(`inet ${vm.private_ip}/16`);
        expect(seen.stdout).toContain('default via 10.10.0.1');
      }
    },
    BOOT_MS + 120_000,
  );

  it("carries packets between one account's VMs and none to the other account's", async () => {
    // The user data (run in the background at first boot) may still be on its way.
    await waitFor(
      'a1 pinging a2',
      async () => ((await pings(vms.a1, vms.a2.private_ip)) ? true : undefined),
      {
        timeoutMs: 60_000,
        intervalMs: 1000,
      },
    );
    expect(await pings(vms.a2, vms.a1.private_ip)).toBe(true);
    expect(await greets(vms.a1, vms.a2.private_ip)).toBe(true);
    // a2's address exists only in A's VPC: from B's it leads nowhere.
    expect(await pings(vms.b1, '10.10.0.1')).toBe(true);
    expect(await pings(vms.b1, vms.a2.private_ip)).toBe(false);
    expect(await greets(vms.b1, vms.a2.private_ip)).toBe(false);
  }, 180_000);

  /** What the guest reads at http://169.254.169.254`path`, sending `header` if given. */
  const metadataOf = async (vm: Json, path: string, header?: string) =>
    (
      await inGuest(
        vm,
        // Busybox's wget crashes with its own -T (timeout): the timeout applet bounds it instead.
        `timeout 10 wget -q ${header ? `--header '${header}' ` : ''}-O - http://169.254.169.254${path}; echo " ($?)"`,
      )
    ).stdout.trim();

  it('answers each guest its own metadata through the network, whatever id it names', async () => {
    // a1 and b1 hold the same private address in their accounts' VPCs: the VPC tells them apart.
    expect(vms.b1.private_ip).toBe(vms.a1.private_ip);
    for (const name of ['a1', 'a2', 'b1'] as const) {
      const vm = vms[name];
      expect(await metadataOf(vm, '/latest/meta-data/instance-id')).toBe(`${vm.id} (0)`);
      expect(await metadataOf(vm, '/latest/meta-data/local-ipv4')).toBe(`${vm.private_ip} (0)`);
      expect(await metadataOf(vm, '/latest/meta-data/hostname')).toBe(`${vm.hostname} (0)`);
      expect(await metadataOf(vm, '/latest/user-data')).toContain('cp /bin/busybox /usr/local/bin/ping');
    }
    // Naming another instance changes nothing: the caller is its port, not its header.
    const named = await metadataOf(
      vms.a1,
      '/latest/meta-data/instance-id',
      `X-Nimbus-Instance-Id: ${vms.b1.id}`,
    );
    expect(named).toBe(`${vms.a1.id} (0)`);
    // The service's own answers for what does not exist, never a 5xx; garbage is refused and served on.
    expect(await metadataOf(vms.a1, '/latest/meta-data/nothing')).toMatch(/\(1\)$/);
    const garbage = await inGuest(
      vms.a1,
      `printf 'NOT HTTP AT ALL\\r\\n\\r\\n' | nc -w 3 169.254.169.254 80 | head -n 1`,
    );
    expect(garbage.stdout).toMatch(/^HTTP\/1\.1 400/);
    expect(await metadataOf(vms.a1, '/latest/meta-data/instance-id')).toBe(`${vms.a1.id} (0)`);
  }, 180_000);

  it('still counts the NIC’s traffic for the metrics', async () => {
    const sent = await inGuest(
      vms.a1,
      `/usr/local/bin/ping -c 20 -i 0.2 -s 1400 ${vms.a2.private_ip} > /dev/null; echo $?`,
    );
    expect(sent.stdout.trim()).toBe('0');
    await waitFor(
      'network bytes in a1’s metrics',
      async () => {
        const since = new Date(Date.now() - 120_000).toISOString();
        const reply = await api('GET', `/v1/instances/${vms.a1.id}/metrics?start=${since}`, accounts.a);
        const top = (metric: string): number =>
          Math.max(
            0,
            ...((reply.body.data?.series ?? []).find((s: Json) => s.metric === metric)?.points ?? []).map(
              ([, v]: [string, number]) => v,
            ),
          );
        return top('net_tx_bps') > 1000 && top('net_rx_bps') > 1000 ? true : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 1000 },
    );
  }, 120_000);

  it('survives a kill -9 of Nimbus: the same rows, the VMs still reachable, nothing duplicated', async () => {
    const before = await rows();
    const taps = (await network.instanceTaps()).map((t) => t.name).sort();
    expect(taps).toEqual(made.map((id) => network.tapName(id)).sort());
    const daemons = processesNaming(path.join(dataDir, 'ovn'));
    await server!.kill();
    // The VMs keep their network while Nimbus is down: the daemons outlive it.
    expect(processesNaming(path.join(dataDir, 'ovn')).sort()).toEqual(daemons.sort());
    await start();
    await waitFor('the server to reconcile', () =>
      server!.output().includes('every VPC reconciled') ? true : undefined,
    );
    expect(await rows()).toEqual(before);
    expect((await network.instanceTaps()).map((t) => t.name).sort()).toEqual(taps);
    expect(network.hostNamespaces()).toHaveLength(2);
    expect(await pings(vms.a1, vms.a2.private_ip)).toBe(true);
    expect(await pings(vms.b1, vms.a2.private_ip)).toBe(false);
    // The metadata listeners died with the process; the new one listens again.
    expect(await metadataOf(vms.b1, '/latest/meta-data/instance-id')).toBe(`${vms.b1.id} (0)`);
    const check = await admin('network', 'check');
    expect(check.code, check.stderr).toBe(0);
    expect(check.stdout).toContain('OVN matches the store');
  }, 240_000);

  it("leaves no row, tap or namespace of an account's deleted instances, no tap of a stopped one, and reports drift", async () => {
    const gone = async (vm: Json, key: string) => {
      expect((await api('DELETE', `/v1/instances/${vm.id}`, key)).status).toBe(202);
      await waitFor(
        `${vm.name} gone`,
        async () => ((await api('GET', `/v1/instances/${vm.id}`, key)).status === 404 ? true : undefined),
        { timeoutMs: 120_000, intervalMs: 500 },
      );
    };
    await gone(vms.a2, accounts.a);
    await waitFor('a2’s port gone', async () =>
      (await rows()).some((row) => row.includes(vms.a2.id)) ? undefined : true,
    );
    expect(existsSync(`/sys/class/net/${network.tapName(vms.a2.id)}`)).toBe(false);
    await gone(vms.a1, accounts.a);
    await waitFor('A’s VPC gone', async () =>
      (await vpcsInOvn()).size === 1 && network.hostNamespaces().length === 1 ? true : undefined,
    );
    // B's VPC alone: switch, router, router port, the switch's router port, DHCP, b1's port, host port
    // (and b1's firewall and the VPC's DNS records: test/ovn-qemu-firewall.test.ts).
    const firewallAndDns = /^(ACL|Address_Set|Port_Group|DNS) /;
    expect((await rows()).filter((row) => !firewallAndDns.test(row)).length).toBe(7);
    expect((await rows()).some((row) => row.includes(vms.b1.id))).toBe(true);
    expect(network.hostNamespaces()).toHaveLength(1);
    expect((await network.instanceTaps()).map((t) => t.instanceId)).toEqual([vms.b1.id]);
    expect((await admin('network', 'check')).code).toBe(0);

    // A stopped VM has no tap; its instance keeps its port (and address), so nothing drifts.
    expect((await api('POST', `/v1/instances/${vms.b1.id}/stop`, accounts.b)).status).toBe(202);
    await waitFor(
      'b1 stopped',
      async () =>
        (await api('GET', `/v1/instances/${vms.b1.id}`, accounts.b)).body.data?.status === 'stopped'
          ? true
          : undefined,
      { timeoutMs: 120_000, intervalMs: 500 },
    );
    expect(existsSync(`/sys/class/net/${network.tapName(vms.b1.id)}`)).toBe(false);
    expect(await network.instanceTaps()).toEqual([]);
    expect((await rows()).some((row) => row.includes(vms.b1.id))).toBe(true);
    expect((await admin('network', 'check')).code).toBe(0);

    // Drift: b1's port taken out of OVN behind Nimbus's back.
    sh('ovn-nbctl', [`--db=${network.endpoints.nbUrl}`, 'lsp-del', vms.b1.id], network.endpoints.env);
    const drift = await admin('network', 'check', '--json');
    expect(drift.code).toBe(1);
    expect(JSON.parse(drift.stdout.split('\n')[0]!)).toMatchObject({
      missing: [`Logical_Switch_Port ${vms.b1.id}`],
      extra: [],
    });
  }, 300_000);
});
