import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { integrationBridgeName } from './daemons.js';
import { type DesiredVpc, diffRows, type ExistingRow, vpcRows } from './topology.js';
import {
  defaultPublicGateway,
  providerBridgeName,
  publicGateways,
  publicSideOf,
  type VpcPublicSide,
  withBridgeMapping,
} from './uplink.js';

const side: VpcPublicSide = {
  pool: '203.0.113.0/24',
  gateway: '203.0.113.1',
  router: { mac: '0a:58:cb:00:71:02', ip: '203.0.113.2' },
  chassis: 'chassis-1',
  nats: [{ instanceId: 'ins_a', publicIp: '203.0.113.10', privateIp: '10.10.0.11' }],
};
const vpc: DesiredVpc = {
  accountId: 'acct_1',
  region: 'us-east-1',
  cidr: '10.10.0.0/16',
  router: { mac: '0a:58:0a:0a:00:01', ip: '10.10.0.1' },
  ports: [
    { instanceId: 'ins_a', mac: '0a:00:00:00:00:0a', ip: '10.10.0.11', hostname: 'web' },
    { instanceId: 'ins_b', mac: '0a:00:00:00:00:0b', ip: '10.10.0.12', hostname: 'db' },
  ],
  public: side,
};

/** OVN holding exactly `rows`, as the diff reads it back. */
function existing(rows: ReturnType<typeof vpcRows>): ExistingRow[] {
  return rows.map((row, i) => ({ ...row, uuid: `u${i}` }));
}

describe("a VPC's public side", () => {
  it("routes through the pool's first address by default", () => {
    expect(defaultPublicGateway('203.0.113.0/24')).toBe('203.0.113.1');
    expect(defaultPublicGateway('192.0.2.128/25')).toBe('192.0.2.129');
  });

  it('adds a gateway port on the link bound to the chassis, a default route and a NAT per public IP', () => {
    const rows = vpcRows(vpc);
    const router = rows.find((r) => r.table === 'Logical_Router')!;
    const gatewayPort = rows.find((r) => r.table === 'Logical_Router_Port' && r.key.endsWith('-public-lrp'))!;
    expect(router.columns.ports).toEqual({ refs: [expect.stringMatching(/-lrp$/), gatewayPort.key] });
    expect(gatewayPort.columns.networks).toEqual(['203.0.113.2/24']);
    const chassis = rows.find((r) => r.table === 'Gateway_Chassis')!;
    expect(chassis.columns.chassis_name).toBe('chassis-1');
    expect(gatewayPort.columns.gateway_chassis).toEqual({ refs: [chassis.key] });
    const nats = rows.filter((r) => r.table === 'NAT');
    expect(nats.map((r) => r.columns)).toMatchObject([
      { type: 'dnat_and_snat', external_ip: '203.0.113.10', logical_ip: '10.10.0.11' },
    ]);
    expect(router.columns.nat).toEqual({ refs: nats.map((r) => r.key) });
    const route = rows.find((r) => r.table === 'Logical_Router_Static_Route')!;
    expect(route.columns).toMatchObject({ ip_prefix: '0.0.0.0/0', nexthop: '203.0.113.1' });
    const localnet = rows.find((r) => r.table === 'Logical_Switch_Port' && r.columns.type === 'localnet')!;
    expect(localnet.columns.options).toEqual({ network_name: 'nimbus-public' });
    for (const row of rows) {
      expect((row.columns.external_ids as Record<string, string>)['nimbus:vpc']).toBe(
        'nimbus-acct_1-us-east-1',
      );
    }
  });

  it('moves a public IP to another instance by updating its NAT in place', () => {
    const moved = {
      ...vpc,
      public: { ...side, nats: [{ ...side.nats[0]!, instanceId: 'ins_b', privateIp: '10.10.0.12' }] },
    };
    const changes = diffRows(vpcRows(moved), existing(vpcRows(vpc)));
    expect(changes).toEqual([
      expect.objectContaining({
        op: 'update',
        table: 'NAT',
        columns: {
          logical_ip: '10.10.0.12',
          external_ids: expect.objectContaining({ 'nimbus:instance': 'ins_b' }),
        },
      }),
    ]);
  });

  it('takes every public row out, and empties the router of them, when the side goes', () => {
    const { public: _, ...privateOnly } = vpc;
    const changes = diffRows(vpcRows(privateOnly), existing(vpcRows(vpc)));
    expect(
      changes
        .filter((c) => c.op === 'delete')
        .map((c) => c.table)
        .sort(),
    ).toEqual([
      'Gateway_Chassis',
      'Logical_Router_Port',
      'Logical_Router_Static_Route',
      'Logical_Switch',
      'Logical_Switch_Port',
      'Logical_Switch_Port',
      'NAT',
    ]);
    expect(changes.filter((c) => c.op === 'update')).toEqual([
      expect.objectContaining({
        table: 'Logical_Router',
        columns: {
          ports: { refs: [expect.stringMatching(/-lrp$/)] },
          nat: { refs: [] },
          static_routes: { refs: [] },
        },
      }),
    ]);
  });

  it('refuses an address outside the pool rather than writing a NAT nothing can reach', () => {
    const stray = {
      ...side,
      nats: [{ instanceId: 'ins_a', publicIp: '198.51.100.7', privateIp: '10.10.0.11' }],
    };
    expect(() => vpcRows({ ...vpc, public: stray })).toThrow(
      /198\.51\.100\.7 is not in the pool 203\.0\.113\.0\/24/,
    );
  });
});

describe('the provider bridge', () => {
  it('is named per data directory, within IFNAMSIZ', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[a-z0-9]{1,12}$/), fc.stringMatching(/^[a-z0-9]{1,12}$/), (a, b) => {
        const [x, y] = [
          providerBridgeName(integrationBridgeName(`/d/${a}`)),
          providerBridgeName(integrationBridgeName(`/d/${b}`)),
        ];
        expect(x.length).toBeLessThanOrEqual(15);
        if (a !== b) expect(x).not.toBe(y);
      }),
    );
  });

  it("maps the public network to the bridge, keeping the chassis' other mappings", () => {
    const name = fc.stringMatching(/^[a-z][a-z0-9-]{0,8}$/);
    fc.assert(
      fc.property(fc.uniqueArray(fc.tuple(name, name), { selector: ([n]) => n }), name, (others, bridge) => {
        const current = others.map(([n, b]) => `${n}:${b}`).join(',');
        const mapped = withBridgeMapping(current, 'nimbus-public', bridge).split(',');
        const unmapped = withBridgeMapping(mapped.join(','), 'nimbus-public', null);
        const keep = others.filter(([n]) => n !== 'nimbus-public').map(([n, b]) => `${n}:${b}`);
        expect(mapped).toEqual([...keep, `nimbus-public:${bridge}`]);
        expect(unmapped).toBe(keep.join(','));
      }),
    );
  });
});

describe('the public link of the server', () => {
  const pools = { 'us-east-1': '203.0.113.0/24', 'eu-central-1': '192.0.2.0/25' };

  it("routes each region through its pool's first address unless NIMBUS_PUBLIC_GATEWAY is in its pool", () => {
    expect(publicGateways(pools, null)).toEqual({ 'us-east-1': '203.0.113.1', 'eu-central-1': '192.0.2.1' });
    expect(publicGateways(pools, '192.0.2.100')).toEqual({
      'us-east-1': '203.0.113.1',
      'eu-central-1': '192.0.2.100',
    });
  });

  it('refuses a gateway in no pool, or a pool’s network or broadcast address', () => {
    expect(() => publicGateways(pools, '198.51.100.1')).toThrow(/in no region's public pool/);
    expect(() => publicGateways(pools, '203.0.113.0')).toThrow(/network or broadcast/);
    expect(() => publicGateways(pools, '192.0.2.127')).toThrow(/network or broadcast/);
  });

  it('NATs each instance whose public IP is in the pool, and snats the rest of the block', () => {
    const link = { pools, gateways: publicGateways(pools, null) };
    const side = publicSideOf(
      { key: 'nimbus-acct_1-us-east-1', region: 'us-east-1', cidr: '10.10.0.0/16' },
      [
        { id: 'ins_a', public_ip: '203.0.113.10', private_ip: '10.10.0.2' },
        { id: 'ins_b', public_ip: null, private_ip: '10.10.0.3' },
        // Left by a pool configured otherwise since: no NAT, rather than a reconcile that fails.
        { id: 'ins_c', public_ip: '198.51.100.7', private_ip: '10.10.0.4' },
      ],
      link,
      { ip: '203.0.113.2', mac: '02:00:00:00:00:01' },
      'chassis-1',
    );
    expect(side).toMatchObject({
      pool: '203.0.113.0/24',
      gateway: '203.0.113.1',
      chassis: 'chassis-1',
      nats: [{ instanceId: 'ins_a', publicIp: '203.0.113.10', privateIp: '10.10.0.2' }],
      snatBlock: '10.10.0.0/16',
    });
    const rows = vpcRows({ ...vpc, public: side! });
    const snat = rows.find((r) => r.table === 'NAT' && r.columns.type === 'snat')!;
    expect(snat.columns).toMatchObject({ external_ip: '203.0.113.2', logical_ip: '10.10.0.0/16' });
    const router = rows.find((r) => r.table === 'Logical_Router')!;
    expect((router.columns.nat as { refs: string[] }).refs).toContain(snat.key);
    // The instance without a NAT (ins_b) is metered before the snat by router policies the router holds.
    const policies = rows.filter((r) => r.table === 'Logical_Router_Policy');
    expect(policies.map((r) => r.columns.match)).toEqual([
      'ip4.src == {10.10.0.0/16, 169.254.0.0/16} && ip4.dst == {10.10.0.0/16, 169.254.0.0/16}',
      'inport == "nimbus-acct_1-us-east-1-lrp" && ip4.src == 10.10.0.12',
      'inport == "nimbus-acct_1-us-east-1-public-lrp" && ip4.dst == 10.10.0.12',
    ]);
    expect(policies.every((r) => r.columns.action === 'allow')).toBe(true);
    expect((router.columns.policies as { refs: string[] }).refs).toEqual(policies.map((r) => r.key));
    // Without the snat, nothing goes out through the router's address: no policy.
    const unsnatted = vpcRows({ ...vpc, public: { ...side!, snatBlock: undefined } });
    expect(unsnatted.filter((r) => r.table === 'Logical_Router_Policy')).toEqual([]);
    // A region without a pool has no public side.
    expect(
      publicSideOf({ key: 'k', region: 'sa-east-1', cidr: '10.50.0.0/16' }, [], link, side!.router, 'c'),
    ).toBeUndefined();
  });
});
