/**
 * VPCs on real OVN (issue 31, items 2 and 8): the embedded daemons in a temporary directory, two
 * accounts' VPCs on the same block (10.10.0.0/16) applied to the northbound database, and network
 * namespaces standing in for instances, plugged into the integration bridge as their logical ports.
 * Real packets show: instances of one VPC reach each other; an account never reaches, nor even
 * receives a packet from, the other's, though their addresses are the same; OVN's DHCP hands a guest
 * its address, gateway, resolver and hostname; applying twice changes nothing; and a northbound
 * database wiped (file deleted, server killed) is rebuilt by applying again, and packets flow again.
 *
 * Nothing is routed in the root namespace: all traffic is between the suite's own namespaces.
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EmbeddedOvn } from '../src/drivers/ovn/daemons.js';
import { Northbound } from '../src/drivers/ovn/northbound.js';
import { applyTopology, type DesiredVpc, readRows } from '../src/drivers/ovn/topology.js';
import { waitFor } from './helpers/common.js';
import {
  CAN_RUN_OVN,
  type Guest,
  GuestNamespaces,
  oneOvnSuiteAtATime,
  processesNaming,
  sh,
  succeeds,
} from './helpers/ovn.js';

const ROUTER = { ip: '10.10.0.1', mac: '0a:58:0a:0a:00:01' };
const vpcA: DesiredVpc = {
  accountId: 'acct_ovntesta',
  region: 'us-east-1',
  cidr: '10.10.0.0/16',
  router: ROUTER,
  ports: [
    { instanceId: 'ins_ovntesta1', mac: '0a:00:0a:00:00:11', ip: '10.10.0.11', hostname: 'alpha-one' },
    { instanceId: 'ins_ovntesta2', mac: '0a:00:0a:00:00:12', ip: '10.10.0.12', hostname: 'alpha-two' },
  ],
};
/** The other account: the same block, the same router address, and b1 holds a1's address. */
const vpcB: DesiredVpc = {
  accountId: 'acct_ovntestb',
  region: 'us-east-1',
  cidr: '10.10.0.0/16',
  router: { ip: ROUTER.ip, mac: '0a:58:0a:0a:00:02' },
  ports: [
    { instanceId: 'ins_ovntestb1', mac: '0a:00:0b:00:00:11', ip: '10.10.0.11', hostname: 'beta-one' },
    { instanceId: 'ins_ovntestb2', mac: '0a:00:0b:00:00:13', ip: '10.10.0.13', hostname: 'beta-two' },
  ],
};

describe.runIf(CAN_RUN_OVN)('VPCs on OVN with real packets', () => {
  oneOvnSuiteAtATime();
  let dir: string;
  let ovn: EmbeddedOvn;
  let nb: Northbound;
  let guests: GuestNamespaces;
  const g: Record<string, Guest> = {};

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-ovn-vpc-'));
    ovn = await EmbeddedOvn.start({ dir: path.join(dir, 'ovn'), chassis: 'ovn-vpc-test' });
    nb = new Northbound(ovn.endpoints.nbUrl);
    guests = new GuestNamespaces(ovn.endpoints);
    const [a1, a2] = vpcA.ports;
    const [b1, b2] = vpcB.ports;
    g.a1 = guests.plug(a1!.instanceId, a1!.mac, `${a1!.ip}/16`);
    // a2 takes its address from OVN's DHCP (below).
    g.a2 = guests.plug(a2!.instanceId, a2!.mac);
    g.b1 = guests.plug(b1!.instanceId, b1!.mac, `${b1!.ip}/16`);
    g.b2 = guests.plug(b2!.instanceId, b2!.mac, `${b2!.ip}/16`);
  });

  afterAll(async () => {
    guests?.remove();
    nb?.close();
    await ovn?.close();
    if (dir) {
      expect(processesNaming(dir)).toEqual([]);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('creates both VPCs, and applying the same state again changes nothing', async () => {
    const first = await applyTopology(nb, [vpcA, vpcB]);
    // Per VPC: switch, router, router port, the switch's router port, DHCP options, two ports, and the
    // DNS records of the ports' names (dns-records.ts).
    expect(first).toEqual({ inserted: 16, updated: 0, deleted: 0 });
    expect(await applyTopology(nb, [vpcA, vpcB])).toEqual({ inserted: 0, updated: 0, deleted: 0 });
  });

  it("gives a guest its address, gateway, resolver and hostname over OVN's DHCP", async () => {
    const script = path.join(dir, 'dhcp-script');
    const lease = path.join(dir, 'lease');
    writeFileSync(script, `#!/bin/sh\n[ "$1" = bound ] && env > ${lease}\nexit 0\n`);
    chmodSync(script, 0o755);
    // ovn-controller binds the port and installs the DHCP responder flows shortly after the apply.
    const env = await waitFor(
      'a DHCP lease for a2',
      () => {
        try {
          sh('ip', [
            'netns',
            'exec',
            g.a2!.namespace,
            'udhcpc',
            '-i',
            'eth0',
            '-n',
            '-q',
            '-t',
            '2',
            '-T',
            '1',
            '-s',
            script,
          ]);
          return readFileSync(lease, 'utf8');
        } catch {
          return undefined;
        }
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    const vars = Object.fromEntries(env.split('\n').map((line) => line.split('=', 2) as [string, string]));
    expect(vars).toMatchObject({
      ip: '10.10.0.12',
      router: ROUTER.ip,
      dns: ROUTER.ip,
      hostname: 'alpha-two',
    });
    expect(vars.subnet).toBe('255.255.0.0');
    sh('ip', ['netns', 'exec', g.a2!.namespace, 'ip', 'addr', 'add', `${vars.ip}/16`, 'dev', 'eth0']);
  });

  it('carries packets inside a VPC and none between two VPCs on the same block', async () => {
    await waitFor('a1 pinging a2', () => guests.pings(g.a1!, '10.10.0.12') || undefined, {
      timeoutMs: 30_000,
      intervalMs: 100,
    });
    await waitFor('b1 pinging b2', () => guests.pings(g.b1!, '10.10.0.13') || undefined, {
      timeoutMs: 30_000,
      intervalMs: 100,
    });
    // Both sides' flows are in place; now B's traffic, to the address a1 also holds, must reach b1 only.
    // A's own chatter would blur the count: its guests' neighbour entries are fixed, so the kernel sends
    // no ARP probes, and IPv6 is off.
    sh('ip', [
      'netns',
      'exec',
      g.a1!.namespace,
      'ip',
      'neigh',
      'replace',
      '10.10.0.12',
      'lladdr',
      g.a2!.mac,
      'dev',
      'eth0',
      'nud',
      'permanent',
    ]);
    sh('ip', [
      'netns',
      'exec',
      g.a2!.namespace,
      'ip',
      'neigh',
      'replace',
      '10.10.0.11',
      'lladdr',
      g.a1!.mac,
      'dev',
      'eth0',
      'nud',
      'permanent',
    ]);
    const aBefore = [guests.received(g.a1!), guests.received(g.a2!)];
    for (let i = 0; i < 3; i++) expect(guests.pings(g.b2!, '10.10.0.11')).toBe(true);
    expect(guests.pings(g.b1!, '10.10.0.12')).toBe(false);
    expect([guests.received(g.a1!), guests.received(g.a2!)]).toEqual(aBefore);
    expect(guests.pings(g.a1!, '10.10.0.13')).toBe(false);
    // Port security: a1 spoofing another source address gets nothing through.
    sh('ip', ['netns', 'exec', g.a1!.namespace, 'ip', 'addr', 'add', '10.10.0.99/16', 'dev', 'eth0']);
    try {
      expect(
        succeeds('ip', [
          'netns',
          'exec',
          g.a1!.namespace,
          'ping',
          '-c',
          '1',
          '-W',
          '1',
          '-I',
          '10.10.0.99',
          '10.10.0.12',
        ]),
      ).toBe(false);
      expect(guests.pings(g.a1!, '10.10.0.12')).toBe(true);
    } finally {
      sh('ip', ['netns', 'exec', g.a1!.namespace, 'ip', 'addr', 'del', '10.10.0.99/16', 'dev', 'eth0']);
    }
  });

  it('rebuilds a wiped northbound database from the desired state, and packets flow again', async () => {
    const nbPid = ovn.pids().get('ovnnb')!;
    rmSync(path.join(dir, 'ovn', 'ovnnb.db'));
    process.kill(nbPid, 'SIGKILL');
    // The supervisor starts it again on an empty database.
    await waitFor('the northbound server back', () => {
      const pid = ovn.pids().get('ovnnb');
      return pid !== undefined && pid !== nbPid ? pid : undefined;
    });
    const rebuilt = await waitFor(
      'an apply on the new database',
      () => applyTopology(nb, [vpcA, vpcB]).catch(() => undefined),
      { timeoutMs: 10_000, intervalMs: 100 },
    );
    expect(rebuilt).toEqual({ inserted: 16, updated: 0, deleted: 0 });
    expect(await applyTopology(nb, [vpcA, vpcB])).toEqual({ inserted: 0, updated: 0, deleted: 0 });
    await waitFor('a1 pinging a2 again', () => guests.pings(g.a1!, '10.10.0.12') || undefined, {
      timeoutMs: 30_000,
      intervalMs: 100,
    });
    expect(guests.pings(g.a1!, '10.10.0.13')).toBe(false);
  });

  it("removes a port no longer desired, and a VPC's rows with its last apply, leaving the other VPC's", async () => {
    const withoutA2 = { ...vpcA, ports: vpcA.ports.slice(0, 1) };
    // The switch (its ports) and its DNS records change; the port goes.
    expect(await applyTopology(nb, [withoutA2], [`nimbus-${vpcA.accountId}-${vpcA.region}`])).toEqual({
      inserted: 0,
      updated: 2,
      deleted: 1,
    });
    await waitFor('a2 cut off', () => (guests.pings(g.a1!, '10.10.0.12') ? undefined : true), {
      timeoutMs: 10_000,
      intervalMs: 100,
    });
    expect(await applyTopology(nb, [vpcB])).toMatchObject({ inserted: 0, updated: 0 });
    const left = await readRows(nb);
    expect(
      new Set(left.map((row) => (row.columns.external_ids as Record<string, string>)['nimbus:account'])),
    ).toEqual(new Set([vpcB.accountId]));
    expect(guests.pings(g.b2!, '10.10.0.11')).toBe(true);
  });
});
