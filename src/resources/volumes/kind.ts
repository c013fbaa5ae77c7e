/**
 * Volumes as a kind of the lifecycle core: the state table, how records are read and written, what their
 * events carry, and why an action is refused when the status alone does not say (a volume held by an
 * instance, a root volume).
 */

import type { VolumeSpec } from '../../drivers/driver.js';
import { conflict, type ResourceKind } from '../../platform/lifecycle/lifecycle.js';
import type { Usage } from '../../platform/quotas/usage.js';
import { volumeMeter } from '../billing/rules.js';
import { removeSchedule } from './backup-schedule-store.js';
import type { VolumeEventData } from './events.js';
import type { Volume, VolumeChanges } from './record.js';
import { VOLUME_STATES, type VolumeAction, type VolumeEventType, type VolumeStatus } from './states.js';
import * as volumes from './store.js';

export type { VolumeEventType } from './states.js';

/** What a volume takes of its account's quotas: a data volume counts with its size; a root volume is its instance's. */
function volumeUsage(volume: { kind: string; size_gb: number }): Usage {
  return volume.kind === 'data' ? { volumes: 1, volume_storage_gb: volume.size_gb } : {};
}

export const VOLUME_KIND: ResourceKind<VolumeStatus, VolumeAction, Volume, VolumeChanges, VolumeEventType> = {
  table: VOLUME_STATES,
  resource: 'volume',
  find: volumes.findVolume,
  lock: volumes.lockAccountVolume,
  insert: volumes.insertVolume,
  update: volumes.updateVolume,
  async remove(trx, volume) {
    if (!(await volumes.deleteVolume(trx, volume))) return false;
    await removeSchedule(trx, volume.id);
    return true;
  },
  eventData: (volume): VolumeEventData => ({
    volume_id: volume.id,
    name: volume.name,
    status: volume.status,
    instance_id: volume.instance_id,
    size_gb: volume.size_gb,
    device_name: volume.device_name,
    kind: volume.kind,
  }),
  meter: volumeMeter,
  usage: volumeUsage,
  refusal(volume, action) {
    if (volume.kind === 'root' && (action === 'detach' || action === 'delete' || action === 'attach')) {
      return rootVolumeConflict(volume, action);
    }
    if (volume.instance_id !== null && (action === 'attach' || action === 'delete')) {
      const holding = volume.status === 'attaching' ? 'is being attached to' : 'is attached to';
      const advice = action === 'delete' ? 'detach it before deleting it' : 'detach it first';
      return conflict(VOLUME_STATES, action, volume.status, {
        message: `Volume ${volume.id} ${holding} instance ${volume.instance_id}; ${advice}`,
        details: { instance_id: volume.instance_id },
      });
    }
    return undefined;
  },
};

/** A root volume lives and dies with its instance: it is not attached, detached, deleted or resized alone. */
export function rootVolumeConflict(volume: Volume, action: VolumeAction) {
  const instead =
    action === 'resize'
      ? 'resize the instance to a type with a larger disk instead'
      : action === 'attach'
        ? 'it stays on its instance'
        : 'it goes when its instance is deleted';
  return conflict(VOLUME_STATES, action, volume.status, {
    message: `Volume ${volume.id} is the root volume of instance ${volume.instance_id}; ${instead}`,
    details: { instance_id: volume.instance_id, kind: 'root' },
  });
}

/** What the driver is told about the disk it keeps for a volume. */
export function volumeSpec(volume: Volume): VolumeSpec {
  return { id: volume.id, region: volume.region, sizeGb: volume.size_gb, filesystem: volume.filesystem };
}
