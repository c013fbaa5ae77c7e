/**
 * Volumes: the user's requests (create, change, attach, detach, resize, delete) as rules over the store.
 * Each request checks what is particular to volumes (quotas, same region, the instance's devices, who
 * holds the volume, root volumes) and leaves the rest to the lifecycle core: the status check against the
 * state table (resources/volumes/states.ts), the version-guarded write, the event and the reconcile job, in
 * one transaction. The reconciler (resources/volumes/reconciler.ts) then drives the disk through the driver.
 *
 * Lock order: every transaction that holds more than one of them takes the instance first, then the
 * account, then the volume, so two requests never wait on each other in a cycle.
 */

import type { FaultInjection } from '../../drivers/driver.js';
import type { Clock } from '../../platform/domain/clock.js';
import { newId } from '../../platform/domain/ids.js';
import { checkTagKeys, parseTagFilter } from '../../platform/domain/labels.js';
import type { Page, PageRequest } from '../../platform/domain/pagination.js';
import { deleteProtected, type Protection } from '../../platform/domain/protection.js';
import { Conflict, InvalidRequest, NotFound, PaymentRequired } from '../../platform/errors.js';
import type { ActionPlan, Lifecycle, WriteContext } from '../../platform/lifecycle/lifecycle.js';
import type { Principal } from '../../platform/principal.js';
import type { QuotaService } from '../../platform/quotas/quotas.js';
import type { Store } from '../../platform/store/db.js';
import type { Executor } from '../../platform/store/schema.js';
import type { BackupSchedule } from './backup-schedule.js';
import type { BackupScheduleBook } from './backup-schedule-book.js';
import type { HeldInstance, InstanceHolds } from './instance-holds.js';
import { rootVolumeConflict, VOLUME_KIND, type VolumeEventType } from './kind.js';
import {
  type Filesystem,
  lowestFreeDevice,
  MAX_DATA_VOLUMES_PER_INSTANCE,
  newVolume,
  protectedVolume,
  type Volume,
  type VolumeChanges,
  type VolumeSort,
} from './record.js';
import type { VolumeAction, VolumeStatus } from './states.js';
import * as volumes from './store.js';
import { type AttachedVolumeView, attachedVolumeView, type VolumeView, volumeView } from './view.js';

export interface NewVolume {
  name: string;
  size_gb: number;
  region: string;
  filesystem?: Filesystem | undefined;
  tags?: Record<string, string> | undefined;
  /** Attach to this instance as soon as the volume is available. */
  instance_id?: string | undefined;
  backup_schedule?: BackupSchedule | null | undefined;
  protection?: Protection | undefined;
}

export interface VolumeUpdate {
  name?: string | undefined;
  tags?: Record<string, string> | undefined;
  backup_schedule?: BackupSchedule | null | undefined;
  protection?: Protection | undefined;
}

export interface VolumeListQuery extends PageRequest<VolumeSort> {
  status?: string | undefined;
  region?: string | undefined;
  kind?: string | undefined;
  instance_id?: string | undefined;
  name?: string | undefined;
  /** `key:value` each. */
  tag?: string[] | undefined;
}

type VolumePlan = ActionPlan<VolumeStatus, VolumeChanges, VolumeEventType>;

export class VolumeService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly lifecycle: Lifecycle,
    private readonly quotas: QuotaService,
    private readonly schedules: BackupScheduleBook,
    private readonly instances: InstanceHolds,
    private readonly faults: FaultInjection | null,
  ) {}

  async create(principal: Principal, input: NewVolume): Promise<VolumeView> {
    this.checkTags(input.tags);
    if (principal.accountStatus === 'past_due') {
      throw new PaymentRequired(
        'This account is past due: you cannot create volumes until it is settled. Reading, detaching and deleting still work.',
      );
    }
    const accountId = principal.accountId;
    // No lock on the account: the quota counters are written last (the lifecycle core claims them).
    const volume = await this.lifecycle.create(VOLUME_KIND, {
      event: 'volume.created',
      accountId,
      quotas: [
        ['volumes', 1],
        ['volume_storage_gb', input.size_gb],
      ],
      hold: (ctx) =>
        input.instance_id === undefined
          ? Promise.resolve(null)
          : this.placeOn(ctx.trx, accountId, input.instance_id, input.region, null),
      build: async (ctx, placement): Promise<Volume> => {
        const now = this.clock.now();
        const at = now.toISOString();
        const id = newId('volume', now);
        const schedule = input.backup_schedule ?? null;
        if (schedule) await this.schedules.put(ctx.trx, { id, accountId, kind: 'volume' }, schedule);
        return newVolume(
          {
            id,
            account_id: accountId,
            name: input.name,
            region: input.region,
            size_gb: input.size_gb,
            status: VOLUME_KIND.table.create.status,
            kind: 'data',
            instance_id: placement?.instanceId ?? null,
            device_name: placement?.deviceName ?? null,
            filesystem: input.filesystem ?? null,
            tags: input.tags ?? {},
            pending_action: placement ? 'attach' : null,
            backup_schedule: schedule,
            ...(input.protection ? { protection: input.protection } : {}),
          },
          at,
        );
      },
    });
    return volumeView(volume);
  }

  async list(accountId: string, query: VolumeListQuery): Promise<Page<VolumeView>> {
    const tags = (query.tag ?? []).map(parseTagFilter);
    const page = await volumes.listVolumes(
      this.store.db,
      accountId,
      {
        status: query.status,
        region: query.region,
        kind: query.kind,
        instance_id: query.instance_id,
        name: query.name,
        tags,
      },
      query,
    );
    return { items: page.items.map(volumeView), pagination: page.pagination };
  }

  async get(accountId: string, id: string): Promise<VolumeView> {
    const volume = await volumes.findAccountVolume(this.store.db, accountId, id);
    if (!volume) throw new NotFound('volume', id);
    return volumeView(volume);
  }

  async update(accountId: string, id: string, changes: VolumeUpdate): Promise<VolumeView> {
    this.checkTags(changes.tags);
    const updated = await this.act(accountId, id, 'update', async (volume, ctx) => {
      if (changes.backup_schedule !== undefined) {
        if (volume.kind === 'root') {
          throw new InvalidRequest(
            `Volume ${volume.id} is the root volume of instance ${volume.instance_id}: set backup_schedule on the instance`,
            { field: 'backup_schedule', instance_id: volume.instance_id },
          );
        }
        await this.schedules.put(ctx.trx, { id, accountId, kind: 'volume' }, changes.backup_schedule);
      }
      return {
        changes: {
          ...(changes.name !== undefined ? { name: changes.name } : {}),
          ...(changes.tags !== undefined ? { tags: changes.tags } : {}),
          ...(changes.backup_schedule !== undefined ? { backup_schedule: changes.backup_schedule } : {}),
          ...(changes.protection !== undefined ? { protection: changes.protection } : {}),
        },
      };
    });
    return volumeView(updated);
  }

  async attach(accountId: string, id: string, instanceId: string): Promise<VolumeView> {
    const attached = await this.lifecycle.act(
      VOLUME_KIND,
      accountId,
      id,
      'attach',
      async (volume, ctx) => {
        // The instance was held first (holdFirst); its devices are decided with it held.
        const placement = await this.placeOn(ctx.trx, accountId, instanceId, volume.region, volume.id);
        return {
          changes: {
            instance_id: placement.instanceId,
            device_name: placement.deviceName,
            attached_at: null,
            pending_action: null,
          },
        };
      },
      // Held before the volume (the lock order); a missing one is refused in the plan, after the volume's 404.
      { holdFirst: async (ctx) => void (await this.instances.lockForAttach(ctx.trx, accountId, instanceId)) },
    );
    return volumeView(attached);
  }

  async detach(accountId: string, id: string): Promise<VolumeView> {
    return volumeView(
      await this.act(accountId, id, 'detach', (volume) => {
        if (volume.kind === 'root') throw rootVolumeConflict(volume, 'detach');
        if (volume.instance_id === null) {
          throw new Conflict(`Volume ${volume.id} is not attached to an instance`, {
            current_status: volume.status,
          });
        }
        return {};
      }),
    );
  }

  async resize(accountId: string, id: string, sizeGb: number): Promise<VolumeView> {
    const resized = await this.lifecycle.act(VOLUME_KIND, accountId, id, 'resize', async (volume, ctx) => {
      if (volume.kind === 'root') throw rootVolumeConflict(volume, 'resize');
      if (sizeGb <= volume.size_gb) {
        throw new InvalidRequest(
          sizeGb === volume.size_gb
            ? `The volume is already ${sizeGb} GB`
            : `A volume only grows: it is ${volume.size_gb} GB, ${sizeGb} GB is smaller`,
          { field: 'size_gb', value: sizeGb, current_size_gb: volume.size_gb },
        );
      }
      // The counter is held (after the volume: the order deletes take them in) until the growth
      // commits, so the account's creates meanwhile count it at their guarded claim.
      await this.quotas.ensureRooms(ctx.trx, accountId, [['volume_storage_gb', sizeGb - volume.size_gb]], {
        hold: true,
      });
      return { changes: { size_gb: sizeGb } };
    });
    return volumeView(resized);
  }

  async delete(accountId: string, id: string): Promise<VolumeView> {
    return volumeView(
      await this.act(accountId, id, 'delete', (volume) => {
        if (volume.protection.delete) throw deleteProtected(protectedVolume(volume.id));
        if (volume.kind === 'root') throw rootVolumeConflict(volume, 'delete');
        if (volume.instance_id !== null) {
          throw new Conflict(
            `Volume ${volume.id} is still on instance ${volume.instance_id}; detach it before deleting it`,
            { current_status: volume.status, instance_id: volume.instance_id },
          );
        }
        return {};
      }),
    );
  }

  /** The volumes on an instance, root first, for the instance's own answer. */
  async onInstance(db: Executor, instanceId: string): Promise<AttachedVolumeView[]> {
    return (await volumes.volumesOfInstance(db, instanceId)).map(attachedVolumeView);
  }

  /**
   * Inside an instance's delete (the instance held): its data volumes let go of it. Attached or attaching
   * ones detach; one still being created forgets the instance; one growing detaches once grown.
   */
  async releaseFrom(ctx: WriteContext, instance: { id: string }): Promise<void> {
    for (const volume of await volumes.volumesOfInstance(ctx.trx, instance.id)) {
      if (volume.kind !== 'data') continue;
      const held = await volumes.lockAccountVolume(ctx.trx, volume.account_id, volume.id);
      if (!held) continue;
      let changes: VolumeChanges | null = null;
      let reconcile = false;
      switch (held.status) {
        case 'creating':
          changes = { instance_id: null, device_name: null, pending_action: null };
          break;
        case 'attaching':
        case 'in-use':
        case 'error':
          changes = { status: 'detaching', pending_action: null };
          reconcile = true;
          break;
        case 'resizing':
          changes = { pending_action: 'detach' };
          break;
        default:
          break;
      }
      if (changes) await this.lifecycle.writeWithin(ctx, VOLUME_KIND, held, changes, { reconcile });
    }
  }

  /**
   * Inside an instance's resize (the instance held): its root volume takes the new type's size, with
   * `volume.resized`; the machine's resize grows the disk itself.
   */
  async resizeRoot(
    ctx: WriteContext,
    instance: { account_id: string; root_volume_id: string },
    sizeGb: number,
  ): Promise<void> {
    const root = await volumes.lockAccountVolume(ctx.trx, instance.account_id, instance.root_volume_id);
    if (!root || root.size_gb === sizeGb) return;
    await this.lifecycle.writeWithin(
      ctx,
      VOLUME_KIND,
      root,
      { size_gb: sizeGb },
      {
        event: { type: 'volume.resized', data: { size_gb: sizeGb } },
      },
    );
  }

  /** Tag keys as everywhere; the driver's fault tag must name a fault it takes on volumes. */
  private checkTags(tags: Record<string, string> | undefined): void {
    checkTagKeys(tags);
    const faults = this.faults;
    const fault = faults ? tags?.[faults.tag] : undefined;
    if (faults && fault !== undefined && !faults.volumeFaults.includes(fault)) {
      throw new InvalidRequest(`Unknown simulator fault "${fault}" for a volume`, {
        field: `tags.${faults.tag}`,
        value: fault,
        allowed_values: [...faults.volumeFaults],
      });
    }
  }

  private act(
    accountId: string,
    id: string,
    action: VolumeAction,
    plan: (volume: Volume, ctx: WriteContext) => VolumePlan | Promise<VolumePlan>,
  ): Promise<Volume> {
    return this.lifecycle.act(VOLUME_KIND, accountId, id, action, plan);
  }

  private async findInstanceFor(trx: Executor, accountId: string, instanceId: string): Promise<HeldInstance> {
    const instance = await this.instances.lockForAttach(trx, accountId, instanceId);
    if (!instance) {
      throw new NotFound('instance', instanceId, { field: 'instance_id' });
    }
    return instance;
  }

  /**
   * Where a volume goes on the instance (held until the transaction ends): same region, not deleting,
   * a free device among the 16. `volumeId` is the volume being placed (null on create).
   */
  private async placeOn(
    trx: Executor,
    accountId: string,
    instanceId: string,
    region: string,
    volumeId: string | null,
  ): Promise<Placement> {
    const instance = await this.findInstanceFor(trx, accountId, instanceId);
    if (instance.region !== region) {
      throw new InvalidRequest(
        `The volume is in ${region} and instance ${instance.id} in ${instance.region}: a volume attaches only to an instance in its own region`,
        { field: 'instance_id', value: instanceId, volume_region: region, instance_region: instance.region },
      );
    }
    if (instance.status === 'deleting') {
      throw new Conflict(`Instance ${instance.id} is being deleted; volumes cannot be attached to it`, {
        instance_id: instance.id,
        instance_status: instance.status,
      });
    }
    const onIt = (await volumes.volumesOfInstance(trx, instance.id)).filter(
      (v) => v.kind === 'data' && v.id !== volumeId,
    );
    const device = lowestFreeDevice(onIt.map((v) => v.device_name));
    if (onIt.length >= MAX_DATA_VOLUMES_PER_INSTANCE || device === null) {
      throw new Conflict(
        `Instance ${instance.id} already has ${MAX_DATA_VOLUMES_PER_INSTANCE} data volumes, the most an instance takes`,
        { instance_id: instance.id, limit: MAX_DATA_VOLUMES_PER_INSTANCE },
      );
    }
    return { instanceId: instance.id, deviceName: device };
  }
}

interface Placement {
  instanceId: string;
  deviceName: string;
}
