/**
 * The VPCs the store describes, and how a change reaches OVN. Each account's instances in a region make
 * its VPC there (`vpcsOf`, pure): a port per instance (its id, the MAC the API shows, its private IP, its
 * name as hostname) on the account's private block for the region, the router at the block's first
 * address, and the host's port (network.ts); with the account's firewall rules in the region, each
 * port's firewall (acls.ts), and the VPC's DNS records (dns-records.ts); with a public link, the
 * instances' public IPs (uplink.ts publicSideOf). Nothing else is read: OVN keeps no state the store lacks.
 *
 * The reconcile is a durable job per account (`vpc:<account id>`, platform/jobs): an instance created,
 * renamed, retagged, given another preset or deleted, or a firewall rule created, changed or deleted,
 * queues it in the transaction that records the event, so a change that committed
 * reaches OVN even across a kill -9, and the job table runs one job per key at a time, so one account's
 * VPCs are never applied by two runs at once. A run reads the account's instances afresh and applies the
 * whole of each VPC (applyTopology), so runs are idempotent and a late one is as good as an early one.
 */

import { formatIp, parseCidrBlock } from '../../platform/domain/cidrs.js';
import type { EventSubscriber } from '../../platform/events/outbox.js';
import type { Executor } from '../../platform/store/schema.js';
import { macAddressFor, PRIVATE_NETWORKS } from '../../resources/addresses/addresses.js';
import type { FirewallRule } from '../../resources/networking/firewall-rules.js';
import { aclInputsFor } from './acls.js';
import type { DesiredVpc, HostPort } from './topology.js';
import { vpcKey } from './topology.js';

/** What the network needs of an instance, as the store holds it. */
export interface VpcInstance {
  id: string;
  account_id: string;
  region: string;
  name: string;
  private_ip: string;
  /** What selects the firewall rules of the instance and its preset (a port without them has no ACL). */
  tags?: Record<string, string>;
  firewall_preset?: string;
  /** Its public IP (the store's current assignment), NATed on the VPC's router when there is a public link. */
  public_ip?: string | null;
}

/** What the network needs of a VPN: its gateway joins the VPC of its account and region (vpn-gateway-rows.ts). */
export interface VpcVpn {
  id: string;
  account_id: string;
  region: string;
  tunnel_cidr: string;
  /** The gateway's public endpoint address, NATed to it when the VPC has a public side. */
  endpoint_ip: string;
}

/** How the network reads the instances (the composition root gives it the store's). */
export interface VpcInstanceReader {
  /** The instances of an account (every region and status), or of every account when null. */
  list(accountId: string | null): Promise<VpcInstance[]>;
  find(instanceId: string): Promise<VpcInstance | null>;
  /**
   * The account's firewall rules in a region, enabled or not (the networking resource's store, given by
   * the composition root); without it no port gets a firewall.
   */
  firewallRules?(accountId: string, region: string): Promise<FirewallRule[]>;
  /** The account's instance in the region holding `privateIp`, or null (how the metadata path knows a guest). */
  atAddress(accountId: string, region: string, privateIp: string): Promise<VpcInstance | null>;
  /**
   * The VPNs of an account (every status while the record exists), or of every account when null; without
   * it no VPC has a gateway.
   */
  vpns?(accountId: string | null): Promise<VpcVpn[]>;
}

/** The firewall rules of each VPC (by vpcKey) that instances of `instances` are in. */
export type VpcFirewallRules = ReadonlyMap<string, readonly FirewallRule[]>;

/** What an account's VPCs (or everyone's) are made of, as the store has it now. */
export interface VpcState {
  instances: VpcInstance[];
  rules: VpcFirewallRules | undefined;
  vpns: VpcVpn[];
}

/** The instances of an account (or all), the firewall rules of their VPCs and the VPNs, as the store has them now. */
export async function readVpcState(reader: VpcInstanceReader, accountId: string | null): Promise<VpcState> {
  const instances = await reader.list(accountId);
  const vpns = reader.vpns ? await reader.vpns(accountId) : [];
  if (!reader.firewallRules) return { instances, rules: undefined, vpns };
  const rules = new Map<string, readonly FirewallRule[]>();
  for (const instance of instances) {
    const key = vpcKey({ accountId: instance.account_id, region: instance.region });
    if (!rules.has(key)) rules.set(key, await reader.firewallRules(instance.account_id, instance.region));
  }
  return { instances, rules, vpns };
}

/** The job kind of the per-account VPC reconcile. */
export const VPC_JOB = 'vpc';

/**
 * The events that change a VPC's rows: a port added or removed, a hostname or name changed (DHCP, DNS),
 * tags or a preset changed (which rules select the instance, its preset's ACLs), a firewall rule made,
 * changed or deleted, a public IP assigned or unassigned (the router's NAT).
 */
export const VPC_EVENTS: ReadonlySet<string> = new Set([
  'instance.created',
  'instance.updated',
  'instance.deleted',
  'firewall_rule.created',
  'firewall_rule.updated',
  'firewall_rule.deleted',
  'public_ip.assigned',
  'public_ip.unassigned',
  // A VPN's gateway port, its route to the tunnel and the NAT of its endpoint (vpn-gateway-rows.ts).
  'vpn.created',
  'vpn.deleted',
]);

/**
 * Wakes after the event, in ms. The outbox calls its subscribers inside the transaction, before COMMIT,
 * when the runner cannot see the job yet; these wakes find it once the (short) transaction committed,
 * so a rule change reaches OVN well within the 2 s target instead of at the next poll, which still
 * catches a slower commit.
 */
export const VPC_WAKES_MS = [25, 100, 400] as const;

/**
 * The outbox subscriber queueing the account's VPC reconcile with every event that changes a VPC, in the
 * event's transaction. Other parts of the network (public IPs) queue the same job with
 * `enqueue(trx, VPC_JOB, accountId)` from their own events.
 */
export function queueVpcReconcile(jobs: {
  enqueue(trx: Executor, kind: string, subjectId: string): Promise<void>;
  wake(at?: Date): void;
}): EventSubscriber {
  return async (trx, event) => {
    if (!VPC_EVENTS.has(event.type)) return;
    await jobs.enqueue(trx, VPC_JOB, event.accountId);
    for (const ms of VPC_WAKES_MS) jobs.wake(new Date(event.recordedAt.getTime() + ms));
  };
}

/** The private block of a region: the one the addresses of its instances come from. */
export function privateBlockOf(region: string): string {
  return PRIVATE_NETWORKS[region] ?? '10.250.0.0/16';
}

/**
 * The host's port on every VPC: the metadata address, which no private block holds, on a link-local
 * network the router shares (network.ts explains the path).
 */
export const HOST_PORT = { ip: '169.254.169.254', routerNetwork: '169.254.0.1/16' } as const;

/**
 * The VPCs of `instances` and `vpns`, one per account and region that has any, sorted by key. With
 * `rules` (the firewall rules of each VPC), every instance that names its preset gets its effective
 * rules as its port's firewall (acls.ts). Each VPN's gateway is a port of its VPC (a VPC may have a
 * gateway and no instance yet).
 */
export function vpcsOf(
  instances: readonly VpcInstance[],
  rules?: VpcFirewallRules,
  vpns: readonly VpcVpn[] = [],
): DesiredVpc[] {
  const byVpc = new Map<
    string,
    { accountId: string; region: string; members: VpcInstance[]; vpns: VpcVpn[] }
  >();
  const vpcOf = (accountId: string, region: string) => {
    const key = vpcKey({ accountId, region });
    let vpc = byVpc.get(key);
    if (!vpc) {
      vpc = { accountId, region, members: [], vpns: [] };
      byVpc.set(key, vpc);
    }
    return vpc;
  };
  for (const instance of instances) vpcOf(instance.account_id, instance.region).members.push(instance);
  for (const vpn of vpns) vpcOf(vpn.account_id, vpn.region).vpns.push(vpn);
  return [...byVpc.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([key, { accountId, region, members, vpns: gateways }]) => {
      const cidr = privateBlockOf(region);
      const block = parseCidrBlock(cidr);
      const hostPort: HostPort = { mac: macAddressFor(`${key}/host`), ...HOST_PORT };
      return {
        accountId,
        region,
        cidr,
        router: {
          ip: formatIp({ family: 4, value: block.network + 1n }),
          mac: macAddressFor(`${key}/router`),
        },
        ports: members.map((instance) => {
          const vpcRules = rules?.get(key);
          const { firewall_preset: preset } = instance;
          return {
            instanceId: instance.id,
            mac: macAddressFor(instance.id),
            ip: instance.private_ip,
            hostname: instance.name,
            ...(vpcRules && preset !== undefined
              ? {
                  firewall: aclInputsFor(
                    { ...instance, tags: instance.tags ?? {}, firewall_preset: preset },
                    vpcRules,
                    cidr,
                  ),
                }
              : {}),
          };
        }),
        hostPort,
        ...(gateways.length > 0
          ? {
              gateways: gateways.map((vpn) => ({
                vpnId: vpn.id,
                tunnelCidr: vpn.tunnel_cidr,
                publicIp: vpn.endpoint_ip,
              })),
            }
          : {}),
      };
    });
}
