/**
 * Public data transfer counted on the provider bridge (ComputeDriver.publicTransfer with
 * NIMBUS_NETWORK=ovn): OpenFlow flows with counters, one pair per public IP, on the bridge that holds
 * NIMBUS_PUBLIC_UPLINK (uplink.ts). Every packet between a VPC's router and the public link crosses that
 * bridge already NATed, so a packet from an instance to a public address carries the instance's public
 * IP as its source there, and one to the instance carries it as its destination. Private traffic
 * (instance to instance, metadata) never reaches the bridge, so it counts nothing.
 *
 * The bridge is Nimbus's own; its flows (in two tables, so that a packet between two public IPs counts
 * once as the sender's out and once as the receiver's in):
 *
 *   table 0, priority 100, ip, nw_src=<public ip>  → resubmit to table 1   (the instance's bytes out)
 *   table 0, priority 1                            → resubmit to table 1
 *   table 1, priority 100, ip, nw_dst=<public ip>  → NORMAL                (the instance's bytes in)
 *   table 1, priority 1                            → NORMAL
 *
 * so forwarding is the bridge's default (NORMAL) for every packet, as before.
 *
 * Which instance a counter is. OVN's NAT rows (their `nimbus:instance`) say which instance holds which
 * public IP now; `sync` makes the flows match them. A pair's cookie is 32 bits of a hash of the instance
 * id (whose counter it is) and 32 random bits (which life of it): an address moved to another instance
 * gets a new pair, as does a pair found incomplete, and a bridge re-created or an ovs-vswitchd restarted
 * (flows are not kept in its database) gets new pairs at the next sync. The reading's epoch is the
 * address and that cookie, so billing (resources/billing/transfer.ts) takes every new pair as a counter
 * started from zero, and never counts a reset as negative or twice.
 *
 * Not counted here: an instance without a public IP that reaches out through its VPC router's own
 * address (the VPC's `snat`): on the bridge its packets carry the router's address, shared by the VPC.
 * Its router policies count it before the NAT (snat-transfer.ts).
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { run } from '../qemu/tools.js';
import type { OvnEndpoints } from './daemons.js';
import { short } from './network.js';
import { mapEntries, type Northbound, setElements } from './northbound.js';
import { KEY_ID } from './topology.js';

/** A public IP and the instance whose counter it is. */
export interface TransferNat {
  instanceId: string;
  publicIp: string;
}

/** One of Nimbus's counting flows as the bridge dumps it. */
export interface CountingFlow {
  /** 16 hex digits. */
  cookie: string;
  direction: 'out' | 'in';
  ip: string;
  bytes: number;
}

/** An instance's counter, cumulative since its pair of flows was made. */
export interface TransferCount {
  bytesOut: number;
  bytesIn: number;
  /** The address and the pair's cookie: one life of the counter. */
  epoch: string;
}

const COUNTING_PRIORITY = 100;
const PASS_PRIORITY = 1;

/** The cookie's first 8 hex digits: whose counter a flow is. */
export function instanceCookiePrefix(instanceId: string): string {
  return short(instanceId, 8);
}

/** A new cookie for a pair of `instanceId`'s flows: its prefix and 32 random bits. */
export function newCookie(instanceId: string): string {
  return `${instanceCookiePrefix(instanceId)}${randomBytes(4).toString('hex')}`;
}

/** The two counting flows of a pair, as `ovs-ofctl add-flow` takes them. */
export function countingFlows(cookie: string, ip: string): string[] {
  return [
    `table=0,priority=${COUNTING_PRIORITY},cookie=0x${cookie},ip,nw_src=${ip},actions=resubmit(,1)`,
    `table=1,priority=${COUNTING_PRIORITY},cookie=0x${cookie},ip,nw_dst=${ip},actions=NORMAL`,
  ];
}

/** The flows every packet not counted takes; table 1's first, so no packet meets an empty table 1. */
export const PASS_FLOWS: readonly string[] = [
  `table=1,priority=${PASS_PRIORITY},actions=NORMAL`,
  `table=0,priority=${PASS_PRIORITY},actions=resubmit(,1)`,
];

/**
 * The counting flows in an `ovs-ofctl dump-flows` text (other flows are left out): table 0's match on a
 * source address is bytes out, table 1's on a destination bytes in.
 */
export function parseCountingFlows(dump: string): CountingFlow[] {
  const flows: CountingFlow[] = [];
  for (const line of dump.split('\n')) {
    if (!line.includes(`priority=${COUNTING_PRIORITY},`)) continue;
    const cookie = /cookie=0x([0-9a-f]+)/.exec(line)?.[1];
    const table = /table=(\d+)/.exec(line)?.[1];
    const bytes = /n_bytes=(\d+)/.exec(line)?.[1];
    const source = /nw_src=([0-9.]+)/.exec(line)?.[1];
    const destination = /nw_dst=([0-9.]+)/.exec(line)?.[1];
    if (cookie === undefined || bytes === undefined) continue;
    if (table === '0' && source !== undefined) {
      flows.push({ cookie: cookie.padStart(16, '0'), direction: 'out', ip: source, bytes: Number(bytes) });
    } else if (table === '1' && destination !== undefined) {
      flows.push({
        cookie: cookie.padStart(16, '0'),
        direction: 'in',
        ip: destination,
        bytes: Number(bytes),
      });
    }
  }
  return flows;
}

/** Whether a dump holds both pass flows. */
export function hasPassFlows(dump: string): boolean {
  const lines = dump.split('\n').filter((line) => line.includes(`priority=${PASS_PRIORITY} `));
  return (
    lines.some((line) => /table=0\b/.test(line) || !/table=/.test(line)) &&
    lines.some((line) => /table=1\b/.test(line))
  );
}

/** A complete pair: its cookie and address, and both counters. */
interface Pair {
  cookie: string;
  ip: string;
  out: number;
  in: number;
}

/** The complete pairs among the flows, by cookie. */
function pairsOf(flows: readonly CountingFlow[]): Map<string, Pair> {
  const byCookie = new Map<string, CountingFlow[]>();
  for (const flow of flows) {
    const members = byCookie.get(flow.cookie);
    if (members) members.push(flow);
    else byCookie.set(flow.cookie, [flow]);
  }
  const pairs = new Map<string, Pair>();
  for (const [cookie, members] of byCookie) {
    const out = members.filter((f) => f.direction === 'out');
    const inbound = members.filter((f) => f.direction === 'in');
    if (out.length !== 1 || inbound.length !== 1 || out[0]!.ip !== inbound[0]!.ip) continue;
    pairs.set(cookie, { cookie, ip: out[0]!.ip, out: out[0]!.bytes, in: inbound[0]!.bytes });
  }
  return pairs;
}

/**
 * What makes the flows count exactly `nats` (pure): the cookies to delete (pairs of no NAT, incomplete
 * pairs, a NAT's extra pairs) and the NATs to give a new pair. A complete pair of the NAT's instance on
 * the NAT's address is kept, counters and all.
 */
export function planCountingFlows(
  nats: readonly TransferNat[],
  flows: readonly CountingFlow[],
): { remove: string[]; add: TransferNat[] } {
  // A NAT's pair is found by its instance's prefix and its address (the lowest cookie when several).
  const byOwner = new Map<string, string>();
  for (const pair of [...pairsOf(flows).values()].sort((a, b) => (a.cookie < b.cookie ? -1 : 1))) {
    const owner = `${pair.cookie.slice(0, 8)}/${pair.ip}`;
    if (!byOwner.has(owner)) byOwner.set(owner, pair.cookie);
  }
  const kept = new Set<string>();
  const add: TransferNat[] = [];
  for (const nat of nats) {
    const found = byOwner.get(`${instanceCookiePrefix(nat.instanceId)}/${nat.publicIp}`);
    if (found !== undefined) kept.add(found);
    else add.push(nat);
  }
  const remove = [...new Set(flows.map((flow) => flow.cookie))].filter((cookie) => !kept.has(cookie)).sort();
  return { remove, add };
}

/** Each instance's counter from the flows (instances with no complete pair are left out). */
export function countsOf(
  instanceIds: readonly string[],
  flows: readonly CountingFlow[],
): Map<string, TransferCount> {
  const byPrefix = new Map<string, Pair[]>();
  for (const pair of pairsOf(flows).values()) {
    const prefix = pair.cookie.slice(0, 8);
    const mine = byPrefix.get(prefix);
    if (mine) mine.push(pair);
    else byPrefix.set(prefix, [pair]);
  }
  const counts = new Map<string, TransferCount>();
  for (const id of instanceIds) {
    const mine = byPrefix.get(instanceCookiePrefix(id)) ?? [];
    // An instance holds one address; two pairs (a move not yet synced) are one too many to tell apart.
    if (mine.length !== 1) continue;
    const pair = mine[0]!;
    counts.set(id, { bytesOut: pair.out, bytesIn: pair.in, epoch: `${pair.ip}/${pair.cookie}` });
  }
  return counts;
}

/** The instances' public IPs as OVN's NAT rows hold them (Nimbus's dnat_and_snat rows). */
export async function natsInOvn(nb: Northbound): Promise<TransferNat[]> {
  const rows = await nb.select('NAT', [['type', '==', 'dnat_and_snat']], ['external_ip', 'external_ids']);
  return rows.flatMap((row) => {
    const ids = mapEntries(row.external_ids);
    const instanceId = ids['nimbus:instance'];
    if (ids[KEY_ID] === undefined || instanceId === undefined) return [];
    const [ip] = setElements(row.external_ip).map(String);
    return ip === undefined ? [] : [{ instanceId, publicIp: ip }];
  });
}

/** The flow mods (ovs-ofctl add-flows lines) that carry out a plan, deletions first. */
export function flowMods(plan: { remove: readonly string[]; add: readonly TransferNat[] }): string[] {
  return [
    ...plan.remove.map((cookie) => `delete cookie=0x${cookie}/-1`),
    ...plan.add.flatMap((nat) =>
      countingFlows(newCookie(nat.instanceId), nat.publicIp).map((f) => `add ${f}`),
    ),
  ];
}

/** How long a reading trusts the last sync (a sync after each VPC reconcile keeps them current). */
const SYNC_FRESH_MS = 1000;

/**
 * The counting flows of one provider bridge: synced with OVN's NATs and read. One process drives a
 * bridge, and its syncs and reads take turns here, so two syncs never both make a pair for one NAT
 * (the second would replace the first's, and a counter be counted anew).
 */
export class TransferCounters {
  private turn: Promise<unknown> = Promise.resolve();
  private syncedAt = 0;

  constructor(
    private readonly endpoints: OvnEndpoints,
    private readonly bridge: string,
    private readonly nb: Northbound,
  ) {}

  private inTurn<T>(work: () => Promise<T>): Promise<T> {
    const next = this.turn.then(work, work);
    this.turn = next.catch(() => {});
    return next;
  }

  private dump(): Promise<string> {
    return run('ovs-ofctl', ['dump-flows', this.bridge], { env: this.endpoints.env, timeoutMs: 30_000 });
  }

  /** Applies flow mods in order, all in one ovs-ofctl (its `add-flows … -` reads them from stdin). */
  private apply(mods: readonly string[]): Promise<void> {
    if (mods.length === 0) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const child = execFile(
        'ovs-ofctl',
        ['add-flows', this.bridge, '-'],
        { env: this.endpoints.env, timeout: 60_000, encoding: 'utf8' },
        (error, _stdout, stderr) =>
          error
            ? reject(new Error(`ovs-ofctl add-flows ${this.bridge}: ${stderr || error.message}`))
            : resolve(),
      );
      // An ovs-ofctl that exits early (its error is the callback's) closes its stdin under the write.
      child.stdin?.on('error', () => {});
      child.stdin?.end(`${mods.join('\n')}\n`);
    });
  }

  /** Makes the flows count OVN's NATs now: pairs added for new addresses, those of old ones deleted. */
  sync(): Promise<void> {
    return this.inTurn(async () => {
      const started = Date.now();
      const nats = await natsInOvn(this.nb);
      const dump = await this.dump();
      const plan = planCountingFlows(nats, parseCountingFlows(dump));
      await this.apply([...(hasPassFlows(dump) ? [] : PASS_FLOWS.map((f) => `add ${f}`)), ...flowMods(plan)]);
      this.syncedAt = started;
    });
  }

  /**
   * The counters of `instanceIds`, after a sync unless one has just run (so a bridge that lost its flows
   * counts again by the next reading).
   */
  async read(instanceIds: readonly string[]): Promise<Map<string, TransferCount>> {
    if (Date.now() - this.syncedAt > SYNC_FRESH_MS) await this.sync();
    return this.inTurn(async () => countsOf(instanceIds, parseCountingFlows(await this.dump())));
  }
}
