import { describe, expect, it } from 'vitest';
import type { OvnEndpoints } from './daemons.js';
import type { Northbound } from './northbound.js';
import {
  type MeterRow,
  meterPolicies,
  policyFlowCookies,
  SnatCounters,
  snatCounts,
  sumByCookie,
} from './snat-transfer.js';

const DUMP = `NXST_FLOW reply (xid=0x4):
 cookie=0x173cd7e9, duration=12.477s, table=23, n_packets=2189, n_bytes=3290234, idle_age=0, priority=900,ip,metadata=0x3,nw_src=10.10.0.12 actions=load:0->OXM_OF_PKT_REG4[32..47],resubmit(,24)
 cookie=0x11e5b60f, duration=12.448s, table=23, n_packets=1611, n_bytes=134208, idle_age=0, priority=900,ip,metadata=0x3,nw_dst=10.10.0.12 actions=load:0->OXM_OF_PKT_REG4[32..47],resubmit(,24)
 cookie=0xe3d41435, duration=2.508s, table=23, n_packets=2, n_bytes=100, priority=910,ip,metadata=0x3,nw_src=10.10.0.0/16,nw_dst=10.10.0.0/16 actions=resubmit(,24)
 cookie=0xe3d41435, duration=2.408s, table=23, n_packets=1, n_bytes=50, priority=910,ip,metadata=0x3,nw_src=10.10.0.0/16,nw_dst=169.254.0.0/16 actions=resubmit(,24)
 cookie=0x131af63, duration=5.366s, table=28, n_packets=0, n_bytes=0, priority=100,udp actions=resubmit(,29)
`;

const SB_JSON = JSON.stringify({
  headings: ['_uuid', 'external_ids'],
  data: [
    [
      ['uuid', '173cd7e9-e6a8-41c4-85a5-4de29bd32b7c'],
      [
        'map',
        [
          ['source', 'northd.c:1'],
          ['stage-hint', 'aaaa0001'],
          ['stage-name', 'lr_in_policy'],
        ],
      ],
    ],
    [
      ['uuid', '11e5b60f-5e1b-4b3b-9c34-66311af0b8cf'],
      [
        'map',
        [
          ['stage-hint', 'aaaa0002'],
          ['stage-name', 'lr_in_policy'],
        ],
      ],
    ],
    // The stage's default flow has no hint.
    [
      ['uuid', '358f175c-cc68-4d93-9cf0-6ebedeca6458'],
      ['map', [['stage-name', 'lr_in_policy']]],
    ],
  ],
});

const meters: MeterRow[] = [
  { hint: 'aaaa0001', instanceId: 'ins_b', direction: 'out', ip: '10.10.0.12' },
  { hint: 'aaaa0002', instanceId: 'ins_b', direction: 'in', ip: '10.10.0.12' },
];

describe('public transfer through the router snat', () => {
  it('writes a private policy and a pair per instance, none when no instance is metered', () => {
    const ports = { private: 'k-lrp', public: 'k-public-lrp' };
    expect(meterPolicies('10.10.0.0/16', ports, [])).toEqual([]);
    const policies = meterPolicies('10.10.0.0/16', ports, [{ instanceId: 'ins_b', ip: '10.10.0.12' }]);
    expect(policies.map((p) => [p.name, p.priority, p.match, p.externalIds])).toEqual([
      [
        'private',
        910,
        'ip4.src == {10.10.0.0/16, 169.254.0.0/16} && ip4.dst == {10.10.0.0/16, 169.254.0.0/16}',
        {},
      ],
      [
        'ins_b-out',
        900,
        'inport == "k-lrp" && ip4.src == 10.10.0.12',
        { 'nimbus:instance': 'ins_b', 'nimbus:meter': 'out' },
      ],
      [
        'ins_b-in',
        900,
        'inport == "k-public-lrp" && ip4.dst == 10.10.0.12',
        { 'nimbus:instance': 'ins_b', 'nimbus:meter': 'in' },
      ],
    ]);
    // Another VPC's instance on the same private IP: flows of its own (not one logical flow for both).
    const other = meterPolicies('10.10.0.0/16', { private: 'o-lrp', public: 'o-public-lrp' }, [
      { instanceId: 'ins_o', ip: '10.10.0.12' },
    ]);
    expect(other[1]!.match).not.toBe(policies[1]!.match);
    expect(other[2]!.match).not.toBe(policies[2]!.match);
    // A VPN's peers are private to the VPC: an instance's traffic with them is not public transfer.
    const withVpn = meterPolicies(
      '10.10.0.0/16',
      ports,
      [{ instanceId: 'ins_b', ip: '10.10.0.12' }],
      ['10.99.0.0/24'],
    );
    expect(withVpn[0]!.match).toBe(
      'ip4.src == {10.10.0.0/16, 169.254.0.0/16, 10.99.0.0/24} && ip4.dst == {10.10.0.0/16, 169.254.0.0/16, 10.99.0.0/24}',
    );
  });

  it('sums the flows of a cookie and keeps their least duration', () => {
    const flows = sumByCookie(DUMP);
    expect(flows.get('173cd7e9')).toEqual({ bytes: 3290234, durationMs: 12477 });
    expect(flows.get('e3d41435')).toEqual({ bytes: 150, durationMs: 2408 });
    expect(flows.get('0131af63')).toEqual({ bytes: 0, durationMs: 5366 });
  });

  it("maps each policy's hint to its logical flow's cookie", () => {
    expect(policyFlowCookies(SB_JSON)).toEqual(
      new Map([
        ['aaaa0001', ['173cd7e9']],
        ['aaaa0002', ['11e5b60f']],
      ]),
    );
  });

  it('counts an instance only with both flows installed, its epoch naming the cookies and installs', () => {
    const label = () => '100';
    const counts = snatCounts(meters, policyFlowCookies(SB_JSON), sumByCookie(DUMP), label);
    expect(counts).toEqual(
      new Map([
        ['ins_b', { bytesOut: 3290234, bytesIn: 134208, epoch: 'snat:10.10.0.12/173cd7e9.100/11e5b60f.100' }],
      ]),
    );
    // The in flow not installed yet: no counter rather than half of one.
    const partial = sumByCookie(
      DUMP.split('\n')
        .filter((l) => !l.includes('11e5b60f'))
        .join('\n'),
    );
    expect(snatCounts(meters, policyFlowCookies(SB_JSON), partial, label).size).toBe(0);
    // Two logical flows for one hint cannot be told apart: no counter.
    const doubled = new Map([
      ['aaaa0001', ['173cd7e9', '11e5b60f']],
      ['aaaa0002', ['11e5b60f']],
    ]);
    expect(snatCounts(meters, doubled, sumByCookie(DUMP), label).size).toBe(0);
  });

  it("keeps an install's label through reading delays, and names an install again anew", () => {
    const counters = new SnatCounters({} as OvnEndpoints, {} as Northbound);
    const t = 1_000_000_000_000;
    const first = counters.installLabel('c', 0, t);
    expect(first).toBe(String(1_000_000_000));
    // Read 30 s later, 150 ms late: the same install.
    expect(counters.installLabel('c', 30_000 - 150, t + 30_000)).toBe(first);
    // Installed again 4 s after the first, in the same 10 s step: a label of its own.
    const again = counters.installLabel('c', 0, t + 4000);
    expect(again).not.toBe(first);
    expect(counters.installLabel('c', 1000, t + 5000)).toBe(again);
    // Installed again 20 s later: the step names it.
    expect(counters.installLabel('c', 0, t + 24_000)).toBe(String(1_000_000_020));
  });
});
