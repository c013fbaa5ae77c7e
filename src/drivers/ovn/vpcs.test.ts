import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { firewallRule } from '../../../test/helpers/firewall.js';
import { macAddressFor } from '../../resources/addresses/addresses.js';
import { parseVpcKey } from './network.js';
import { vpcKey, vpcRows } from './topology.js';
import { HOST_PORT, queueVpcReconcile, VPC_WAKES_MS, type VpcInstance, vpcsOf } from './vpcs.js';

const instance = fc.record({
  id: fc.stringMatching(/^ins_[0-9a-z]{6}$/),
  account_id: fc.constantFrom('acct_01a', 'acct_01b'),
  region: fc.constantFrom('us-east-1', 'eu-central-1'),
  name: fc.constantFrom('web', 'db-1', 'cache'),
  private_ip: fc.integer({ min: 2, max: 250 }).map((n) => `10.0.0.${n}`),
});
const instances = fc.uniqueArray(instance, { selector: (i) => i.id, maxLength: 12 });

describe('the VPCs the store describes', () => {
  it('makes one VPC per account and region holding exactly its instances, as the API shows them', () => {
    fc.assert(
      fc.property(instances, (list: VpcInstance[]) => {
        const vpcs = vpcsOf(list);
        const places = new Set(list.map((i) => `${i.account_id} ${i.region}`));
        expect(vpcs.map((v) => `${v.accountId} ${v.region}`).sort()).toEqual([...places].sort());
        for (const vpc of vpcs) {
          const members = list.filter((i) => i.account_id === vpc.accountId && i.region === vpc.region);
          expect(vpc.ports).toEqual(
            members.map((i) => ({
              instanceId: i.id,
              mac: macAddressFor(i.id),
              ip: i.private_ip,
              hostname: i.name,
            })),
          );
          // The block the addresses come from, the router at its first address, and the host port.
          expect(vpc.cidr).toBe(vpc.region === 'us-east-1' ? '10.10.0.0/16' : '10.30.0.0/16');
          expect(vpc.router.ip).toBe(vpc.region === 'us-east-1' ? '10.10.0.1' : '10.30.0.1');
          expect(vpc.hostPort).toMatchObject(HOST_PORT);
          expect(parseVpcKey(vpcKey(vpc))).toEqual({ accountId: vpc.accountId, region: vpc.region });
        }
      }),
    );
  });

  it('gives each VPC a router MAC and host port MAC of its own, the same every time', () => {
    const list: VpcInstance[] = [
      { id: 'ins_1', account_id: 'acct_a', region: 'us-east-1', name: 'x', private_ip: '10.10.0.2' },
      { id: 'ins_2', account_id: 'acct_b', region: 'us-east-1', name: 'y', private_ip: '10.10.0.2' },
    ];
    const [a, b] = vpcsOf(list);
    expect(a!.router.mac).not.toBe(b!.router.mac);
    expect(a!.hostPort!.mac).not.toBe(b!.hostPort!.mac);
    expect(vpcsOf(list)).toEqual([a, b]);
  });

  it('puts the host port on the switch as a localport, and its network on the router port', () => {
    const [vpc] = vpcsOf([
      { id: 'ins_1', account_id: 'acct_a', region: 'us-east-1', name: 'x', private_ip: '10.10.0.2' },
    ]);
    const rows = vpcRows(vpc!);
    const host = rows.find((r) => r.key === `${vpcKey(vpc!)}-host`);
    expect(host?.columns).toMatchObject({
      type: 'localport',
      addresses: [`${vpc!.hostPort!.mac} 169.254.169.254`],
    });
    const routerPort = rows.find((r) => r.table === 'Logical_Router_Port');
    expect(routerPort?.columns.networks).toEqual(['10.10.0.1/16', '169.254.0.1/16']);
    const ls = rows.find((r) => r.table === 'Logical_Switch');
    expect(ls?.columns.ports).toMatchObject({ refs: expect.arrayContaining([`${vpcKey(vpc!)}-host`]) });
  });
});

describe("the VPC's firewall", () => {
  const rule = {
    ...firewallRule({
      accountId: 'acct_a',
      direction: 'inbound',
      action: 'deny',
      protocol: 'tcp',
      ports: '8080',
      remote: ['10.10.0.0/16'],
      targets: { instance_ids: [], tags: { role: 'web' } },
    }),
    id: 'fwr_1',
  };
  const base = { account_id: 'acct_a', region: 'us-east-1', firewall_preset: 'ssh-only' };

  it("gives each port the effective rules of its instance (tags, preset) when the VPC's rules are read", () => {
    const list: VpcInstance[] = [
      { ...base, id: 'ins_1', name: 'x', private_ip: '10.10.0.2', tags: { role: 'web' } },
      { ...base, id: 'ins_2', name: 'y', private_ip: '10.10.0.3', tags: {}, firewall_preset: 'web' },
    ];
    const rules = new Map([[vpcKey({ accountId: 'acct_a', region: 'us-east-1' }), [rule]]]);
    const [vpc] = vpcsOf(list, rules);
    const [one, two] = vpc!.ports;
    expect(one!.firewall?.map((r) => r.id ?? r.source)).toEqual([
      'fwr_1',
      'preset',
      'default',
      'default',
      'default',
    ]);
    expect(two!.firewall?.map((r) => r.id ?? r.source)).toEqual([
      'preset',
      'preset',
      'preset',
      'default',
      'default',
      'default',
    ]);
    const rows = vpcRows(vpc!);
    // Nimbus's own traffic through the host port, and DNS queries to the resolver, above every rule.
    const acls = rows.filter((row) => row.table === 'ACL').map((row) => row.key);
    expect(acls).toEqual(
      expect.arrayContaining(['nimbus_ins_1:host:in', 'nimbus_ins_1:host:out', 'nimbus_ins_1:dns:out']),
    );
    expect(rows.filter((row) => row.table === 'Port_Group').map((row) => row.key)).toEqual([
      'nimbus_ins_1',
      'nimbus_ins_2',
    ]);
    // Without rules read (or a preset), a port has no firewall: nothing is made up.
    expect(vpcsOf(list)[0]!.ports.every((p) => p.firewall === undefined)).toBe(true);
  });

  it('queues the account’s VPC job, and wakes the runner, for the events that change a VPC', async () => {
    const queued: string[] = [];
    const wakes: number[] = [];
    const subscriber = queueVpcReconcile({
      enqueue: async (_trx, kind, subject) => {
        queued.push(`${kind}:${subject}`);
      },
      wake: (at) => wakes.push(at?.getTime() ?? 0),
    });
    const event = (type: string) =>
      ({
        type,
        accountId: 'acct_a',
        resourceId: 'r',
        data: {},
        id: 'e',
        recordedAt: new Date(1000),
      }) as never;
    for (const type of [
      'firewall_rule.created',
      'firewall_rule.updated',
      'firewall_rule.deleted',
      'instance.updated',
    ]) {
      await subscriber({} as never, event(type));
    }
    await subscriber({} as never, event('volume.created'));
    expect(queued).toEqual(Array(4).fill('vpc:acct_a'));
    expect(wakes.length).toBe(4 * VPC_WAKES_MS.length);
    expect(Math.min(...wakes)).toBeGreaterThan(1000);
  });

  it("makes a VPN's VPC even without an instance, its gateway routed to, and queues on vpn.created and vpn.deleted", async () => {
    const vpn = {
      id: 'vpn_only',
      account_id: 'acct_v',
      region: 'us-east-1',
      tunnel_cidr: '100.96.0.0/24',
      endpoint_ip: '203.0.113.9',
    };
    const [vpc, ...more] = vpcsOf([], undefined, [vpn]);
    expect(more).toEqual([]);
    expect(vpc).toMatchObject({ accountId: 'acct_v', region: 'us-east-1', ports: [] });
    expect(vpc!.gateways).toEqual([
      { vpnId: 'vpn_only', tunnelCidr: '100.96.0.0/24', publicIp: '203.0.113.9' },
    ]);
    const rows = vpcRows(vpc!);
    const router = rows.find((row) => row.table === 'Logical_Router')!;
    expect(router.columns.static_routes).toEqual({ refs: ['vpn_only-route'] });
    // No public side: no NAT of the endpoint.
    expect(router.columns.nat).toEqual({ refs: [] });
    const queued: string[] = [];
    const subscriber = queueVpcReconcile({
      enqueue: async (_trx, kind, subject) => {
        queued.push(`${kind}:${subject}`);
      },
      wake: () => {},
    });
    for (const type of ['vpn.created', 'vpn.deleted', 'vpn.peer_added']) {
      await subscriber({} as never, { type, accountId: 'acct_v', recordedAt: new Date() } as never);
    }
    expect(queued).toEqual(['vpc:acct_v', 'vpc:acct_v']);
  });
});
