/**
 * The VPCs the store describes, and how a change reaches OVN. Each account's instances in a region make
 * its VPC there (`vpcsOf`, pure): a port per instance (its id, the MAC the API shows, its private IP, its
 * name as hostname) on the account's private block for the region, the router at the block's first
 * address, and the host's port (network.ts). Nothing else is read: OVN keeps no state the store lacks.
 *
 * The reconcile is a durable job per account (`vpc:<account id>`, platform/jobs): an instance created,
 * renamed or deleted queues it in the transaction that records the event, so a change that committed
 * reaches OVN even across a kill -9, and the job table runs one job per key at a time, so one account's
 * VPCs are never applied by two runs at once. A run reads the account's instances afresh and applies the
 * whole of each VPC (applyTopology), so runs are idempotent and a late one is as good as an early one.
 */

import { formatIp, parseCidrBlock } from '../../platform/domain/cidrs.js';
import type { EventSubscriber } from '../../platform/events/outbox.js';
import type { Executor } from '../../platform/store/schema.js';
import { macAddressFor, PRIVATE_NETWORKS } from '../../resources/addresses/addresses.js';
import type { DesiredVpc, HostPort } from './topology.js';
import { vpcKey } from './topology.js';

/** What the network needs of an instance, as the store holds it. */
export interface VpcInstance {
  id: string;
  account_id: string;
  region: string;
  name: string;
  private_ip: string;
}

/** How the network reads the instances (the composition root gives it the store's). */
export interface VpcInstanceReader {
  /** The instances of an account (every region and status), or of every account when null. */
  list(accountId: string | null): Promise<VpcInstance[]>;
  find(instanceId: string): Promise<VpcInstance | null>;
}

/** The job kind of the per-account VPC reconcile. */
export const VPC_JOB = 'vpc';

/** The events that change a VPC's rows (a port added or removed, a hostname changed). */
const VPC_EVENTS: ReadonlySet<string> = new Set([
  'instance.created',
  'instance.updated',
  'instance.deleted',
  'public_ip.assigned',
  'public_ip.unassigned',
]);

/**
 * The outbox subscriber queueing the account's VPC reconcile with every event that changes a VPC, in the
 * event's transaction. Other parts of the network (firewall rules, public IPs) queue the same job with
 * `enqueue(trx, VPC_JOB, accountId)` from their own events.
 */
export function queueVpcReconcile(jobs: {
  enqueue(trx: Executor, kind: string, subjectId: string): Promise<void>;
}): EventSubscriber {
  return async (trx, event) => {
    if (VPC_EVENTS.has(event.type)) await jobs.enqueue(trx, VPC_JOB, event.accountId);
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

/** The VPCs of `instances`, one per account and region that has any, sorted by key. */
export function vpcsOf(instances: readonly VpcInstance[]): DesiredVpc[] {
  const byVpc = new Map<string, VpcInstance[]>();
  for (const instance of instances) {
    const key = vpcKey({ accountId: instance.account_id, region: instance.region });
    byVpc.set(key, [...(byVpc.get(key) ?? []), instance]);
  }
  return [...byVpc.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([key, members]) => {
      const { account_id: accountId, region } = members[0]!;
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
        ports: members.map((instance) => ({
          instanceId: instance.id,
          mac: macAddressFor(instance.id),
          ip: instance.private_ip,
          hostname: instance.name,
        })),
        hostPort,
      };
    });
}
