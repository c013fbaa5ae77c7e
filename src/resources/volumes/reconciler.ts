/**
 * The volume reconciler: decides the one step that moves a volume from a transitional status towards a
 * settled one. The lifecycle core runs it as the `volume` job and carries out what it returns.
 *
 * Each step reads where the disk is (the driver's `inspectVolume`), then either asks the driver for the
 * one thing that moves it on (create, attach, detach, grow, delete) and looks again, or returns the write
 * that records where the disk got (with its event), or the time the disk's change should settle. Driver
 * calls are idempotent and each step is decided from what is found, so a run cut short (kill -9) is run
 * again. A change queued behind the current one (`pending_action`: attach once created, detach once
 * grown because the instance went away) is taken up by the write that settles the current one.
 *
 * Restores: a volume created from a snapshot, or one the snapshot is written over (`restoring`), names
 * the snapshot and when the restore was asked for; the driver restores the disk, and the write that
 * ends the restore also records `snapshot.restored` on the snapshot (a related write, same transaction).
 */

import type { ComputeDriver, RestoreSpec, VolumeState } from '../../drivers/driver.js';
import type { Clock } from '../../platform/domain/clock.js';
import type { Reconciler, RelatedWrite, Step } from '../../platform/lifecycle/lifecycle.js';
import { type VolumeEventType, volumeSpec } from './kind.js';
import type { Volume, VolumeChanges } from './record.js';
import type { VolumeStatus } from './states.js';

type VolumeStep = Step<VolumeStatus, VolumeChanges, VolumeEventType>;

const AGAIN: VolumeStep = { next: 'again' };
const DONE: VolumeStep = { next: 'done' };
const waitFor = (disk: VolumeState): VolumeStep => ({ next: 'wait', until: disk.settlesAt });
const DETACHED = { instance_id: null, device_name: null, attached_at: null } as const;
const RESTORED = { restore_snapshot_id: null, restore_started_at: null } as const;

/** The write that reports a finished restore on its snapshot, made with the volume's own. */
export type RestoreReport = (volume: Volume) => RelatedWrite;

export class VolumeReconciler implements Reconciler<VolumeStatus, Volume, VolumeChanges, VolumeEventType> {
  constructor(
    private readonly driver: ComputeDriver,
    private readonly clock: Clock,
    private readonly reportRestore: RestoreReport,
  ) {}

  /** The driver kept failing: the volume goes to error (it can then be deleted, or detached if attached). */
  giveUp(volume: Volume): VolumeStep | null {
    if (volume.status === 'deleting') return null;
    return { next: 'advance', changes: { status: 'error', pending_action: null, ...RESTORED } };
  }

  /** Writes the snapshot over the disk, then goes to `settled` and reports the restore. */
  private async restore(volume: Volume, settled: VolumeChanges): Promise<VolumeStep> {
    const restore: RestoreSpec = {
      volumeId: volume.id,
      snapshotId: volume.restore_snapshot_id ?? '',
      startedAt: volume.restore_started_at ?? volume.created_at,
      sizeGb: volume.size_gb,
    };
    const state = await this.driver.inspectRestore(restore);
    switch (state.state) {
      case 'absent':
        await this.driver.restoreVolume(restore);
        return AGAIN;
      case 'restoring':
        return { next: 'wait', until: state.settlesAt };
      default:
        return {
          next: 'advance',
          changes: { ...settled, ...RESTORED },
          related: this.reportRestore(volume),
        };
    }
  }

  async step(volume: Volume): Promise<VolumeStep> {
    const spec = volumeSpec(volume);
    const disk = await this.driver.inspectVolume(spec);

    switch (volume.status) {
      case 'creating':
        switch (disk.state) {
          case 'absent':
            await this.driver.createVolume(spec);
            return AGAIN;
          case 'creating':
            return waitFor(disk);
          default: {
            const settled: VolumeChanges =
              volume.pending_action === 'attach' && volume.instance_id !== null
                ? { status: 'attaching', pending_action: null }
                : { status: 'available', pending_action: null };
            // Created from a snapshot: the snapshot is written onto the new disk before it is used.
            if (volume.restore_snapshot_id !== null) return this.restore(volume, settled);
            return { next: 'advance', changes: settled };
          }
        }

      case 'restoring': {
        const settled: VolumeChanges = { status: volume.instance_id !== null ? 'in-use' : 'available' };
        if (volume.restore_snapshot_id === null) return { next: 'advance', changes: settled };
        return this.restore(volume, settled);
      }

      case 'attaching': {
        if (volume.instance_id === null || volume.device_name === null) {
          // The instance went away before the attach began: the volume is simply available.
          return { next: 'advance', changes: { status: 'available', ...DETACHED } };
        }
        switch (disk.state) {
          case 'available':
            await this.driver.attachVolume(spec, {
              instanceId: volume.instance_id,
              deviceName: volume.device_name,
            });
            return AGAIN;
          case 'attached':
            return {
              next: 'settle',
              changes: { status: 'in-use', attached_at: this.clock.now().toISOString() },
              event: { type: 'volume.attached' },
            };
          default:
            return waitFor(disk);
        }
      }

      case 'detaching':
        switch (disk.state) {
          case 'attached':
          case 'attaching':
            await this.driver.detachVolume(spec);
            return AGAIN;
          case 'available':
            return {
              next: 'settle',
              changes: { status: 'available', ...DETACHED },
              event: {
                type: 'volume.detached',
                data: { instance_id: volume.instance_id, device_name: volume.device_name },
              },
            };
          default:
            return waitFor(disk);
        }

      case 'resizing': {
        if (disk.state === 'resizing') return waitFor(disk);
        if ((disk.sizeGb ?? 0) < volume.size_gb) {
          await this.driver.resizeVolume(spec);
          return AGAIN;
        }
        const resized = { type: 'volume.resized', data: { size_gb: volume.size_gb } } as const;
        if (volume.pending_action === 'detach') {
          // Its instance was deleted while it grew: it goes on to detach, and the job with it.
          return { next: 'advance', changes: { status: 'detaching', pending_action: null }, event: resized };
        }
        const settled: VolumeStatus = volume.instance_id !== null ? 'in-use' : 'available';
        return { next: 'settle', changes: { status: settled }, event: resized };
      }

      case 'deleting':
        switch (disk.state) {
          case 'absent':
            return { next: 'remove', event: { type: 'volume.deleted', data: { status: 'deleted' } } };
          case 'deleting':
            return waitFor(disk);
          default:
            await this.driver.deleteVolume(spec);
            return AGAIN;
        }

      default:
        return DONE;
    }
  }
}
