/**
 * Instances as a kind of the lifecycle core: the state table, how records are read and written, what
 * their events carry, what goes with an instance when it is removed (its root volume, its GPUs), and what
 * it takes and pays: quota usage, the per-status counts, its meter.
 */

import type { MachineSpec } from '../../drivers/driver.js';
import type { ResourceKind } from '../../platform/lifecycle/lifecycle.js';
import type { Usage } from '../../platform/quotas/usage.js';
import { instanceMeter } from '../billing/rules.js';
import { type InstanceType, instanceTypeNamed } from '../catalog/catalog.js';
import { removeSchedule } from '../volumes/backup-schedule-store.js';
import { deleteRootVolume } from '../volumes/store.js';
import type { InstanceEventData } from './events.js';
import type { Instance, InstanceChanges } from './record.js';
import {
  INSTANCE_STATES,
  type InstanceAction,
  type InstanceEventType,
  type InstanceStatus,
} from './states.js';
import * as instances from './store.js';

export type { InstanceEventType } from './states.js';

export const gpusOf = (type: InstanceType): number => type.gpu?.count ?? 0;

/** What an instance takes of its account's quotas whatever its status, until its row is purged. */
function instanceUsage(instance: { instance_type: string }): Usage {
  const type = instanceTypeNamed(instance.instance_type);
  return { instances: 1, vcpus: type.vcpus, gpus: gpusOf(type) };
}

export const INSTANCE_KIND: ResourceKind<
  InstanceStatus,
  InstanceAction,
  Instance,
  InstanceChanges,
  InstanceEventType
> = {
  table: INSTANCE_STATES,
  resource: 'instance',
  find: instances.findInstance,
  lock: instances.lockAccountInstance,
  insert: instances.insertInstance,
  update: instances.updateInstance,
  async remove(trx, instance) {
    if (!(await instances.deleteInstance(trx, instance))) return false;
    await deleteRootVolume(trx, instance.id);
    await removeSchedule(trx, instance.id);
    return true;
  },
  async release(trx, instance) {
    const gpus = gpusOf(instanceTypeNamed(instance.instance_type));
    if (gpus > 0) await instances.releaseGpus(trx, instance.region, gpus);
  },
  eventData: (instance): InstanceEventData => ({
    instance_id: instance.id,
    name: instance.name,
    status: instance.status,
  }),
  meter: (instance) => instanceMeter(instance, instanceTypeNamed(instance.instance_type)),
  usage: instanceUsage,
  counts: instances.STATUS_COUNTS,
};

/** What the driver is told about the machine it runs for an instance. */
export function machineSpec(instance: Instance): MachineSpec {
  return {
    id: instance.id,
    instanceType: instanceTypeNamed(instance.instance_type),
    image: instance.image,
    region: instance.region,
    userData: instance.user_data,
    tags: instance.tags,
    rootVolumeId: instance.root_volume_id,
  };
}
