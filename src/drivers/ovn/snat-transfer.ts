/**
 * Public data transfer of instances without a public IP (ComputeDriver.publicTransfer with
 * NIMBUS_NETWORK=ovn). Such an instance reaches the internet through its VPC router's `snat` (the router's
 * own address, shared by the VPC), so on the provider bridge (transfer-flows.ts) its bytes cannot be told
 * from its neighbours'. They are counted before the NAT instead, on the integration bridge, by logical
 * router policies in the router's `lr_in_policy` stage, which every routed packet crosses with its private
 * addresses (after un-SNAT/DNAT, before the egress SNAT):
 *
 *   priority 910  ip4.src == {block, 169.254.0.0/16} && ip4.dst == {block, 169.254.0.0/16}  allow
 *   priority 900  inport == <router's VPC port> && ip4.src == <instance's private IP>      allow  (out)
 *   priority 900  inport == <router's link port> && ip4.dst == <instance's private IP>     allow  (in)
 *
 * The first takes private routed traffic (metadata through the host port, a hairpin through another
 * instance's public IP) out of the counted ones. `allow` is the stage's default action (`reg8[0..15] = 0;
 * next;`), so no policy changes forwarding, and ACLs sit on the switch ports, so none changes the
 * firewall's verdicts. Written with the VPC's other rows by its reconcile (uplink.ts), for the instances
 * the public side has no `dnat_and_snat` for, only when the VPC has its `snat`.
 *
 * Counting. ovn-northd makes one logical flow per policy; ovn-controller installs its OpenFlow flows on
 * the integration bridge with the logical flow's UUID's first 32 bits as cookie (as ovn-detrace reads
 * them). The southbound flow of a policy is found by its `stage-hint` (the policy's UUID's first 32 bits),
 * and its bytes are the n_bytes of the flows with that cookie.
 *
 * Epoch. The flows are installed again, from zero, when ovn-controller or ovs-vswitchd starts again, and
 * a new logical flow (the policy or the southbound database made again) has a new cookie. So the epoch is
 * the private IP, both cookies and when each flow was installed (the reading's time less its `duration`,
 * in INSTALL_GRAIN_S-second steps, so a server started again names the same install the same). A reading
 * within INSTALL_TOLERANCE_MS of the install time this process saw first keeps that label, so delays in
 * reading never make a new epoch; one further off is an install again, a new epoch. What is left: a server
 * started again whose first reading lands across a step's edge from the last one's (the reading's delay,
 * tens of ms, against 10 s) takes the counter for a new one; billing (transfer.ts) then counts it again.
 */

import { run } from '../qemu/tools.js';
import type { OvnEndpoints } from './daemons.js';
import { mapEntries, type Northbound, uuidOf } from './northbound.js';
import type { TransferCount } from './transfer-flows.js';

export const PRIVATE_POLICY_PRIORITY = 910;
export const METER_POLICY_PRIORITY = 900;
/** The link-local block: the metadata host port's network (topology.ts HostPort). */
const LINK_LOCAL = '169.254.0.0/16';
const METER_KEY = 'nimbus:meter';
const INSTANCE_KEY = 'nimbus:instance';
const INSTALL_GRAIN_S = 10;
const INSTALL_TOLERANCE_MS = 2000;

export type MeterDirection = 'out' | 'in';

/** A router policy Nimbus writes for metering; the private one carries no instance in its `externalIds`. */
export interface MeterPolicy {
  name: string;
  priority: number;
  match: string;
  externalIds: Record<string, string>;
}

/** The router's two ports a metered packet enters by: from the VPC (out) and from the link (in). */
export interface MeterPorts {
  private: string;
  public: string;
}

/**
 * The policies of a VPC (pure): the private one and a pair per instance without a public IP. None when
 * no instance is metered here. A pair's match names the router port the packet enters by: ovn-northd
 * makes one logical flow of identical flows of several routers (a datapath group), and two accounts'
 * instances often hold the same private IP; the port makes each VPC's flows, so its cookies, its own.
 */
export function meterPolicies(
  block: string,
  ports: MeterPorts,
  unnated: readonly { instanceId: string; ip: string }[],
  /** The VPC's VPN tunnel networks: their peers reach instances through the gateway, never the link. */
  tunnels: readonly string[] = [],
): MeterPolicy[] {
  if (unnated.length === 0) return [];
  const privateSet = `{${[block, LINK_LOCAL, ...tunnels].join(', ')}}`;
  return [
    {
      name: 'private',
      priority: PRIVATE_POLICY_PRIORITY,
      match: `ip4.src == ${privateSet} && ip4.dst == ${privateSet}`,
      externalIds: {},
    },
    ...unnated.flatMap(({ instanceId, ip }) =>
      (['out', 'in'] as const).map((direction) => ({
        name: `${instanceId}-${direction}`,
        priority: METER_POLICY_PRIORITY,
        match:
          direction === 'out'
            ? `inport == "${ports.private}" && ip4.src == ${ip}`
            : `inport == "${ports.public}" && ip4.dst == ${ip}`,
        externalIds: { [INSTANCE_KEY]: instanceId, [METER_KEY]: direction },
      })),
    ),
  ];
}

/** A metering policy as OVN holds it. */
export interface MeterRow {
  /** The policy's UUID's first 8 hex digits: its logical flow's `stage-hint`. */
  hint: string;
  instanceId: string;
  direction: MeterDirection;
  ip: string;
}

/** An OpenFlow flow's counter and age, by cookie (8 hex digits, as ovn-controller sets them). */
export interface CookieFlows {
  bytes: number;
  /** The least `duration` among the cookie's flows, in ms. */
  durationMs: number;
}

/** The flows of a `dump-flows` text summed by cookie (flows without `n_bytes` or `duration` left out). */
export function sumByCookie(dump: string): Map<string, CookieFlows> {
  const byCookie = new Map<string, CookieFlows>();
  for (const line of dump.split('\n')) {
    const cookie = /cookie=0x([0-9a-f]+)/.exec(line)?.[1];
    const bytes = /n_bytes=(\d+)/.exec(line)?.[1];
    const duration = /duration=([0-9.]+)s/.exec(line)?.[1];
    if (cookie === undefined || bytes === undefined || duration === undefined) continue;
    const key = cookie.padStart(8, '0');
    const found = byCookie.get(key);
    const durationMs = Math.round(Number(duration) * 1000);
    byCookie.set(key, {
      bytes: (found?.bytes ?? 0) + Number(bytes),
      durationMs: Math.min(found?.durationMs ?? Number.POSITIVE_INFINITY, durationMs),
    });
  }
  return byCookie;
}

/** The metering policies in OVN's northbound database. */
export async function meterRowsInOvn(nb: Northbound): Promise<MeterRow[]> {
  const rows = await nb.select(
    'Logical_Router_Policy',
    [['priority', '==', METER_POLICY_PRIORITY]],
    ['_uuid', 'match', 'external_ids'],
  );
  return rows.flatMap((row) => {
    const ids = mapEntries(row.external_ids);
    const direction = ids[METER_KEY];
    const instanceId = ids[INSTANCE_KEY];
    const ip = /== ([0-9.]+)$/.exec(String(row.match))?.[1];
    const uuid = uuidOf(row._uuid);
    if ((direction !== 'out' && direction !== 'in') || instanceId === undefined || ip === undefined)
      return [];
    return [{ hint: uuid.slice(0, 8), instanceId, direction, ip }];
  });
}

/**
 * `stage-hint` → the cookies of the router policy stage's logical flows, from `ovn-sbctl --format=json
 * --columns=_uuid,external_ids find Logical_Flow …` (rows of [["uuid", id], ["map", [[key, value]…]]]).
 */
export function policyFlowCookies(json: string): Map<string, string[]> {
  const byHint = new Map<string, string[]>();
  const { data } = JSON.parse(json) as { data: [[string, string], [string, [string, string][]]][] };
  for (const [[, uuid], [, entries]] of data) {
    const hint = entries.find(([key]) => key === 'stage-hint')?.[1];
    if (hint === undefined || !/^[0-9a-f]{8}$/.test(hint)) continue;
    byHint.set(hint, [...(byHint.get(hint) ?? []), uuid.slice(0, 8)]);
  }
  return byHint;
}

/**
 * Each instance's counter (pure): both its policies' flows must be installed (one logical flow each, so
 * the cookie names one policy). `installLabel` names an install (see the module comment).
 */
export function snatCounts(
  meters: readonly MeterRow[],
  cookiesByHint: ReadonlyMap<string, readonly string[]>,
  flows: ReadonlyMap<string, CookieFlows>,
  installLabel: (cookie: string, durationMs: number) => string,
): Map<string, TransferCount> {
  const byInstance = new Map<string, Partial<Record<MeterDirection, { row: MeterRow; cookie: string }>>>();
  for (const row of meters) {
    const cookies = cookiesByHint.get(row.hint) ?? [];
    if (cookies.length !== 1) continue;
    const mine = byInstance.get(row.instanceId) ?? {};
    mine[row.direction] = { row, cookie: cookies[0]! };
    byInstance.set(row.instanceId, mine);
  }
  const counts = new Map<string, TransferCount>();
  for (const [instanceId, { out, in: inbound }] of byInstance) {
    if (out === undefined || inbound === undefined || out.row.ip !== inbound.row.ip) continue;
    const outFlows = flows.get(out.cookie);
    const inFlows = flows.get(inbound.cookie);
    if (outFlows === undefined || inFlows === undefined) continue;
    counts.set(instanceId, {
      bytesOut: outFlows.bytes,
      bytesIn: inFlows.bytes,
      epoch: `snat:${out.row.ip}/${out.cookie}.${installLabel(out.cookie, outFlows.durationMs)}/${inbound.cookie}.${installLabel(inbound.cookie, inFlows.durationMs)}`,
    });
  }
  return counts;
}

/** The counters of the router policies on one chassis's integration bridge. */
export class SnatCounters {
  /** cookie → the install time first seen (ms) and its label. */
  private readonly installs = new Map<string, { at: number; label: string }>();

  constructor(
    private readonly endpoints: OvnEndpoints,
    private readonly nb: Northbound,
  ) {}

  /**
   * The label of an install seen now with `durationMs`: kept while the install time stays put; a flow
   * installed again within the same INSTALL_GRAIN_S step gets the step and the time in ms, so it differs.
   */
  installLabel(cookie: string, durationMs: number, now = Date.now()): string {
    const at = now - durationMs;
    const seen = this.installs.get(cookie);
    if (seen !== undefined && Math.abs(seen.at - at) <= INSTALL_TOLERANCE_MS) return seen.label;
    const step = String(Math.floor(at / 1000 / INSTALL_GRAIN_S) * INSTALL_GRAIN_S);
    const label = seen?.label.split('.')[0] === step ? `${step}.${at}` : step;
    this.installs.set(cookie, { at, label });
    return label;
  }

  async read(instanceIds: readonly string[]): Promise<Map<string, TransferCount>> {
    const wanted = new Set(instanceIds);
    const meters = (await meterRowsInOvn(this.nb)).filter((row) => wanted.has(row.instanceId));
    if (meters.length === 0) return new Map();
    const env = this.endpoints.env;
    const flowsJson = await run(
      'ovn-sbctl',
      [
        `--db=${this.endpoints.sbUrl}`,
        '--format=json',
        '--columns=_uuid,external_ids',
        'find',
        'Logical_Flow',
        'external_ids:stage-name=lr_in_policy',
      ],
      { env, timeoutMs: 30_000 },
    );
    const now = Date.now();
    const dump = await run('ovs-ofctl', ['dump-flows', this.endpoints.integrationBridge], {
      env,
      timeoutMs: 30_000,
    });
    return snatCounts(meters, policyFlowCookies(flowsJson), sumByCookie(dump), (cookie, durationMs) =>
      this.installLabel(cookie, durationMs, now),
    );
  }
}
