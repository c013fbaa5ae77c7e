/**
 * Public IPs that answer from the uplink (issue 31, item 3) with real VMs: a child server with
 * NIMBUS_DRIVER=qemu, NIMBUS_NETWORK=ovn and NIMBUS_PUBLIC_UPLINK, driven through its HTTPS API. The
 * suite's "internet" namespace holds the upstream router's address (us-east-1's pool's first, the
 * default NIMBUS_PUBLIC_GATEWAY) on one end of a veth pair; the other end is the uplink. From the
 * internet namespace, SSH to a VM's public IP logs into the guest with the account's key; the guest
 * reaches the internet namespace as its public IP; the API's `ssh` is the public IP and port 22;
 * deleting the instance stops the answer and leaves no NAT row, no router port on the link and no held
 * router address. A kill -9 of Nimbus leaves the rows and the answer as they were. Stopping the server
 * puts the uplink back as it was.
 *
 * Nothing is routed in the root namespace: the uplink there has no address. Everything is removed at the
 * end, also when a case fails: the server stopped (its OVN with it), QEMU killed, taps, namespaces and the
 * veth pair deleted, any daemon left killed, the data dir removed.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Sqlite from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OvnNetwork } from '../src/drivers/ovn/network.js';
import { readRows } from '../src/drivers/ovn/topology.js';
import { defaultPublicGateway, providerBridgeName } from '../src/drivers/ovn/uplink.js';
import { DEFAULT_PUBLIC_POOLS } from '../src/resources/addresses/addresses.js';
import { type ChildServer, spawnServer } from './helpers/child-server.js';
import { runNimbus, serveUntilExit } from './helpers/cli.js';
import { waitFor } from './helpers/common.js';
import {
  askTcp,
  CAN_RUN_OVN,
  InternetNamespace,
  oneOvnSuiteAtATime,
  processesNaming,
  serveTcp,
  sh,
  succeeds,
} from './helpers/ovn.js';
import { ovnQemuEnv, removeOvnServer } from './helpers/ovn-server.js';
import { IMAGE_DIR, qemuAvailable, sshArguments, sshKeyPair } from './helpers/qemu.js';

type Json = Record<string, any>;

const canRun = CAN_RUN_OVN && (await qemuAvailable());
const POOL = DEFAULT_PUBLIC_POOLS['us-east-1']!;
const GATEWAY = defaultPublicGateway(POOL);
const BOOT_MS = 300_000;
const PORT = 8080;

/** A command's exit code and output, run with a time limit. */
function exec(program: string, args: readonly string[], timeoutMs: number) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(program, args, { timeout: timeoutMs }, (error, stdout, stderr) =>
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) || 1 : 0, stdout, stderr }),
    );
  });
}

describe.runIf(canRun)('public IPs of QEMU VMs on OVN, from the uplink', () => {
  oneOvnSuiteAtATime();
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-ovn-public-'));
  const network = OvnNetwork.attach({ dir: path.join(dataDir, 'ovn'), central: null });
  let internet: InternetNamespace;
  let server: ChildServer | undefined;
  let env: Record<string, string> = {};
  let keys: { privateKey: string; publicKey: string };
  let key = '';
  let vm: Json = {};
  let runningAt = 0;
  const made: string[] = [];
  const listeners: { stop: () => void }[] = [];

  const api = (method: string, url: string, body?: unknown) =>
    server!.request(method, url, { key, ...(body === undefined ? {} : { body }) });
  /** SSH from the internet namespace to `host`:22 as lambda, with the account's key. */
  const sshFromInternet = (host: string, command: string, timeoutMs = 60_000) =>
    exec(
      'ip',
      [
        ...['netns', 'exec', internet.namespace, 'ssh'],
        ...sshArguments({ host, user: 'lambda' }, keys.privateKey, 10),
        command,
      ],
      timeoutMs,
    );
  /** A command in the guest, over SSH to its public IP from the internet namespace. */
  const inGuest = (command: string) => sshFromInternet(vm.public_ip, command, 90_000);
  const rows = async () => readRows(network.nb);
  const admin = (...args: string[]) =>
    runNimbus(['admin', ...args], {
      env: { ...process.env, NIMBUS_DATA_DIR: dataDir, ...env },
      timeoutMs: 120_000,
    });
  /** The public addresses the server's store holds apart from instances (its SQLite file, read-only). */
  const routerHolds = () => {
    const db = new Sqlite(path.join(dataDir, 'nimbus.db'), { readonly: true });
    try {
      return db.prepare('select ip, holder from public_address_holds').all();
    } finally {
      db.close();
    }
  };

  beforeAll(async () => {
    keys = await sshKeyPair();
    internet = new InternetNamespace(`${GATEWAY}/${POOL.split('/')[1]}`);
    env = await ovnQemuEnv({ NIMBUS_PUBLIC_UPLINK: internet.uplink });
    server = await spawnServer({ dataDir, env, startTimeoutMs: 120_000 });
    key = server.rootKey;
    const made = await api('POST', '/v1/ssh-keys', { name: 'k', public_key: keys.publicKey });
    expect(made.status, made.text).toBe(201);
    listeners.push(await serveTcp(internet.namespace, PORT, 'internet'));
  }, 600_000);

  afterAll(async () => {
    for (const listener of listeners) listener.stop();
    await removeOvnServer({ server, dataDir, network, instanceIds: made });
    internet?.remove();
    rmSync(path.dirname(keys?.privateKey ?? path.join(dataDir, 'x')), { recursive: true, force: true });
    expect(network.hostNamespaces()).toEqual([]);
  }, 120_000);

  it(
    "answers SSH on the VM's public IP from the uplink side, and the API's ssh says so",
    async () => {
      const reply = await api('POST', '/v1/instances', {
        name: 'public-one',
        instance_type: 'compute-1x',
        region: 'us-east-1',
        image: 'debian-12',
        ssh_keys: ['k'],
        // busybox's ping needs a raw socket: a setuid copy, as a distribution's ping is.
        user_data:
          '#!/bin/sh\nmkdir -p /usr/local/bin\ncp /bin/busybox /usr/local/bin/ping\nchmod 4755 /usr/local/bin/ping\n',
      });
      expect(reply.status, reply.text).toBe(202);
      made.push(reply.body.data.id);
      vm = await waitFor(
        'the VM running',
        async () => {
          const seen = await api('GET', `/v1/instances/${reply.body.data.id}`);
          expect(seen.body.data?.status).not.toBe('error');
          return seen.body.data?.status === 'running' ? (seen.body.data as Json) : undefined;
        },
        { timeoutMs: BOOT_MS, intervalMs: 500 },
      );
      runningAt = Date.now();
      expect(vm.ssh).toEqual({ host: vm.public_ip, port: 22, user: 'lambda' });

      // OVN holds the router's port on the link (an address of the pool that is neither the gateway nor
      // the instance's) and the instance's one-to-one NAT.
      const ovn = await rows();
      const nat = ovn.find((row) => row.table === 'NAT' && row.columns.type === 'dnat_and_snat');
      expect(nat?.columns).toMatchObject({ external_ip: vm.public_ip, logical_ip: vm.private_ip });
      const gatewayPort = ovn.find(
        (row) => row.table === 'Logical_Router_Port' && row.key.endsWith('-public-lrp'),
      );
      expect(gatewayPort).toBeDefined();
      const routerIp = (gatewayPort!.columns.networks as string[])[0]!.split('/')[0]!;
      expect(routerIp.startsWith(POOL.split('.').slice(0, 3).join('.'))).toBe(true);
      expect([GATEWAY, vm.public_ip]).not.toContain(routerIp);

      const seen = await waitFor(
        'SSH on the public IP',
        async () => {
          const answer = await sshFromInternet(vm.public_ip, 'hostname; echo $SSH_CONNECTION', 30_000);
          return answer.code === 0 ? answer.stdout : undefined;
        },
        { timeoutMs: 120_000, intervalMs: 500 },
      );
      const firstAnswerMs = Date.now() - runningAt;
      console.log(`running → first SSH answer on the public IP: ${firstAnswerMs} ms`);
      const [hostname, connection] = seen.trim().split('\n');
      expect(hostname).toBe(vm.hostname);
      // The guest saw the internet side's own address, and was reached on its private one (the NAT).
      expect(connection?.split(' ')[0]).toBe(GATEWAY);
      expect(connection?.split(' ')[2]).toBe(vm.private_ip);
      expect(routerHolds()).toEqual([{ ip: routerIp, holder: expect.stringMatching(/^router:acct_/) }]);
      const check = await admin('network', 'check');
      expect(check.code, check.stdout + check.stderr).toBe(0);
      // The root namespace is not on the link: the uplink holds no address there.
      expect(sh('ip', ['-4', '-o', 'addr', 'show', 'dev', internet.uplink]).trim()).toBe('');
    },
    BOOT_MS + 180_000,
  );

  it('lets the guest reach the internet side as its public IP', async () => {
    const tcp = await inGuest(`nc -w 3 ${GATEWAY} ${PORT} < /dev/null`);
    expect(tcp.stdout.trim()).toBe(`internet ${vm.public_ip}`);
    await waitFor(
      'the guest pinging the gateway',
      async () => {
        const ping = await inGuest(`/usr/local/bin/ping -c 2 -W 2 ${GATEWAY} > /dev/null && echo reached`);
        return ping.stdout.includes('reached') ? true : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 1000 },
    );
  }, 180_000);

  it('survives a kill -9 of Nimbus: the same rows, the public IP still answering', async () => {
    const before = (await rows()).map((row) => JSON.stringify(row.columns)).sort();
    await server!.kill();
    server = await spawnServer({ dataDir, env, startTimeoutMs: 120_000 });
    key = server.rootKey;
    await waitFor('the server to reconcile', () =>
      server!.output().includes('every VPC reconciled') ? true : undefined,
    );
    expect((await rows()).map((row) => JSON.stringify(row.columns)).sort()).toEqual(before);
    const answer = await inGuest('hostname');
    expect(answer.stdout.trim()).toBe(vm.hostname);
  }, 240_000);

  it('stops answering once the instance is deleted, leaving no NAT row and no router on the link', async () => {
    expect((await api('DELETE', `/v1/instances/${vm.id}`)).status).toBe(202);
    await waitFor(
      'the instance gone',
      async () => ((await api('GET', `/v1/instances/${vm.id}`)).status === 404 ? true : undefined),
      { timeoutMs: 120_000, intervalMs: 500 },
    );
    await waitFor('its VPC out of OVN', async () => ((await rows()).length === 0 ? true : undefined), {
      timeoutMs: 60_000,
      intervalMs: 500,
    });
    expect(askTcp(internet.namespace, vm.public_ip, 22)).toBeNull();
    // The router's address is the pool's again.
    expect(routerHolds()).toEqual([]);
    const check = await admin('network', 'check');
    expect(check.code, check.stderr).toBe(0);
  }, 240_000);

  it('puts the uplink back as it was when the server stops', async () => {
    await server!.stop();
    server = undefined;
    expect(succeeds('ip', ['link', 'show', providerBridgeName(network.endpoints.integrationBridge)])).toBe(
      false,
    );
    expect(sh('ethtool', ['-k', internet.uplink])).toMatch(/^tx-checksumming: on/m);
    expect(sh('ip', ['-j', 'link', 'show', internet.uplink])).not.toContain('"UP"');
  }, 120_000);
});

describe.runIf(canRun)('serve with NIMBUS_PUBLIC_UPLINK', { timeout: 120_000 }, () => {
  oneOvnSuiteAtATime();
  it('refuses to start when the uplink is no interface of this host, naming it', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-ovn-uplink-'));
    const network = OvnNetwork.attach({ dir: path.join(dataDir, 'ovn'), central: null });
    try {
      const { code, stderr } = await serveUntilExit(
        {
          NIMBUS_DRIVER: 'qemu',
          NIMBUS_NETWORK: 'ovn',
          NIMBUS_PUBLIC_UPLINK: 'nimbus-nope0',
          NIMBUS_DATA_DIR: dataDir,
          NIMBUS_IMAGE_DIR: IMAGE_DIR,
        },
        100_000,
      );
      expect(code).toBe(2);
      expect(stderr).toContain('NIMBUS_PUBLIC_UPLINK=nimbus-nope0');
      expect(stderr).toContain('not an interface of this host');
      // The daemons it started went with it.
      expect(processesNaming(dataDir)).toEqual([]);
    } finally {
      network.nb.close();
      for (const pid of processesNaming(dataDir)) process.kill(pid, 'SIGKILL');
      const bridge = network.endpoints.integrationBridge;
      for (const name of [bridge, providerBridgeName(bridge)]) {
        if (existsSync(`/sys/class/net/${name}`)) succeeds('ip', ['link', 'del', name]);
      }
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
