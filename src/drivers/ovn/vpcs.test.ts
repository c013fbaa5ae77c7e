import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { macAddressFor } from '../../resources/addresses/addresses.js';
import { parseVpcKey } from './network.js';
import { vpcKey, vpcRows } from './topology.js';
import { HOST_PORT, type VpcInstance, vpcsOf } from './vpcs.js';

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
