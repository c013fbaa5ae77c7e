/**
 * Public IPs (issue 32): addresses an account allocates from a region's pool and keeps, assigns to one of
 * its instances in the same region, moves, and releases. An instance holds at most one; the address made
 * with an instance is a public IP like any other, with `auto_delete` set so it goes with the instance.
 *
 * Every change is one transaction that also writes the instance's `public_ip` (what the OVN wiring, the
 * DNS server and `ssh` read), the event (whose outbox subscribers queue the account's VPC reconcile),
 * and the billing interval: an address held but assigned to nothing pays `public_ip_idle`. A released
 * address stays out of the pool for 24 h (resources/addresses/public-ip-store.ts).
 *
 * Lock order: the instance before the address, as an instance's delete takes them.
 */
import type { Clock } from '../../platform/domain/clock.js';
import { newId } from '../../platform/domain/ids.js';
import { checkTagKeys } from '../../platform/domain/labels.js';
import type { Page, PageRequest } from '../../platform/domain/pagination.js';
import { deleteProtected, type Protection } from '../../platform/domain/protection.js';
import {
  Conflict,
  InvalidRequest,
  NotFound,
  PaymentRequired,
  ServiceUnavailable,
} from '../../platform/errors.js';
import { recordEvent } from '../../platform/events/outbox.js';
import { recordCreated } from '../../platform/idempotency/context.js';
import type { Principal } from '../../platform/principal.js';
import type { QuotaService } from '../../platform/quotas/quotas.js';
import type { Store } from '../../platform/store/db.js';
import type { Executor } from '../../platform/store/schema.js';
import { lockAccount } from '../account/store.js';
import { parseCidr } from '../addresses/addresses.js';
import { publicAddressScope, releasePublicAddress, takePublicAddress } from '../addresses/public-ip-store.js';
import { switchMeter } from '../billing/meter-store.js';
import { publicIpMeter } from '../billing/rules.js';
import type { InstanceAddressing } from './instance-addressing.js';
import {
  newPublicIp,
  type PublicIp,
  type PublicIpChanges,
  type PublicIpSort,
  protectedPublicIp,
  RELEASED_ADDRESS_COOLDOWN_MS,
} from './record.js';
import * as ips from './store.js';
import { type PublicIpView, publicIpView } from './view.js';

export interface NewPublicIpInput {
  region: string;
  name?: string | undefined;
  tags?: Record<string, string> | undefined;
  protection?: Protection | undefined;
}

export interface PublicIpUpdate {
  name?: string | undefined;
  tags?: Record<string, string> | undefined;
  auto_delete?: boolean | undefined;
  protection?: Protection | undefined;
}

export interface PublicIpListQuery extends PageRequest<PublicIpSort>, ips.PublicIpFilters {}

type PublicIpEvent =
  | 'public_ip.created'
  | 'public_ip.assigned'
  | 'public_ip.unassigned'
  | 'public_ip.deleted';

export class PublicIpService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly quotas: QuotaService,
    private readonly instances: InstanceAddressing,
    private readonly publicIpPools: Record<string, string>,
  ) {}

  async allocate(principal: Principal, input: NewPublicIpInput): Promise<PublicIpView> {
    if (principal.accountStatus === 'past_due') {
      throw new PaymentRequired(
        'This account is past due: you cannot allocate public IPs until it is settled.',
      );
    }
    checkTagKeys(input.tags);
    const accountId = principal.accountId;
    const pool = this.publicIpPools[input.region];
    const now = this.clock.now();
    const at = now.toISOString();
    const id = newId('publicIp', now);
    const made = await this.store.db.transaction().execute(async (trx) => {
      await lockAccount(trx, accountId);
      await this.quotas.ensureRoom(trx, accountId, 'public_ips', 1);
      const address = pool
        ? await takePublicAddress(trx, publicAddressScope(input.region, parseCidr(pool)), now)
        : null;
      if (!address) throw noAddressLeft(input.region);
      const ip = newPublicIp({
        id,
        accountId,
        name: input.name ?? `ip-${address.replaceAll('.', '-')}`,
        region: input.region,
        address,
        instanceId: null,
        autoDelete: false,
        tags: input.tags ?? {},
        protection: input.protection,
        at,
      });
      await ips.insertPublicIp(trx, ip);
      await switchMeter(trx, ip.id, publicIpMeter(ip), now, true);
      await recordCreated(trx, 'public_ip', ip.id);
      await this.record(trx, ip, 'public_ip.created');
      return ip;
    });
    return publicIpView(made);
  }

  async list(accountId: string, query: PublicIpListQuery): Promise<Page<PublicIpView>> {
    const page = await ips.listPublicIps(this.store.db, accountId, query, query);
    return { items: page.items.map(publicIpView), pagination: page.pagination };
  }

  async get(accountId: string, id: string): Promise<PublicIpView> {
    const ip = await ips.findAccountPublicIp(this.store.db, accountId, id);
    if (!ip) throw new NotFound('public_ip', id);
    return publicIpView(ip);
  }

  async update(accountId: string, id: string, changes: PublicIpUpdate): Promise<PublicIpView> {
    checkTagKeys(changes.tags);
    const updated = await this.store.db.transaction().execute(async (trx) => {
      // Keeping an address that would have gone with its instance takes it into the quota.
      if (changes.auto_delete === false) {
        await lockAccount(trx, accountId);
        const current = await this.held(trx, accountId, id);
        if (current.auto_delete) await this.quotas.ensureRoom(trx, accountId, 'public_ips', 1);
      }
      const current = await this.held(trx, accountId, id);
      return this.write(trx, current, {
        ...(changes.name !== undefined ? { name: changes.name } : {}),
        ...(changes.tags !== undefined ? { tags: changes.tags } : {}),
        ...(changes.auto_delete !== undefined ? { auto_delete: changes.auto_delete } : {}),
        ...(changes.protection !== undefined ? { protection: changes.protection } : {}),
      });
    });
    return publicIpView(updated);
  }

  /** Release: the address leaves the account and, 24 h later, goes back to the pool. 409 while assigned or protected. */
  async release(accountId: string, id: string): Promise<PublicIpView> {
    const released = await this.store.db.transaction().execute(async (trx) => {
      const ip = await this.held(trx, accountId, id);
      if (ip.protection.delete) throw deleteProtected(protectedPublicIp(ip.id));
      if (ip.instance_id !== null) {
        throw new Conflict(
          `Public IP ${ip.id} is assigned to instance ${ip.instance_id}: unassign it first`,
          {
            instance_id: ip.instance_id,
          },
        );
      }
      await this.remove(trx, ip);
      return ip;
    });
    return publicIpView(released);
  }

  async assign(accountId: string, id: string, instanceId: string): Promise<PublicIpView> {
    const assigned = await this.store.db.transaction().execute(async (trx) => {
      // The path's address is answered for first; held only after the instance (the lock order).
      if (!(await ips.findAccountPublicIp(trx, accountId, id))) throw new NotFound('public_ip', id);
      const instance = await this.instances.lockForAddress(trx, accountId, instanceId);
      if (!instance) throw new NotFound('instance', instanceId, { field: 'instance_id' });
      const ip = await this.held(trx, accountId, id);
      if (ip.instance_id === instance.id) return ip;
      if (instance.region !== ip.region) {
        throw new InvalidRequest(
          `Public IP ${ip.id} is in ${ip.region} and instance ${instance.id} in ${instance.region}: an address is assigned within its region`,
          { field: 'instance_id', value: instance.id, region: ip.region, instance_region: instance.region },
        );
      }
      if (instance.status === 'deleting') {
        throw new Conflict(`Instance ${instance.id} is being deleted`, { current_status: instance.status });
      }
      if (instance.public_ip !== null) {
        const other = await ips.publicIpOfInstance(trx, instance.id);
        throw new Conflict(
          `Instance ${instance.id} already has public IP ${instance.public_ip}${other ? ` (${other.id})` : ''}: unassign it first`,
          {
            instance_id: instance.id,
            public_ip: instance.public_ip,
            ...(other ? { public_ip_id: other.id } : {}),
          },
        );
      }
      if (ip.instance_id !== null) {
        throw new Conflict(
          `Public IP ${ip.id} is assigned to instance ${ip.instance_id}: unassign it first`,
          {
            instance_id: ip.instance_id,
          },
        );
      }
      const now = this.clock.now();
      const updated = await this.write(trx, ip, { instance_id: instance.id, assigned_at: now.toISOString() });
      await this.instances.setPublicIp(trx, instance.id, ip.address);
      await this.record(trx, updated, 'public_ip.assigned');
      return updated;
    });
    return publicIpView(assigned);
  }

  async unassign(accountId: string, id: string): Promise<PublicIpView> {
    const unassigned = await this.store.db.transaction().execute(async (trx) => {
      // The instance first (the lock order); which one is read without holding the address.
      const seen = await ips.findAccountPublicIp(trx, accountId, id);
      if (!seen) throw new NotFound('public_ip', id);
      if (seen.instance_id !== null) await this.instances.lockForAddress(trx, accountId, seen.instance_id);
      const ip = await this.held(trx, accountId, id);
      if (ip.instance_id === null) return ip;
      if (ip.instance_id !== seen.instance_id) {
        throw new Conflict(`Public IP ${ip.id} moved while this request ran; try again`, {
          instance_id: ip.instance_id,
        });
      }
      return this.detach(trx, ip);
    });
    return publicIpView(unassigned);
  }

  private async detach(trx: Executor, ip: PublicIp): Promise<PublicIp> {
    const updated = await this.write(trx, ip, { instance_id: null, assigned_at: null });
    if (ip.instance_id !== null) await this.instances.setPublicIp(trx, ip.instance_id, null);
    await this.record(trx, { ...updated, instance_id: ip.instance_id }, 'public_ip.unassigned');
    return updated;
  }

  private async held(trx: Executor, accountId: string, id: string): Promise<PublicIp> {
    const ip = await ips.lockAccountPublicIp(trx, accountId, id);
    if (!ip) throw new NotFound('public_ip', id);
    return ip;
  }

  /** A version-guarded write, with the billing interval switched when what it pays changes. */
  private async write(trx: Executor, current: PublicIp, changes: PublicIpChanges): Promise<PublicIp> {
    const now = this.clock.now();
    const updated = await ips.updatePublicIp(trx, current, { ...changes, updated_at: now.toISOString() });
    if (!updated) throw new Conflict(`Public IP ${current.id} changed while this request ran; try again`);
    if ((current.instance_id === null) !== (updated.instance_id === null)) {
      await switchMeter(trx, updated.id, publicIpMeter(updated), now);
    }
    return updated;
  }

  private async remove(trx: Executor, ip: PublicIp): Promise<void> {
    await removePublicIp(trx, this.clock.now(), ip);
    await this.record(trx, ip, 'public_ip.deleted');
  }

  private record(trx: Executor, ip: PublicIp, type: PublicIpEvent): Promise<string> {
    return recordPublicIpEvent(trx, this.clock, ip, type);
  }
}

/** The row goes, its interval ends, and its address stays out of the pool for 24 h. */
export async function removePublicIp(trx: Executor, now: Date, ip: PublicIp): Promise<void> {
  if (!(await ips.deletePublicIp(trx, ip)))
    throw new Conflict(`Public IP ${ip.id} changed while this request ran; try again`);
  await switchMeter(trx, ip.id, null, now);
  await releasePublicAddress(
    trx,
    ip.region,
    ip.address,
    new Date(now.getTime() + RELEASED_ADDRESS_COOLDOWN_MS),
  );
}

export function recordPublicIpEvent(
  trx: Executor,
  clock: Clock,
  ip: PublicIp,
  type: PublicIpEvent,
): Promise<string> {
  return recordEvent(trx, clock, {
    accountId: ip.account_id,
    type,
    resourceId: ip.id,
    data: {
      public_ip_id: ip.id,
      name: ip.name,
      address: ip.address,
      region: ip.region,
      instance_id: ip.instance_id,
    },
  });
}

export function noAddressLeft(region: string): ServiceUnavailable {
  return new ServiceUnavailable(`${region} has no public IPv4 address left; try another region or later`, {
    reason: 'insufficient_capacity',
    region,
    resource: 'public_ipv4',
  });
}
