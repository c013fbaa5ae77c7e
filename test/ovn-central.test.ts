/**
 * Nimbus on an existing OVN central (issue 31, items 1 and 8; docs/operations.md, "An existing OVN
 * central"). The suite plays the operator: it starts a central (northbound and southbound databases on
 * TCP, ovn-northd) and a chassis (Open vSwitch, ovn-controller on an integration bridge of its own name)
 * with the commands the operations guide gives (helpers/ovn-central.ts), puts rows and a port of its own
 * in them, and starts `nimbus serve` with NIMBUS_OVN_NB_URL, NIMBUS_OVN_SB_URL, NIMBUS_OVS_DB and
 * NIMBUS_OVN_BRIDGE pointing there. Through the HTTPS API it shows:
 *   - the account's VPC comes up in the operator's central: two instances' logical ports, which network
 *     namespaces standing in for the instances (the VMs force-stopped at once, so nothing boots under
 *     TCG) bind to on the operator's bridge and ping each other across; `nimbus admin network check`
 *     agrees with OVN;
 *   - a kill -9 while the VPC job is writing a burst of firewall rules into OVN, then a restart,
 *     converges to exactly the rows a clean reconcile (from no Nimbus row at all) makes, and the check
 *     is clean;
 *   - deleting the account's last instance leaves no Nimbus row, and neither that nor Nimbus's stop
 *     touches the operator's rows, port, bridge or daemons.
 * Everything made (the server, the central's daemons, namespaces, veths, ports, the bridge, the
 * directories) is removed at the end, also when a case fails. Nothing is routed in the root namespace.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OvnNetwork } from '../src/drivers/ovn/network.js';
import { applyTopology, canonicalCell, readRows } from '../src/drivers/ovn/topology.js';
import { assertBuilt, type ChildServer, spawnServer } from './helpers/child-server.js';
import { runNimbus } from './helpers/cli.js';
import { waitFor } from './helpers/common.js';
import { CAN_RUN_OVN, type Guest, GuestNamespaces, oneOvnSuiteAtATime, sh } from './helpers/ovn.js';
import { OperatorOvn } from './helpers/ovn-central.js';
import { removeOvnServer } from './helpers/ovn-server.js';
import { ensureImage, IMAGE_DIR, qemuAvailable } from './helpers/qemu.js';
import { freePort } from './helpers/server.js';

type Json = Record<string, any>;

const canRun = CAN_RUN_OVN && (await qemuAvailable());
/** The firewall rules created in one burst while the server is killed. */
const BURST = 20;

describe.runIf(canRun)('Nimbus on an existing OVN central', () => {
  oneOvnSuiteAtATime();
  const tag = (process.pid % 100_000).toString(36);
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-ovn-central-data-'));
  const centralDir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-ovn-central-'));
  /** Not br-int: the host may have one, and the setting is what is under test. */
  const bridge = `ncbr-${tag}`;
  /** The operator's own things in the central and on the bridge, which Nimbus must never touch. */
  const operatorSwitch = `operator-net-${tag}`;
  const operatorPort = `ncop${tag}`;
  let central: OperatorOvn | undefined;
  let network: OvnNetwork | undefined;
  let guests: GuestNamespaces | undefined;
  let server: ChildServer | undefined;
  let env: Record<string, string> = {};
  let key = '';
  const made: string[] = [];
  const vms: Json[] = [];

  /**
   * A server on the data dir, once it serves: /healthz answers before the driver has reconciled every VPC
   * (main.ts serves the API first), so the wait is for the line logged after that.
   */
  const start = async () => {
    const started = await spawnServer({ dataDir, env, startTimeoutMs: 120_000 });
    server = started;
    key = started.rootKey;
    await waitFor(
      'the server serving, every VPC reconciled',
      () => (started.output().includes('nimbus is serving') ? true : undefined),
      { timeoutMs: 120_000, intervalMs: 100, lastSeen: () => started.output().slice(-2000) },
    );
  };
  const api = (method: string, url: string, body?: unknown) =>
    server!.request(method, url, { key, ...(body === undefined ? {} : { body }) });
  const admin = (...args: string[]) =>
    runNimbus(['admin', ...args], {
      env: { ...process.env, NIMBUS_DATA_DIR: dataDir, ...env },
      timeoutMs: 120_000,
    });
  /**
   * Nimbus's rows in the central's northbound database, as comparable text: no uuid, and each cell in
   * canonical form (an OVSDB set has no order: two databases holding the same rows list them differently).
   */
  const rows = async () =>
    (await readRows(network!.nb))
      .map((row) => {
        const cells = Object.keys(row.columns)
          .sort()
          .map((column) => `${column}=${canonicalCell(row.columns[column])}`);
        return `${row.table} ${row.key} ${cells.join(' ')}`;
      })
      .sort();
  /** What is the operator's: its switch and port in the central, its port on the bridge, its daemons. */
  const operatorThings = () => ({
    switch: central!
      .nbctl('--bare', '--columns=name', 'find', 'Logical_Switch', `name=${operatorSwitch}`)
      .trim(),
    port: central!.nbctl('lsp-get-addresses', `${operatorSwitch}-port`).trim(),
    bridgePorts: central!.vsctl('list-ports', bridge).split('\n').includes(operatorPort),
  });

  beforeAll(async () => {
    assertBuilt();
    await ensureImage();
    central = await OperatorOvn.start(centralDir, { bridge, chassis: `operator-${tag}` });
    const { nbUrl, sbUrl, ovsDb } = central.endpoints;
    network = OvnNetwork.attach({ dir: path.join(dataDir, 'ovn'), central: { nbUrl, sbUrl, ovsDb, bridge } });
    guests = new GuestNamespaces(central.endpoints);
    central.nbctl(
      'ls-add',
      operatorSwitch,
      '--',
      'lsp-add',
      operatorSwitch,
      `${operatorSwitch}-port`,
      '--',
      'lsp-set-addresses',
      `${operatorSwitch}-port`,
      '0a:00:aa:00:00:01 192.168.77.1',
    );
    central.vsctl('add-port', bridge, operatorPort, '--', 'set', 'Interface', operatorPort, 'type=internal');
    const first = await freePort();
    env = {
      NIMBUS_DRIVER: 'qemu',
      NIMBUS_NETWORK: 'ovn',
      NIMBUS_OVN_NB_URL: nbUrl,
      NIMBUS_OVN_SB_URL: sbUrl,
      NIMBUS_OVS_DB: ovsDb,
      NIMBUS_OVN_BRIDGE: bridge,
      NIMBUS_IMAGE_DIR: IMAGE_DIR,
      NIMBUS_QEMU_SSH_PORTS: `${first}-${first + 10}`,
    };
    await start();
  }, 300_000);

  afterAll(async () => {
    guests?.remove();
    if (network) await removeOvnServer({ server, dataDir, network, instanceIds: made });
    central?.remove();
    rmSync(dataDir, { recursive: true, force: true });
    expect(existsSync(`/sys/class/net/${bridge}`)).toBe(false);
    expect(network?.hostNamespaces() ?? []).toEqual([]);
  }, 120_000);

  it("builds the account's VPC in the operator's central, whose ports carry packets, and the check agrees", async () => {
    for (const name of ['central-one', 'central-two']) {
      const reply = await api('POST', '/v1/instances', {
        name,
        instance_type: 'compute-1x',
        region: 'us-east-1',
        image: 'debian-12',
      });
      expect(reply.status, reply.text).toBe(202);
      made.push(reply.body.data.id);
      // The VM is not what is under test: it stops at once, and its port stays in the VPC.
      const stopped = await api('POST', `/v1/instances/${reply.body.data.id}/stop`, { force: true });
      expect(stopped.status, stopped.text).toBe(202);
      vms.push((await api('GET', `/v1/instances/${reply.body.data.id}/network`)).body.data);
    }
    const vpc = `nimbus-${(await api('GET', '/v1/account')).body.data.id}-us-east-1`;
    const ports = await waitFor('both ports in the central', async () => {
      const now = (await readRows(network!.nb)).filter((row) => row.table === 'Logical_Switch_Port');
      return made.every((id) => now.some((row) => row.columns.name === id)) ? now : undefined;
    });
    for (const row of ports)
      expect((row.columns.external_ids as Record<string, string>)['nimbus:vpc']).toBe(vpc);
    // The stopped VMs' taps leave the operator's bridge; the VPC's host port is on it.
    await waitFor(
      'no VM tap on the bridge',
      async () => ((await network!.instanceTaps()).length === 0 ? true : undefined),
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    expect((await network!.hostPortInterfaces()).map((h) => h.vpc)).toEqual([vpc]);

    const g: Guest[] = made.map((id, i) => guests!.plug(id, vms[i]!.mac_address, `${vms[i]!.private_ip}/16`));
    await waitFor(
      'one instance pinging the other',
      () => guests!.pings(g[0]!, vms[1]!.private_ip) || undefined,
      {
        timeoutMs: 60_000,
        intervalMs: 200,
        lastSeen: () => central!.sbctl('--bare', '--columns=logical_port,chassis', 'list', 'Port_Binding'),
      },
    );
    expect(guests!.pings(g[1]!, vms[0]!.private_ip)).toBe(true);
    const check = await admin('network', 'check');
    expect(check.code, check.stdout + check.stderr).toBe(0);
    expect(operatorThings()).toEqual({
      switch: operatorSwitch,
      port: '0a:00:aa:00:00:01 192.168.77.1',
      bridgePorts: true,
    });
  }, 300_000);

  it('converges after a kill -9 while the VPC job writes a burst of rules, to the rows of a clean reconcile', async () => {
    /**
     * A burst of rule creates, and the server killed at `when`: as soon as the first create is accepted
     * (its job queued in its transaction, not yet run), or the moment OVN's rows first change (the job
     * writing while more creates commit or are in flight). Then a restart. Says whether OVN lacked, at the
     * kill, rows the store called for.
     */
    const killDuring = async (burst: number, when: 'accepted' | 'writing') => {
      const before = await rows();
      let accepted: () => void = () => {};
      const firstAccepted = new Promise<void>((resolve) => {
        accepted = resolve;
      });
      const created: Promise<unknown>[] = [];
      for (let i = 0; i < BURST; i++) {
        const body = {
          name: `burst-${burst}-${i}`,
          direction: 'inbound',
          action: 'allow',
          protocol: 'tcp',
          ports: String(6000 + burst * 100 + i),
          sources: ['198.51.100.0/24'],
          region: 'us-east-1',
        };
        created.push(
          api('POST', '/v1/firewall/rules', body).then(
            (reply) => reply.status === 201 && accepted(),
            () => null,
          ),
        );
      }
      if (when === 'accepted') await firstAccepted;
      else {
        await waitFor(
          'the first rows of the burst in OVN',
          async () => ((await rows()).join('\n') !== before.join('\n') ? true : undefined),
          { timeoutMs: 60_000, intervalMs: 5 },
        );
      }
      await server!.kill();
      const atKill = await rows();
      await Promise.all(created);
      await start();
      const converged = await rows();
      const check = await admin('network', 'check');
      expect(check.code, check.stdout + check.stderr).toBe(0);
      const stored = (await api('GET', '/v1/firewall/rules?limit=100')).body.data as Json[];
      console.log(
        `kill -9 ${when}: ${stored.length} rules in the store; OVN at the kill ${atKill.length} rows, converged ${converged.length}`,
      );
      return atKill.join('\n') !== converged.join('\n');
    };
    const midChange = [await killDuring(0, 'accepted'), await killDuring(1, 'writing')];
    // At least one kill landed before OVN had what the store held (a kill that came too late proves nothing).
    expect(midChange, 'a kill that left OVN behind the store').toContain(true);
    const converged = await rows();

    // A clean reconcile: no Nimbus row left in the central (the operator's stay), then a fresh serve.
    await server!.stop();
    // A stop leaves Nimbus's rows where they are (the next start converges them).
    expect(await rows()).toEqual(converged);
    await applyTopology(network!.nb, []);
    expect(await rows()).toEqual([]);
    await start();
    expect(await rows()).toEqual(converged);
    const check = await admin('network', 'check');
    expect(check.code, check.stdout + check.stderr).toBe(0);
    expect(operatorThings().switch).toBe(operatorSwitch);
  }, 600_000);

  it("leaves no row of its own after the last instance goes, and the operator's central as it was when it stops", async () => {
    const pids = central!.pids();
    expect(pids.size).toBe(6);
    for (const id of made) {
      const reply = await api('DELETE', `/v1/instances/${id}`);
      expect(reply.status, reply.text).toBe(202);
    }
    await waitFor(
      'no Nimbus row in the central',
      async () => ((await rows()).length === 0 ? true : undefined),
      {
        timeoutMs: 60_000,
        intervalMs: 200,
      },
    );
    await waitFor(
      'no host port or namespace of the VPC',
      async () =>
        (await network!.hostPortInterfaces()).length === 0 && network!.hostNamespaces().length === 0
          ? true
          : undefined,
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    await server!.stop();
    server = undefined;
    expect(central!.pids()).toEqual(pids);
    expect(existsSync(`/sys/class/net/${bridge}`)).toBe(true);
    expect(operatorThings()).toEqual({
      switch: operatorSwitch,
      port: '0a:00:aa:00:00:01 192.168.77.1',
      bridgePorts: true,
    });
    // The central still answers, and its chassis is still bound to it.
    expect(central!.sbctl('--bare', '--columns=name', 'list', 'Chassis')).toContain(central!.chassis);
    sh('ovn-nbctl', [`--db=${central!.endpoints.nbUrl}`, '--timeout=10', 'show'], central!.endpoints.env);
  }, 300_000);
});
