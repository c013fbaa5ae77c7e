/**
 * Snapshots: the user's requests (create, change, delete, restore) and the scheduler's, as rules over
 * the store. Each request checks what is particular to snapshots (the source, quotas, what a restore may
 * write over) and leaves the status check, the guarded write, the event and the job to the lifecycle
 * core. The reconciler (snapshot-reconciler.ts) makes and deletes the copies; a restore is the target
 * volume's change (volume-reconciler.ts), which reports `snapshot.restored` here when it is done.
 *
 * Lock order, as everywhere: instance, then account, then volume, then snapshot.
 */

import type { FaultInjection } from '../../drivers/driver.js';
import type { Clock } from '../../platform/domain/clock.js';
import { newId } from '../../platform/domain/ids.js';
import { checkTagKeys } from '../../platform/domain/labels.js';
import type { Page, PageRequest } from '../../platform/domain/pagination.js';
import type { PermissionArea } from '../../platform/domain/permissions.js';
import { Conflict, InvalidRequest, NotFound, PaymentRequired } from '../../platform/errors.js';
import {
  conflict,
  type Lifecycle,
  type RelatedWrite,
  type WriteContext,
} from '../../platform/lifecycle/lifecycle.js';
import { isAllowed } from '../../platform/lifecycle/state-table.js';
import { type Principal, requirePermission } from '../../platform/principal.js';
import type { QuotaService } from '../../platform/quotas/quotas.js';
import type { Store } from '../../platform/store/db.js';
import type { Executor } from '../../platform/store/schema.js';
import { instanceTypeNamed } from '../catalog/catalog.js';
import { INSTANCE_KIND } from '../instances/kind.js';
import type { Instance } from '../instances/record.js';
import type { InstanceService, NewInstance } from '../instances/service.js';
import { findAccountInstance, findInstance, lockAccountInstance } from '../instances/store.js';
import type { DueSchedule } from '../volumes/backup-schedule-store.js';
import { VOLUME_KIND } from '../volumes/kind.js';
import { newVolume, type Volume } from '../volumes/record.js';
import { VOLUME_STATES } from '../volumes/states.js';
import { countRestoresFrom, findAccountVolume, findVolume, lockAccountVolume } from '../volumes/store.js';
import { type VolumeView, volumeView } from '../volumes/view.js';
import { SNAPSHOT_KIND } from './kind.js';
import { type Snapshot, type SnapshotKind, type SnapshotSort, scheduledName } from './record.js';
import { SNAPSHOT_SOURCE_STATUSES, SNAPSHOT_STATES } from './states.js';
import * as snapshots from './store.js';
import { type SnapshotView, snapshotView } from './view.js';

export interface NewSnapshot {
  name: string;
  volume_id?: string | undefined;
  instance_id?: string | undefined;
  tags?: Record<string, string> | undefined;
}

export interface SnapshotUpdate {
  name?: string | undefined;
  tags?: Record<string, string> | undefined;
}

export interface SnapshotListQuery extends PageRequest<SnapshotSort> {
  status?: string | undefined;
  kind?: string | undefined;
  source_volume_id?: string | undefined;
  source_instance_id?: string | undefined;
  region?: string | undefined;
}

/** What a restore writes: a new volume (name…), a detached volume, a stopped instance's root disk, or a new instance. */
export interface RestoreRequest {
  name?: string | undefined;
  size_gb?: number | undefined;
  region?: string | undefined;
  tags?: Record<string, string> | undefined;
  target_volume_id?: string | undefined;
  instance_id?: string | undefined;
  /** A new instance booted from a root snapshot: the instance create body, region and image optional. */
  instance?:
    | (Omit<NewInstance, 'region' | 'image'> & { region?: string | undefined; image?: string | undefined })
    | undefined;
}

export interface RestoreView {
  snapshot: SnapshotView;
  /** The volume being written: new, overwritten, or the instance's root volume. */
  volume: VolumeView;
  /** The instance whose root disk is restored (a new one, for `instance`); null for a data volume. */
  instance_id: string | null;
}

/** A volume or an instance's root volume, as a snapshot is taken of it. */
interface Source {
  volume: Volume;
  instance: Instance | null;
}

/** The statuses a source may be copied in (the table's create.sources, published with it). */
const SNAPSHOTTABLE_VOLUME = SNAPSHOT_SOURCE_STATUSES.volume;
const SNAPSHOTTABLE_INSTANCE = SNAPSHOT_SOURCE_STATUSES.instance;

export class SnapshotService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly lifecycle: Lifecycle,
    private readonly quotas: QuotaService,
    private readonly faults: FaultInjection | null,
    /** Makes the instance a restore into a new instance boots (the instance service's create). */
    private readonly createInstance: InstanceService['create'],
  ) {}

  async create(principal: Principal, input: NewSnapshot): Promise<SnapshotView> {
    checkTagKeys(input.tags);
    if (principal.accountStatus === 'past_due') {
      throw new PaymentRequired(
        'This account is past due: you cannot create snapshots until it is settled. Reading, restoring and deleting still work.',
      );
    }
    if ((input.volume_id === undefined) === (input.instance_id === undefined)) {
      throw new InvalidRequest(
        'Name exactly one source: volume_id (a volume) or instance_id (its root volume)',
        {
          field: input.volume_id === undefined ? 'volume_id' : 'instance_id',
        },
      );
    }
    const accountId = principal.accountId;
    // No lock on the account: the quota counter is written last (the lifecycle core claims it).
    const snapshot = await this.lifecycle.create(SNAPSHOT_KIND, {
      event: 'snapshot.created',
      accountId,
      quotas: [['snapshots', 1]],
      hold: (ctx) => this.holdSource(ctx.trx, accountId, input),
      build: (_ctx, source) => this.newSnapshot(accountId, source, input.name, 'manual', input.tags ?? {}),
    });
    return snapshotView(snapshot);
  }

  async list(accountId: string, query: SnapshotListQuery): Promise<Page<SnapshotView>> {
    const page = await snapshots.listSnapshots(
      this.store.db,
      accountId,
      {
        status: query.status,
        kind: query.kind,
        source_volume_id: query.source_volume_id,
        source_instance_id: query.source_instance_id,
        region: query.region,
      },
      query,
    );
    return { items: page.items.map(snapshotView), pagination: page.pagination };
  }

  async get(accountId: string, id: string): Promise<SnapshotView> {
    const snapshot = await snapshots.findAccountSnapshot(this.store.db, accountId, id);
    if (!snapshot) throw new NotFound('snapshot', id);
    return snapshotView(snapshot);
  }

  async update(accountId: string, id: string, changes: SnapshotUpdate): Promise<SnapshotView> {
    checkTagKeys(changes.tags);
    const updated = await this.lifecycle.act(SNAPSHOT_KIND, accountId, id, 'update', () => ({
      changes: {
        ...(changes.name !== undefined ? { name: changes.name } : {}),
        ...(changes.tags !== undefined ? { tags: changes.tags } : {}),
      },
    }));
    return snapshotView(updated);
  }

  async delete(accountId: string, id: string): Promise<SnapshotView> {
    return snapshotView(
      await this.lifecycle.act(SNAPSHOT_KIND, accountId, id, 'delete', async (snapshot, ctx) => {
        const restores = await countRestoresFrom(ctx.trx, snapshot.id);
        if (restores > 0) {
          throw new Conflict(
            `Snapshot ${snapshot.id} is being restored into ${restores} volume(s); delete it once they are done`,
            { current_status: snapshot.status, restores_in_progress: restores },
          );
        }
        return {};
      }),
    );
  }

  /**
   * Writes the snapshot into a new volume, over a detached volume (`target_volume_id`), over the root
   * disk of a stopped instance (`instance_id`, root snapshots only) or into a new instance (`instance`).
   * A request naming none of them asks for what the snapshot is for (`defaultRestore`). Besides
   * `snapshots:write` (the route's), the key must be allowed to write what the restore writes or creates
   * (RESTORE_PERMISSIONS). The snapshot must be available; the target's restore is a durable job, and
   * `snapshot.restored` is written when it is done.
   */
  async restore(principal: Principal, id: string, body: RestoreRequest): Promise<RestoreView> {
    const accountId = principal.accountId;
    const named = restoreMode(body);
    if (named !== null) requirePermission(principal, RESTORE_PERMISSIONS[named], 'write');
    const { mode, input } =
      named === null ? await this.defaultRestore(principal, id) : { mode: named, input: body };
    if (mode === 'new-instance')
      return this.restoreIntoNewInstance(principal, id, input.instance ?? ({} as never));
    if (mode === 'new-volume') {
      checkSnapshotTags(input.tags, this.faults?.volumeFaults ?? null, this.faults?.tag);
      if (principal.accountStatus === 'past_due') {
        throw new PaymentRequired(
          'This account is past due: you cannot create volumes until it is settled. Restoring over existing volumes still works.',
        );
      }
    }
    let written: Volume | undefined;
    const snapshot = await this.lifecycle.act(
      SNAPSHOT_KIND,
      accountId,
      id,
      'restore',
      async (snapshot, ctx) => {
        const startedAt = this.clock.now().toISOString();
        const restore = { restore_snapshot_id: snapshot.id, restore_started_at: startedAt };
        switch (mode) {
          case 'new-volume':
            written = await this.restoreIntoNewVolume(ctx, accountId, snapshot, input, startedAt);
            break;
          case 'target-volume': {
            const target = await this.targetVolume(
              ctx.trx,
              accountId,
              snapshot,
              input.target_volume_id ?? '',
            );
            written = await this.lifecycle.writeWithin(
              ctx,
              VOLUME_KIND,
              target,
              { status: 'restoring', ...restore },
              { reconcile: true },
            );
            break;
          }
          case 'instance-root': {
            const root = await this.rootOfStoppedInstance(
              ctx.trx,
              accountId,
              snapshot,
              input.instance_id ?? '',
            );
            written = await this.lifecycle.writeWithin(
              ctx,
              VOLUME_KIND,
              root,
              { status: 'restoring', ...restore },
              { reconcile: true },
            );
            break;
          }
        }
        if (!written) throw new Conflict('The target changed while the restore was asked for; try again');
        return { reconcile: false };
      },
      {
        // The instance (for a root disk) and the target volume are held before the snapshot: the lock
        // order. A new volume holds nothing first: its quotas are claimed by guarded counters.
        holdFirst: async (ctx) => {
          if (mode === 'instance-root') {
            const instance = await lockAccountInstance(ctx.trx, accountId, input.instance_id ?? '');
            if (instance) await lockAccountVolume(ctx.trx, accountId, instance.root_volume_id);
          } else if (mode === 'target-volume') {
            await lockAccountVolume(ctx.trx, accountId, input.target_volume_id ?? '');
          }
        },
      },
    );
    const volume = written as unknown as Volume;
    return {
      snapshot: snapshotView(snapshot),
      volume: volumeView(volume),
      instance_id: mode === 'instance-root' ? volume.instance_id : null,
    };
  }

  /**
   * The answer to a restore that made `made` (a new volume, or a new instance), as it is now: for an
   * Idempotency-Key retry that finds the restore committed but its answer never saved.
   */
  async restoredView(
    accountId: string,
    id: string,
    made: { kind: string; id: string },
  ): Promise<RestoreView> {
    const snapshot = await this.get(accountId, id);
    const instance =
      made.kind === 'instance' ? await findAccountInstance(this.store.db, accountId, made.id) : null;
    if (made.kind === 'instance' && !instance) throw new NotFound('instance', made.id);
    const volumeId = instance ? instance.root_volume_id : made.id;
    const volume = await findAccountVolume(this.store.db, accountId, volumeId);
    if (!volume) throw new NotFound('volume', volumeId);
    return { snapshot, volume: volumeView(volume), instance_id: instance?.id ?? null };
  }

  /**
   * A restore that names no target (docs/design.md, "Snapshot states"): a data volume's snapshot becomes a new
   * volume of its name, size and region; a root snapshot is written back over its source instance's disk
   * when that instance is stopped. Otherwise (running, or gone) the caller must choose: a 400 listing the
   * choices. The key must be allowed what it will do; the instance's status is checked again under its lock.
   */
  private async defaultRestore(
    principal: Principal,
    id: string,
  ): Promise<{ mode: RestoreMode; input: RestoreRequest }> {
    const snapshot = await snapshots.findAccountSnapshot(this.store.db, principal.accountId, id);
    if (!snapshot) throw new NotFound('snapshot', id);
    const sourceId = snapshot.source_instance_id;
    if (sourceId === null) {
      requirePermission(principal, RESTORE_PERMISSIONS['new-volume'], 'write');
      return { mode: 'new-volume', input: {} };
    }
    const source = await findAccountInstance(this.store.db, principal.accountId, sourceId);
    if (source?.status !== 'stopped') {
      throw new InvalidRequest(
        `Snapshot ${snapshot.id} is of the root disk of instance ${sourceId}, which is ${source ? `${source.status}: stop it, or` : 'gone:'} say what to restore into: ${RESTORE_CHOICES}`,
        {
          field: 'instance_id',
          allowed_values: [...RESTORE_TARGETS],
          source_instance_id: sourceId,
          source_instance_status: source?.status ?? null,
        },
      );
    }
    requirePermission(principal, RESTORE_PERMISSIONS['instance-root'], 'write');
    return { mode: 'instance-root', input: { instance_id: sourceId } };
  }

  /**
   * Boots a new instance from a root snapshot: the instance rules and quotas of a create, in the
   * snapshot's region, with a type whose disk holds the snapshot; its root disk is restored first.
   */
  private async restoreIntoNewInstance(
    principal: Principal,
    id: string,
    body: NonNullable<RestoreRequest['instance']>,
  ): Promise<RestoreView> {
    const accountId = principal.accountId;
    const found = await snapshots.findAccountSnapshot(this.store.db, accountId, id);
    if (!found) throw new NotFound('snapshot', id);
    if (found.source_instance_id === null) {
      throw new InvalidRequest(
        `Snapshot ${found.id} is of a data volume; only a snapshot of a root volume boots an instance`,
        { field: 'instance' },
      );
    }
    const region = body.region ?? found.region;
    if (region !== found.region) {
      throw new InvalidRequest(
        `Snapshot ${found.id} is in ${found.region}: an instance booted from it is made there`,
        {
          field: 'instance.region',
          value: region,
          allowed_values: [found.region],
        },
      );
    }
    const image = body.image ?? (await findInstance(this.store.db, found.source_instance_id))?.image;
    if (image === undefined) {
      throw new InvalidRequest(`The instance snapshot ${found.id} was taken of is gone: name the image`, {
        field: 'instance.image',
      });
    }
    const created = await this.createInstance(
      principal,
      { ...body, region, image },
      {
        rootFrom: async (trx, type) => {
          const snapshot = await snapshots.lockAccountSnapshot(trx, accountId, id);
          if (!snapshot) throw new NotFound('snapshot', id);
          if (!isAllowed(SNAPSHOT_STATES, 'restore', snapshot.status)) {
            throw conflict(SNAPSHOT_STATES, 'restore', snapshot.status);
          }
          if (type.storage_gb < snapshot.size_gb) {
            throw new InvalidRequest(
              `Snapshot ${snapshot.id} holds ${snapshot.size_gb} GB; ${type.name} has a ${type.storage_gb} GB root disk`,
              { field: 'instance.instance_type', value: type.name, snapshot_size_gb: snapshot.size_gb },
            );
          }
          return { snapshotId: snapshot.id };
        },
      },
    );
    const root = await findVolume(this.store.db, created.root_volume_id);
    if (!root) throw new NotFound('volume', created.root_volume_id);
    return { snapshot: snapshotView(found), volume: volumeView(root), instance_id: created.id };
  }

  /**
   * The related write a finished restore makes: `snapshot.restored` on its snapshot, if it is still there;
   * for a root disk, the instance waiting for it to boot is looked at again.
   */
  reportRestored(volume: Volume): RelatedWrite {
    return async (ctx) => {
      if (volume.kind === 'root' && volume.instance_id !== null) {
        const instance = await findInstance(ctx.trx, volume.instance_id);
        if (instance?.status === 'starting')
          await this.lifecycle.reconcileWithin(ctx, INSTANCE_KIND, instance.id);
      }
      if (volume.restore_snapshot_id === null) return;
      const snapshot = await snapshots.lockAccountSnapshot(
        ctx.trx,
        volume.account_id,
        volume.restore_snapshot_id,
      );
      if (!snapshot) return;
      await this.lifecycle.writeWithin(
        ctx,
        SNAPSHOT_KIND,
        snapshot,
        {},
        {
          event: {
            type: 'snapshot.restored',
            data: { volume_id: volume.id, instance_id: volume.kind === 'root' ? volume.instance_id : null },
          },
        },
      );
    };
  }

  /**
   * Inside the scheduler's transaction (the slot taken): the scheduled snapshot of the schedule's source,
   * or nothing when the source cannot be copied now (gone, in a changing status) or the snapshots quota
   * is full — the slot is then skipped, not retried. Returns the snapshot made, or null.
   *
   * `room` carries, per account, how many more snapshots the quota allows, across the slots of one
   * transaction: its snapshots counter is held from its first slot to the commit, so it is counted once.
   */
  async createScheduled(
    ctx: WriteContext,
    schedule: DueSchedule,
    slot: Date,
    room: Map<string, number> = new Map(),
  ): Promise<Snapshot | null> {
    const source = await this.scheduledSource(ctx.trx, schedule);
    if (!source) return null;
    const accountId = schedule.account_id;
    let left = room.get(accountId);
    // The counter is held for the rest of the batch, so the account's snapshot creates meanwhile wait at
    // their guarded claim and count these.
    if (left === undefined) left = await this.quotas.roomHeld(ctx.trx, accountId, 'snapshots');
    room.set(accountId, left);
    if (left < 1) return null;
    const name = scheduledName(source.instance?.name ?? source.volume.name, slot);
    // The quota is checked above, for the batch; no request waits for this snapshot.
    const made = await this.lifecycle.createWithin(ctx, SNAPSHOT_KIND, {
      event: 'snapshot.created',
      accountId,
      answersRequest: false,
      build: () => this.newSnapshot(accountId, source, name, 'scheduled', {}),
    });
    room.set(accountId, left - 1);
    return made;
  }

  /**
   * Retention for one schedule: keeps the newest `retention` available scheduled snapshots of its source
   * and deletes older scheduled ones (failed ones too, once a newer one is available); manual snapshots
   * are never touched. Returns false while a scheduled snapshot is still being made (come back later).
   */
  async prune(schedule: DueSchedule): Promise<boolean> {
    const volumeId = await this.scheduledVolumeId(schedule);
    if (!volumeId) return true;
    const scheduled = await snapshots.scheduledSnapshotsOf(this.store.db, volumeId);
    if (scheduled.some((s) => s.status === 'creating')) return false;
    const kept = scheduled.filter((s) => s.status === 'available').slice(0, schedule.retention);
    const newestKept = kept[0]?.created_at ?? '';
    const doomed = scheduled.filter(
      (s) =>
        !kept.includes(s) &&
        (s.status === 'available' || (s.status === 'failed' && s.created_at < newestKept)),
    );
    for (const snapshot of doomed) {
      try {
        await this.delete(snapshot.account_id, snapshot.id);
      } catch (error) {
        // Being restored from, or deleted meanwhile: the next run looks again.
        if (!(error instanceof Conflict) && !(error instanceof NotFound)) throw error;
      }
    }
    return true;
  }

  private async scheduledVolumeId(schedule: DueSchedule): Promise<string | null> {
    if (schedule.source_kind === 'volume') return schedule.source_id;
    return (await findInstance(this.store.db, schedule.source_id))?.root_volume_id ?? null;
  }

  private async scheduledSource(trx: Executor, schedule: DueSchedule): Promise<Source | null> {
    if (schedule.source_kind === 'volume') {
      const volume = await findVolume(trx, schedule.source_id);
      if (!volume || !(SNAPSHOTTABLE_VOLUME as readonly string[]).includes(volume.status)) return null;
      return { volume, instance: null };
    }
    const instance = await findInstance(trx, schedule.source_id);
    if (!instance || !(SNAPSHOTTABLE_INSTANCE as readonly string[]).includes(instance.status)) return null;
    const volume = await findVolume(trx, instance.root_volume_id);
    if (!volume || !(SNAPSHOTTABLE_VOLUME as readonly string[]).includes(volume.status)) return null;
    return { volume, instance };
  }

  private newSnapshot(
    accountId: string,
    source: Source,
    name: string,
    kind: SnapshotKind,
    tags: Record<string, string>,
  ): Snapshot {
    const now = this.clock.now();
    const at = now.toISOString();
    return {
      id: newId('snapshot', now),
      account_id: accountId,
      name,
      source_volume_id: source.volume.id,
      source_instance_id: source.volume.kind === 'root' ? source.volume.instance_id : null,
      size_gb: source.volume.size_gb,
      region: source.volume.region,
      status: SNAPSHOT_KIND.table.create.status,
      kind,
      error: null,
      tags,
      version: 1,
      created_at: at,
      completed_at: null,
      updated_at: at,
    };
  }

  /** The source a request names, held (instance, then volume: the lock order), in a status that copies. */
  private async holdSource(trx: Executor, accountId: string, input: NewSnapshot): Promise<Source> {
    if (input.instance_id !== undefined) {
      const instance = await lockAccountInstance(trx, accountId, input.instance_id);
      if (!instance) throw new NotFound('instance', input.instance_id, { field: 'instance_id' });
      if (!(SNAPSHOTTABLE_INSTANCE as readonly string[]).includes(instance.status)) {
        throw new Conflict(
          `Instance ${instance.id} is ${instance.status}; a snapshot of its root volume is taken while it is ${SNAPSHOTTABLE_INSTANCE.join(' or ')}`,
          {
            instance_id: instance.id,
            current_status: instance.status,
            allowed_statuses: [...SNAPSHOTTABLE_INSTANCE],
          },
        );
      }
      const volume = await lockAccountVolume(trx, accountId, instance.root_volume_id);
      if (!volume) throw new NotFound('volume', instance.root_volume_id);
      this.checkCopyable(volume);
      return { volume, instance };
    }
    const volumeId = input.volume_id ?? '';
    const volume = await lockAccountVolume(trx, accountId, volumeId);
    if (!volume) throw new NotFound('volume', volumeId, { field: 'volume_id' });
    this.checkCopyable(volume);
    return { volume, instance: null };
  }

  private checkCopyable(volume: Volume): void {
    if (!(SNAPSHOTTABLE_VOLUME as readonly string[]).includes(volume.status)) {
      throw new Conflict(
        `Volume ${volume.id} is ${volume.status}; a snapshot is taken of a volume that is ${SNAPSHOTTABLE_VOLUME.join(' or ')}`,
        { volume_id: volume.id, current_status: volume.status, allowed_statuses: [...SNAPSHOTTABLE_VOLUME] },
      );
    }
  }

  private async restoreIntoNewVolume(
    ctx: WriteContext,
    accountId: string,
    snapshot: Snapshot,
    input: RestoreRequest,
    startedAt: string,
  ): Promise<Volume> {
    if (input.region !== undefined && input.region !== snapshot.region) {
      throw new InvalidRequest(
        `Snapshot ${snapshot.id} is in ${snapshot.region}: a volume restored from it is made there`,
        { field: 'region', value: input.region, allowed_values: [snapshot.region] },
      );
    }
    const sizeGb = input.size_gb ?? snapshot.size_gb;
    if (sizeGb < snapshot.size_gb) {
      throw new InvalidRequest(
        `Snapshot ${snapshot.id} holds ${snapshot.size_gb} GB; the volume must be at least that large`,
        { field: 'size_gb', value: sizeGb, snapshot_size_gb: snapshot.size_gb },
      );
    }
    // Claimed guarded at the end of the snapshot's transaction, so a volume create of the account that
    // took the last room meanwhile makes this a 403.
    return this.lifecycle.createWithin(ctx, VOLUME_KIND, {
      event: 'volume.created',
      accountId,
      quotas: [
        ['volumes', 1],
        ['volume_storage_gb', sizeGb],
      ],
      build: (): Volume => {
        const now = this.clock.now();
        return newVolume(
          {
            id: newId('volume', now),
            account_id: accountId,
            name: input.name ?? snapshot.name,
            region: snapshot.region,
            size_gb: sizeGb,
            status: VOLUME_KIND.table.create.status,
            kind: 'data',
            tags: input.tags ?? {},
            restore_snapshot_id: snapshot.id,
            restore_started_at: startedAt,
          },
          now.toISOString(),
        );
      },
    });
  }

  /** A data volume the snapshot may be written over: detached, available, in its region, large enough. */
  private async targetVolume(
    trx: Executor,
    accountId: string,
    snapshot: Snapshot,
    volumeId: string,
  ): Promise<Volume> {
    const target = await lockAccountVolume(trx, accountId, volumeId);
    if (!target) throw new NotFound('volume', volumeId, { field: 'target_volume_id' });
    if (target.kind === 'root') {
      throw new Conflict(
        `Volume ${target.id} is the root volume of instance ${target.instance_id}; restore its root disk with instance_id (the instance stopped)`,
        { volume_id: target.id, kind: 'root', instance_id: target.instance_id },
      );
    }
    if (target.instance_id !== null) {
      throw new Conflict(
        `Volume ${target.id} is attached to instance ${target.instance_id}; detach it before restoring over it`,
        { volume_id: target.id, current_status: target.status, instance_id: target.instance_id },
      );
    }
    if (!isAllowed(VOLUME_STATES, 'restore', target.status)) {
      throw conflict(VOLUME_STATES, 'restore', target.status, {
        message: `Volume ${target.id} cannot be restored over now`,
        details: { volume_id: target.id },
      });
    }
    this.checkFits(snapshot, target, 'target_volume_id');
    return target;
  }

  /** The root volume of a stopped instance in the snapshot's region, for a root snapshot. */
  private async rootOfStoppedInstance(
    trx: Executor,
    accountId: string,
    snapshot: Snapshot,
    instanceId: string,
  ): Promise<Volume> {
    const instance = await lockAccountInstance(trx, accountId, instanceId);
    if (!instance) throw new NotFound('instance', instanceId, { field: 'instance_id' });
    if (snapshot.source_instance_id === null) {
      throw new InvalidRequest(
        `Snapshot ${snapshot.id} is of a data volume; only a snapshot of a root volume restores an instance's root disk`,
        { field: 'instance_id', value: instanceId },
      );
    }
    if (instance.status !== 'stopped') {
      throw new Conflict(
        `Instance ${instance.id} is ${instance.status}; stop it before restoring its root disk`,
        { instance_id: instance.id, current_status: instance.status, allowed_statuses: ['stopped'] },
      );
    }
    const root = await lockAccountVolume(trx, accountId, instance.root_volume_id);
    if (!root) throw new NotFound('volume', instance.root_volume_id);
    if (!isAllowed(VOLUME_STATES, 'restore', root.status)) {
      throw conflict(VOLUME_STATES, 'restore', root.status, {
        message: `The root volume ${root.id} of instance ${instance.id} cannot be restored over now`,
        details: { volume_id: root.id, instance_id: instance.id },
      });
    }
    const disk = instanceTypeNamed(instance.instance_type).storage_gb;
    if (disk < snapshot.size_gb) {
      throw new InvalidRequest(
        `Snapshot ${snapshot.id} holds ${snapshot.size_gb} GB; ${instance.instance_type} has a ${disk} GB root disk`,
        { field: 'instance_id', value: instanceId, snapshot_size_gb: snapshot.size_gb },
      );
    }
    this.checkFits(snapshot, root, 'instance_id');
    return root;
  }

  private checkFits(snapshot: Snapshot, volume: Volume, field: string): void {
    if (volume.region !== snapshot.region) {
      throw new InvalidRequest(
        `Snapshot ${snapshot.id} is in ${snapshot.region} and volume ${volume.id} in ${volume.region}: restores stay in the snapshot's region`,
        { field, value: volume.id, snapshot_region: snapshot.region, volume_region: volume.region },
      );
    }
    if (volume.size_gb < snapshot.size_gb) {
      throw new InvalidRequest(
        `Snapshot ${snapshot.id} holds ${snapshot.size_gb} GB; volume ${volume.id} has only ${volume.size_gb} GB`,
        { field, value: volume.id, snapshot_size_gb: snapshot.size_gb, volume_size_gb: volume.size_gb },
      );
    }
  }
}

type RestoreMode = 'new-volume' | 'target-volume' | 'instance-root' | 'new-instance';

/** What a key needs (write) to restore, besides snapshots:write: the permission to write or create the target. */
const RESTORE_PERMISSIONS: Record<RestoreMode, PermissionArea> = {
  'new-volume': 'volumes',
  'target-volume': 'volumes',
  'instance-root': 'instances',
  'new-instance': 'instances',
};

const RESTORE_TARGETS = ['name', 'target_volume_id', 'instance_id', 'instance'] as const;
const RESTORE_CHOICES =
  'a new volume (name, size_gb, region, tags), target_volume_id, instance_id, or instance';

/**
 * Which restore a body asks for: target_volume_id, instance_id, instance, or a new volume (any of name,
 * size_gb, region, tags); null when it names none of them. Two of them is a 400.
 */
function restoreMode(input: RestoreRequest): RestoreMode | null {
  const newVolume = ['name', 'size_gb', 'region', 'tags'].filter(
    (field) => input[field as keyof RestoreRequest] !== undefined,
  );
  const named = [
    ...(input.target_volume_id !== undefined ? ['target_volume_id'] : []),
    ...(input.instance_id !== undefined ? ['instance_id'] : []),
    ...(input.instance !== undefined ? ['instance'] : []),
    ...(newVolume.length > 0 ? ['name'] : []),
  ];
  if (named.length > 1) {
    throw new InvalidRequest(`Restore into one thing: ${named.join(' and ')} were both given`, {
      field: named[1],
      allowed_values: [...RESTORE_TARGETS],
    });
  }
  switch (named[0]) {
    case undefined:
      return null;
    case 'target_volume_id':
      return 'target-volume';
    case 'instance_id':
      return 'instance-root';
    case 'instance':
      return 'new-instance';
    default:
      return 'new-volume';
  }
}

/** Tag keys as everywhere; with `faults`, the simulator's fault tag must name one of them. */
function checkSnapshotTags(
  tags: Record<string, string> | undefined,
  faults: readonly string[] | null,
  faultTag?: string,
): void {
  checkTagKeys(tags);
  const fault = faultTag ? tags?.[faultTag] : undefined;
  if (faults && faultTag && fault !== undefined && !faults.includes(fault)) {
    throw new InvalidRequest(`Unknown simulator fault "${fault}"`, {
      field: `tags.${faultTag}`,
      value: fault,
      allowed_values: [...faults],
    });
  }
}
