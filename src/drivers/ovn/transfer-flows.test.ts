import { describe, expect, it } from 'vitest';
import {
  type CountingFlow,
  countingFlows,
  countsOf,
  flowMods,
  hasPassFlows,
  instanceCookiePrefix,
  newCookie,
  parseCountingFlows,
  planCountingFlows,
} from './transfer-flows.js';

const A = 'ins_aaaaaaaaaaaa';
const B = 'ins_bbbbbbbbbbbb';
const cookieOf = (instanceId: string, life: string) => `${instanceCookiePrefix(instanceId)}${life}`;

/** A dump as ovs-ofctl 3.1 writes it: cookies without leading zeros. */
function dump(flows: readonly CountingFlow[], pass = true): string {
  const line = (flow: CountingFlow) =>
    ` cookie=0x${flow.cookie.replace(/^0+/, '')}, duration=1.5s, table=${flow.direction === 'out' ? 0 : 1}, n_packets=3, n_bytes=${flow.bytes}, idle_age=0, priority=100,ip,${flow.direction === 'out' ? 'nw_src' : 'nw_dst'}=${flow.ip} actions=${flow.direction === 'out' ? 'resubmit(,1)' : 'NORMAL'}`;
  return [
    'NXST_FLOW reply (xid=0x4):',
    ...flows.map(line),
    ' cookie=0x0, duration=9s, table=0, n_packets=9, n_bytes=900, idle_age=0, priority=0 actions=NORMAL',
    ...(pass
      ? [
          ' cookie=0x0, duration=9s, table=0, n_packets=9, n_bytes=900, idle_age=0, priority=1 actions=resubmit(,1)',
          ' cookie=0x0, duration=9s, table=1, n_packets=9, n_bytes=900, idle_age=0, priority=1 actions=NORMAL',
        ]
      : []),
  ].join('\n');
}

const pair = (cookie: string, ip: string, out: number, inBytes: number): CountingFlow[] => [
  { cookie, direction: 'out', ip, bytes: out },
  { cookie, direction: 'in', ip, bytes: inBytes },
];

describe('the provider bridge counting flows', () => {
  it('reads both directions of a pair back from a dump, cookies with leading zeros included', () => {
    const cookie = '00a1b2c3d4e5f601';
    const flows = pair(cookie, '203.0.113.7', 1500, 64);
    expect(parseCountingFlows(dump(flows))).toEqual(flows);
    expect(hasPassFlows(dump(flows))).toBe(true);
    expect(hasPassFlows(dump(flows, false))).toBe(false);
  });

  it('writes flows whose cookie and address a dump gives back', () => {
    const cookie = newCookie(A);
    expect(cookie).toMatch(/^[0-9a-f]{16}$/);
    expect(cookie.startsWith(instanceCookiePrefix(A))).toBe(true);
    const [out, inbound] = countingFlows(cookie, '203.0.113.7');
    expect(out).toBe(`table=0,priority=100,cookie=0x${cookie},ip,nw_src=203.0.113.7,actions=resubmit(,1)`);
    expect(inbound).toBe(`table=1,priority=100,cookie=0x${cookie},ip,nw_dst=203.0.113.7,actions=NORMAL`);
  });

  it("keeps a NAT's complete pair, and gives a new pair to a new NAT", () => {
    const kept = cookieOf(A, '00000001');
    const plan = planCountingFlows(
      [
        { instanceId: A, publicIp: '203.0.113.7' },
        { instanceId: B, publicIp: '203.0.113.8' },
      ],
      pair(kept, '203.0.113.7', 10, 20),
    );
    expect(plan).toEqual({ remove: [], add: [{ instanceId: B, publicIp: '203.0.113.8' }] });
  });

  it('gives an address moved to another instance a new pair, and deletes the old one', () => {
    const old = cookieOf(A, '00000001');
    const plan = planCountingFlows(
      [{ instanceId: B, publicIp: '203.0.113.7' }],
      pair(old, '203.0.113.7', 10, 20),
    );
    expect(plan).toEqual({ remove: [old], add: [{ instanceId: B, publicIp: '203.0.113.7' }] });
  });

  it('deletes an incomplete pair and makes it anew, and deletes pairs of no NAT', () => {
    const half = cookieOf(A, '00000001');
    const stray = cookieOf(B, '00000002');
    const plan = planCountingFlows(
      [{ instanceId: A, publicIp: '203.0.113.7' }],
      [pair(half, '203.0.113.7', 10, 20)[0]!, ...pair(stray, '203.0.113.9', 1, 1)],
    );
    expect(plan).toEqual({ remove: [half, stray].sort(), add: [{ instanceId: A, publicIp: '203.0.113.7' }] });
  });

  it("counts an instance from its one pair, the address and cookie its epoch; private traffic is no flow's", () => {
    const a = cookieOf(A, '0000000a');
    const counts = countsOf([A, B], pair(a, '203.0.113.7', 4096, 512));
    expect(counts).toEqual(new Map([[A, { bytesOut: 4096, bytesIn: 512, epoch: `203.0.113.7/${a}` }]]));
    // A pair made again (the bridge re-created, the address moved back) is another life of the counter.
    const again = countsOf([A], pair(cookieOf(A, '0000000b'), '203.0.113.7', 0, 0)).get(A);
    expect(again?.epoch).not.toBe(counts.get(A)?.epoch);
  });

  it('leaves out an instance with two pairs (a move not yet synced)', () => {
    const flows = [
      ...pair(cookieOf(A, '00000001'), '203.0.113.7', 1, 1),
      ...pair(cookieOf(A, '00000002'), '203.0.113.8', 1, 1),
    ];
    expect(countsOf([A], flows).size).toBe(0);
  });

  it('carries out a plan in one batch of flow mods, deletions before additions', () => {
    const old = cookieOf(A, '00000001');
    const mods = flowMods({ remove: [old], add: [{ instanceId: B, publicIp: '203.0.113.7' }] });
    expect(mods).toHaveLength(3);
    expect(mods[0]).toBe(`delete cookie=0x${old}/-1`);
    expect(mods[1]).toMatch(
      new RegExp(
        `^add table=0,priority=100,cookie=0x${instanceCookiePrefix(B)}[0-9a-f]{8},ip,nw_src=203\\.0\\.113\\.7,`,
      ),
    );
    expect(mods[2]?.startsWith('add table=1,priority=100,')).toBe(true);
  });
});
