/**
 * Instances: the user's requests (create, change, act, delete) as rules over the store. Each request
 * validates what is particular to instances (placement, quotas, addresses, resize rules) and leaves the
 * rest to the lifecycle core (lifecycle.ts): the status check against the state table
 * (resources/instances/states.ts), the version-guarded write, the event and the reconcile job, in one
 * transaction. The reconciler (instance-reconciler.ts) then drives the machine through the driver. So a
 * request answers at once (202) and survives a crash right after.
 */

import type { FaultInjection } from '../../drivers/driver.js';
import type { Clock } from '../../platform/domain/clock.js';
import { newId } from '../../platform/domain/ids.js';
import { checkTagKeys, parseTagFilter, sameTags } from '../../platform/domain/labels.js';
import type { Page, PageRequest } from '../../platform/domain/pagination.js';
import { deleteProtected, type Protection, UNPROTECTED } from '../../platform/domain/protection.js';
import {
  Conflict,
  InvalidRequest,
  NotFound,
  PaymentRequired,
  ServiceUnavailable,
} from '../../platform/errors.js';
import type { ActionPlan, Lifecycle, WriteContext } from '../../platform/lifecycle/lifecycle.js';
import type { Principal } from '../../platform/principal.js';
import type { QuotaService } from '../../platform/quotas/quotas.js';
import type { Store } from '../../platform/store/db.js';
import type { Executor } from '../../platform/store/schema.js';
import { type AddressScope, replenishAddresses, takeAddress } from '../addresses/address-store.js';
import { type Cidr, macAddressFor, PRIVATE_NETWORKS, parseCidr } from '../addresses/addresses.js';
import { publicAddressScope, takePublicAddress } from '../addresses/public-ip-store.js';
import { IMAGES, type InstanceType, instanceTypeNamed, regionsOffering } from '../catalog/catalog.js';
import { addressNameFor, newPublicIp, protectedPublicIp } from '../public-ips/record.js';
import { noAddressLeft, recordPublicIpEvent } from '../public-ips/service.js';
import { insertPublicIp, publicIpOfInstance } from '../public-ips/store.js';
import type { SshKeyService } from '../ssh-keys/service.js';
import type { BackupSchedule } from '../volumes/backup-schedule.js';
import type { BackupScheduleBook } from '../volumes/backup-schedule-book.js';
import { VOLUME_KIND } from '../volumes/kind.js';
import { newRootVolume, protectedVolume } from '../volumes/record.js';
import type { VolumeService } from '../volumes/service.js';
import { findVolume } from '../volumes/store.js';
import type { AttachedVolumeView } from '../volumes/view.js';
import { gpusOf, INSTANCE_KIND, type InstanceEventType } from './kind.js';
import { type Instance, type InstanceChanges, protectedInstance } from './record.js';
import { DEFAULT_FIREWALL_PRESET, USER_DATA_MAX_BYTES } from './rules.js';
import type { InstanceAction, InstanceStatus } from './states.js';
import * as instances from './store.js';
import {
  hostnames,
  type InstanceView,
  instanceView,
  type SshEndpoint,
  type SshEndpoints,
  sshEndpoint,
} from './view.js';

export interface NewInstance {
  name: string;
  instance_type: string;
  region: string;
  image: string;
  ssh_keys?: string[] | undefined;
  tags?: Record<string, string> | undefined;
  user_data?: string | undefined;
  encryption_key_id?: string | undefined;
  firewall_preset?: string | undefined;
  monitoring?: boolean | undefined;
  backup_schedule?: BackupSchedule | null | undefined;
  /** false: made without a public address. */
  public_ip?: boolean | undefined;
  protection?: Protection | undefined;
}

export interface InstanceUpdate {
  name?: string | undefined;
  tags?: Record<string, string> | undefined;
  monitoring?: boolean | undefined;
  backup_schedule?: BackupSchedule | null | undefined;
  firewall_preset?: string | undefined;
  protection?: Protection | undefined;
}

export interface InstanceListQuery extends PageRequest<instances.InstanceSort> {
  status?: string | undefined;
  region?: string | undefined;
  name?: string | undefined;
  /** `key:value` each. */
  tag?: string[] | undefined;
}

export interface NetworkView {
  instance_id: string;
  public_ip: string | null;
  private_ip: string;
  mac_address: string;
  hostname: string;
  internal_hostname: string;
  private_network: { region: string; cidr: string };
  firewall_preset: string;
  ssh: SshEndpoint;
  private_traffic_free: boolean;
  note: string;
}

export interface InstanceMetadata {
  'instance-id': string;
  'instance-type': string;
  'public-ipv4': string | null;
  'local-ipv4': string;
  hostname: string;
  'user-data': string | null;
  /** One line per volume on the instance: `<device> <volume id>`, root first. */
  'block-devices': string;
}

export interface InstanceServiceOptions {
  publicDomain: string;
  gpuCapacity: Record<string, number>;
  publicIpPools: Record<string, string>;
  /** The compute driver's fault tag, validated on create and update; null when it takes none. */
  faultInjection: FaultInjection | null;
  /** Where `backup_schedule` takes effect (the scheduler's indexed table). */
  schedules: BackupScheduleBook;
  /** The driver's own SSH endpoints (qemu); absent: public address, port 22. */
  sshEndpoints?: SshEndpoints;
  /** The images the driver can boot (qemu: those in its image dir); absent: the whole catalogue. */
  availableImages?: () => string[];
}

type InstancePlan = ActionPlan<InstanceStatus, InstanceChanges, InstanceEventType>;

/** Where a create's addresses come from: the region's public pool (none configured: null), its private network. */
interface AddressScopes {
  /** Whether the instance is made with a public address (`public_ip: false` on create: none). */
  wanted: boolean;
  public: AddressScope | null;
  private: AddressScope;
}

export class InstanceService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly lifecycle: Lifecycle,
    private readonly quotas: QuotaService,
    private readonly sshKeys: SshKeyService,
    private readonly volumes: VolumeService,
    private readonly options: InstanceServiceOptions,
  ) {}

  /**
   * `options.rootFrom`: the root disk is restored from a snapshot before the first boot; called first in
   * the create's transaction, it checks the snapshot (and holds it) and names it.
   */
  async create(
    principal: Principal,
    input: NewInstance,
    options: { rootFrom?: (trx: Executor, type: InstanceType) => Promise<{ snapshotId: string }> } = {},
  ): Promise<InstanceView> {
    refuseIfPastDue(principal, 'create instances');
    const type = instanceTypeNamed(input.instance_type);
    checkPlacement(type, input.region, input.image);
    this.checkImageAvailable(input.image);
    checkUserData(input.user_data);
    this.checkTags(input.tags);
    const accountId = principal.accountId;
    const scopes = this.addressScopes(accountId, input.region, input.public_ip !== false);
    if (scopes.public) await replenishAddresses(this.store.db, scopes.public);
    await replenishAddresses(this.store.db, scopes.private);
    // No lock on the account: what every create of the account (the quota counters) or of the region
    // (its GPU count) writes is written last, so it is held only from there to the COMMIT, and
    // addresses come from rows nobody else is taking (resources/addresses/address-store.ts).
    const instance = await this.lifecycle.create(INSTANCE_KIND, {
      event: 'instance.created',
      accountId,
      quotas: [
        ['instances', 1],
        ['vcpus', type.vcpus],
        ['gpus', gpusOf(type)],
      ],
      hold: async (ctx) => ({
        restore: options.rootFrom ? await options.rootFrom(ctx.trx, type) : null,
        sshKeyIds: await this.sshKeys.resolve(ctx.trx, accountId, input.ssh_keys ?? []),
      }),
      build: async (ctx, { restore, sshKeyIds }): Promise<Instance> => {
        const now = this.clock.now();
        const at = now.toISOString();
        const id = newId('instance', now);
        const rootVolumeId = newId('volume', now);
        const addresses = await this.allocateAddresses(ctx.trx, scopes, input.region, now);
        if (addresses.publicIp !== null) {
          // The address made with the instance is a public IP like any other, released with it.
          const address = newPublicIp({
            id: newId('publicIp', now),
            accountId,
            name: addressNameFor(input.name),
            region: input.region,
            address: addresses.publicIp,
            instanceId: id,
            autoDelete: true,
            tags: {},
            at,
          });
          await insertPublicIp(ctx.trx, address);
          await recordPublicIpEvent(ctx.trx, this.clock, address, 'public_ip.created');
        }
        if (input.backup_schedule) {
          await this.options.schedules.put(
            ctx.trx,
            { id, accountId, kind: 'instance' },
            input.backup_schedule,
          );
        }
        const root = newRootVolume({
          id: rootVolumeId,
          accountId,
          instanceId: id,
          instanceName: input.name,
          region: input.region,
          sizeGb: type.storage_gb,
          at,
          restoreSnapshotId: restore?.snapshotId,
        });
        // The root disk is part of the instance: announced by instance.created, with no quota of its
        // own (its kind's usage is nothing) and paid on the instance's meter (its own is null).
        await this.lifecycle.createPartWithin(ctx, VOLUME_KIND, {
          record: root,
          reconcile: restore !== null,
        });
        return {
          id,
          account_id: accountId,
          name: input.name,
          status: INSTANCE_KIND.table.create.status,
          operation: 'create' as const,
          operation_at: at,
          instance_type: type.name,
          region: input.region,
          image: input.image,
          ssh_key_ids: sshKeyIds,
          public_ip: addresses.publicIp,
          private_ip: addresses.privateIp,
          tags: input.tags ?? {},
          user_data: input.user_data ?? null,
          encryption_key_id: input.encryption_key_id ?? null,
          firewall_preset: input.firewall_preset ?? DEFAULT_FIREWALL_PRESET,
          monitoring: input.monitoring !== false,
          backup_schedule: input.backup_schedule ?? null,
          root_volume_id: rootVolumeId,
          protection: input.protection ?? UNPROTECTED,
          version: 1,
          created_at: at,
          updated_at: at,
        };
      },
      // After the quota counters, before the per-status counts: the order deletes take them in too.
      claim: (ctx) => this.reserveGpus(ctx.trx, input.region, gpusOf(type)),
    });
    return this.view(instance, true);
  }

  async list(accountId: string, query: InstanceListQuery): Promise<Page<InstanceView>> {
    const tags = (query.tag ?? []).map(parseTagFilter);
    const page = await instances.listInstances(
      this.store.db,
      accountId,
      { status: query.status, region: query.region, name: query.name, tags },
      query,
    );
    return { items: page.items.map((instance) => this.view(instance, false)), pagination: page.pagination };
  }

  /** One instance, with the volumes on it (root first) and their devices. */
  async get(accountId: string, id: string): Promise<InstanceView & { volumes: AttachedVolumeView[] }> {
    const instance = await this.find(this.store.db, accountId, id);
    return { ...this.view(instance, true), volumes: await this.volumes.onInstance(this.store.db, id) };
  }

  async update(accountId: string, id: string, changes: InstanceUpdate): Promise<InstanceView> {
    this.checkTags(changes.tags);
    const updated = await this.act(accountId, id, 'update', async (instance, ctx) => {
      if (changes.backup_schedule !== undefined) {
        await this.options.schedules.put(
          ctx.trx,
          { id, accountId, kind: 'instance' },
          changes.backup_schedule,
        );
      }
      return {
        changes: {
          ...(changes.name !== undefined ? { name: changes.name } : {}),
          ...(changes.tags !== undefined ? { tags: changes.tags } : {}),
          ...(changes.monitoring !== undefined ? { monitoring: changes.monitoring } : {}),
          ...(changes.backup_schedule !== undefined ? { backup_schedule: changes.backup_schedule } : {}),
          ...(changes.firewall_preset !== undefined ? { firewall_preset: changes.firewall_preset } : {}),
          ...(changes.protection !== undefined ? { protection: changes.protection } : {}),
        },
        // A changed fault tag can release a machine stuck on it, so the reconciler looks again.
        reconcile: changes.tags !== undefined && !sameTags(instance.tags, changes.tags),
        event: {
          type: 'instance.updated',
          data: {
            changed: Object.keys(changes).filter((k) => changes[k as keyof InstanceUpdate] !== undefined),
          },
        },
      };
    });
    return this.view(updated, true);
  }

  async start(principal: Principal, id: string): Promise<InstanceView> {
    refuseIfPastDue(principal, 'start instances');
    return this.view(
      await this.act(principal.accountId, id, 'start', async (instance, ctx) => {
        await refuseWhileRootRestores(ctx.trx, instance, 'start');
        return this.operation('start');
      }),
      true,
    );
  }

  async stop(accountId: string, id: string, options: { force: boolean }): Promise<InstanceView> {
    if (!options.force) {
      return this.view(await this.act(accountId, id, 'stop', () => this.operation('stop')), true);
    }
    // Immediate: the instance is stopped now; the reconciler powers the machine off right after.
    const stopped = await this.act(accountId, id, 'force_stop', (instance) => ({
      // An interrupted resize still finishes its type change while stopped, and reports it.
      ...this.operation(instance.operation === 'resize' ? 'resize' : null),
      event: { type: 'instance.stopped', data: { forced: true } },
    }));
    return this.view(stopped, true);
  }

  async restart(accountId: string, id: string): Promise<InstanceView> {
    return this.view(await this.act(accountId, id, 'restart', () => this.operation('restart')), true);
  }

  async resize(principal: Principal, id: string, instanceType: string): Promise<InstanceView> {
    const next = instanceTypeNamed(instanceType);
    const accountId = principal.accountId;
    const updated = await this.act(accountId, id, 'resize', async (instance, ctx) => {
      const current = instanceTypeNamed(instance.instance_type);
      if (next.name === current.name) {
        throw new InvalidRequest(`The instance is already ${current.name}`, {
          field: 'instance_type',
          value: instanceType,
        });
      }
      if (next.storage_gb < current.storage_gb) {
        throw new InvalidRequest(
          `A root disk cannot shrink: ${current.name} has ${current.storage_gb} GB, ${next.name} only ${next.storage_gb} GB`,
          { field: 'instance_type', value: instanceType, current_storage_gb: current.storage_gb },
        );
      }
      checkPlacement(next, instance.region, instance.image);
      await refuseWhileRootRestores(ctx.trx, instance, 'resize');
      const vcpuDelta = next.vcpus - current.vcpus;
      const gpuDelta = gpusOf(next) - gpusOf(current);
      // Only growth is checked (ensureRooms skips what asks for nothing or less); the counters are held
      // until the resize commits, so the account's creates meanwhile count it at their guarded claim.
      await this.quotas.ensureRooms(
        ctx.trx,
        accountId,
        [
          ['vcpus', vcpuDelta],
          ['gpus', gpuDelta],
        ],
        { hold: true },
      );
      if (gpuDelta > 0) {
        await this.reserveGpus(ctx.trx, instance.region, gpuDelta);
      } else if (gpuDelta < 0) {
        await instances.releaseGpus(ctx.trx, instance.region, -gpuDelta);
      }
      await this.volumes.resizeRoot(ctx, instance, next.storage_gb);
      const plan = this.operation('resize');
      return { ...plan, changes: { ...plan.changes, instance_type: next.name } };
    });
    return this.view(updated, true);
  }

  /**
   * Its data volumes detach and survive (available); the root volume goes with the instance, and so does
   * its public IP when made with it (`auto_delete`). Refused (409) while the instance, its root volume or
   * that public IP has deletion protection on (docs/api.md, Deletion protection).
   */
  async delete(accountId: string, id: string): Promise<InstanceView> {
    const deleting = await this.act(accountId, id, 'delete', async (instance, ctx) => {
      await this.refuseProtectedDelete(ctx.trx, instance);
      await this.volumes.releaseFrom(ctx, instance);
      return this.operation('delete');
    });
    return this.view(deleting, true);
  }

  async network(accountId: string, id: string): Promise<NetworkView> {
    const instance = await this.find(this.store.db, accountId, id);
    return {
      instance_id: instance.id,
      public_ip: instance.public_ip,
      private_ip: instance.private_ip,
      mac_address: macAddressFor(instance.id),
      ...hostnames(instance, this.options.publicDomain),
      private_network: { region: instance.region, cidr: privateNetworkOf(instance.region).cidr },
      firewall_preset: instance.firewall_preset,
      ssh: sshEndpoint(instance, this.options.sshEndpoints),
      private_traffic_free: true,
      note: 'Traffic between your instances over their private IPv4 addresses is free of data-transfer charges.',
    };
  }

  /** What the metadata service tells the instance about itself; null for an unknown instance. */
  async metadata(instanceId: string): Promise<InstanceMetadata | null> {
    const instance = await instances.findInstance(this.store.db, instanceId);
    if (!instance) return null;
    return {
      'instance-id': instance.id,
      'instance-type': instance.instance_type,
      'public-ipv4': instance.public_ip,
      'local-ipv4': instance.private_ip,
      hostname: hostnames(instance, this.options.publicDomain).hostname,
      'user-data': instance.user_data,
      'block-devices': (await this.volumes.onInstance(this.store.db, instance.id))
        .filter((v) => v.device_name !== null && v.status !== 'attaching' && v.status !== 'creating')
        .map((v) => `${v.device_name} ${v.id}\n`)
        .join(''),
    };
  }

  /** The operation an action starts, kept on the instance until the reconciler settles it. */
  private operation(operation: Instance['operation']): InstancePlan {
    return {
      changes: {
        operation,
        operation_at: operation === null ? null : this.clock.now().toISOString(),
      },
      reconcile: true,
    };
  }

  /** The instance's delete would destroy a protected resource: it, its root volume, or its auto-delete address. */
  private async refuseProtectedDelete(trx: Executor, instance: Instance): Promise<void> {
    if (instance.protection.delete) throw deleteProtected(protectedInstance(instance.id));
    const by = protectedInstance(instance.id);
    const root = await findVolume(trx, instance.root_volume_id);
    if (root?.protection.delete) throw deleteProtected(protectedVolume(root.id), by);
    const address = await publicIpOfInstance(trx, instance.id);
    if (address?.auto_delete && address.protection.delete) {
      throw deleteProtected(protectedPublicIp(address.id), by);
    }
  }

  private act(
    accountId: string,
    id: string,
    action: InstanceAction,
    plan: (instance: Instance, ctx: WriteContext) => InstancePlan | Promise<InstancePlan>,
  ): Promise<Instance> {
    return this.lifecycle.act(INSTANCE_KIND, accountId, id, action, plan);
  }

  private async find(db: Executor, accountId: string, id: string): Promise<Instance> {
    const instance = await instances.findAccountInstance(db, accountId, id);
    if (!instance) throw new NotFound('instance', id);
    return instance;
  }

  private view(instance: Instance, withUserData: boolean): InstanceView {
    return instanceView(instance, this.options.publicDomain, withUserData, this.options.sshEndpoints);
  }

  /** With a driver whose catalogue is what it has installed (qemu), an image it lacks is a 400. */
  private checkImageAvailable(image: string): void {
    const available = this.options.availableImages?.();
    if (available && !available.includes(image)) {
      throw new InvalidRequest(
        available.length > 0
          ? `Image ${image} is not installed on this host`
          : `No image is installed on this host; the operator builds one with "nimbus admin images build"`,
        { field: 'image', value: image, allowed_values: available },
      );
    }
  }

  private checkTags(tags: Record<string, string> | undefined): void {
    checkTagKeys(tags);
    const faults = this.options.faultInjection;
    const fault = faults ? tags?.[faults.tag] : undefined;
    if (faults && fault !== undefined && !faults.instanceFaults.includes(fault)) {
      throw new InvalidRequest(`Unknown simulator fault "${fault}"`, {
        field: `tags.${faults.tag}`,
        value: fault,
        allowed_values: [...faults.instanceFaults],
      });
    }
  }

  private async reserveGpus(trx: Executor, region: string, gpus: number): Promise<void> {
    if (gpus === 0) return;
    const capacity = this.options.gpuCapacity[region] ?? 0;
    if (!(await instances.reserveGpus(trx, region, gpus, capacity))) {
      throw new ServiceUnavailable(
        `${region} has no capacity left for ${gpus} more GPU(s); try another region or later`,
        {
          reason: 'insufficient_capacity',
          region,
          requested_gpus: gpus,
        },
      );
    }
  }

  /** The region's public pool (null when none is configured) and the account's private network there. */
  private addressScopes(accountId: string, region: string, withPublic: boolean): AddressScopes {
    const pool = this.options.publicIpPools[region];
    return {
      wanted: withPublic,
      public: pool && withPublic ? publicAddressScope(region, configuredBlock(pool)) : null,
      private: instances.privateAddressScope(accountId, region, privateNetworkOf(region)),
    };
  }

  private async allocateAddresses(trx: Executor, scopes: AddressScopes, region: string, now: Date) {
    const publicIp = scopes.public ? await takePublicAddress(trx, scopes.public, now) : null;
    if (scopes.wanted && !publicIp) throw noAddressLeft(region);
    const privateIp = await takeAddress(trx, scopes.private);
    if (!privateIp) {
      throw new Conflict(`Your private network in ${region} has no free address left`, { region });
    }
    return { publicIp, privateIp };
  }
}

/** A snapshot being written over the root disk keeps the machine off and its disk as it is. */
async function refuseWhileRootRestores(trx: Executor, instance: Instance, action: string): Promise<void> {
  const root = await findVolume(trx, instance.root_volume_id);
  if (root?.status === 'restoring') {
    throw new Conflict(
      `Instance ${instance.id}: a snapshot is being restored over its root disk; ${action} it once the restore is done`,
      { current_status: instance.status, root_volume_id: root.id, root_volume_status: root.status },
    );
  }
}

/** Blocks from configuration and the plan (a handful), parsed once: every create allocates from two. */
const parsedBlocks = new Map<string, Cidr>();

function configuredBlock(cidr: string): Cidr {
  let block = parsedBlocks.get(cidr);
  if (block === undefined) {
    block = parseCidr(cidr);
    parsedBlocks.set(cidr, block);
  }
  return block;
}

function privateNetworkOf(region: string) {
  return configuredBlock(PRIVATE_NETWORKS[region] ?? '10.250.0.0/16');
}

function refuseIfPastDue(principal: Principal, what: string): void {
  if (principal.accountStatus === 'past_due') {
    throw new PaymentRequired(
      `This account is past due: you cannot ${what} until it is settled. Reading and deleting still work.`,
    );
  }
}

/** GPU types only where the catalogue offers them, and only with images that carry GPU drivers. */
function checkPlacement(type: InstanceType, region: string, image: string): void {
  const regions = regionsOffering(type);
  if (!regions.includes(region)) {
    throw new InvalidRequest(`${type.name} is not offered in ${region}`, {
      field: 'region',
      value: region,
      allowed_values: regions,
    });
  }
  if (type.gpu) {
    const images = IMAGES.filter((i) => i.gpu_compatible).map((i) => i.name);
    if (!images.includes(image)) {
      throw new InvalidRequest(`${type.name} needs an image with GPU support`, {
        field: 'image',
        value: image,
        allowed_values: images,
      });
    }
  }
}

function checkUserData(userData: string | undefined): void {
  if (userData !== undefined && Buffer.byteLength(userData, 'utf8') > USER_DATA_MAX_BYTES) {
    throw new InvalidRequest(
      `user_data is ${Buffer.byteLength(userData, 'utf8')} bytes; the limit is 16 KiB`,
      {
        field: 'user_data',
        limit_bytes: USER_DATA_MAX_BYTES,
      },
    );
  }
}
