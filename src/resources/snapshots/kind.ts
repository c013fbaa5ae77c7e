/**
 * Snapshots as a kind of the lifecycle core: the state table, how records are read and written, and
 * what their events carry (the snapshot, its status and the ids it relates to).
 */

import type { SnapshotSpec } from '../../drivers/driver.js';
import type { ResourceKind } from '../../platform/lifecycle/lifecycle.js';
import type { Usage } from '../../platform/quotas/usage.js';
import type { Executor } from '../../platform/store/schema.js';
import { snapshotMeter } from '../billing/rules.js';
import { findInstance } from '../instances/store.js';
import { findVolume } from '../volumes/store.js';
import type { SnapshotEventData } from './events.js';
import type { Snapshot, SnapshotChanges } from './record.js';
import {
  SNAPSHOT_STATES,
  type SnapshotAction,
  type SnapshotEventType,
  type SnapshotStatus,
} from './states.js';
import * as snapshots from './store.js';

export type { SnapshotEventType } from './states.js';

/** What a snapshot takes of its account's quotas. */
function snapshotUsage(): Usage {
  return { snapshots: 1 };
}

export const SNAPSHOT_KIND: ResourceKind<
  SnapshotStatus,
  SnapshotAction,
  Snapshot,
  SnapshotChanges,
  SnapshotEventType
> = {
  table: SNAPSHOT_STATES,
  resource: 'snapshot',
  find: snapshots.findSnapshot,
  lock: snapshots.lockAccountSnapshot,
  insert: snapshots.insertSnapshot,
  update: snapshots.updateSnapshot,
  remove: snapshots.deleteSnapshot,
  eventData: (snapshot): SnapshotEventData => ({
    snapshot_id: snapshot.id,
    name: snapshot.name,
    status: snapshot.status,
    kind: snapshot.kind,
    source_volume_id: snapshot.source_volume_id,
    source_instance_id: snapshot.source_instance_id,
    size_gb: snapshot.size_gb,
  }),
  meter: snapshotMeter,
  usage: snapshotUsage,
};

/** What the driver is told about a snapshot; the source's tags carry the simulator's fault tag. */
export function snapshotSpec(snapshot: Snapshot, sourceTags: Record<string, string> = {}): SnapshotSpec {
  return {
    id: snapshot.id,
    region: snapshot.region,
    sourceVolumeId: snapshot.source_volume_id,
    sizeGb: snapshot.size_gb,
    sourceTags,
  };
}

/** The tags of a snapshot's source: its instance's for a root volume, else the volume's; {} when gone. */
export async function sourceTagsOf(db: Executor, snapshot: Snapshot): Promise<Record<string, string>> {
  if (snapshot.source_instance_id !== null) {
    return (await findInstance(db, snapshot.source_instance_id))?.tags ?? {};
  }
  return (await findVolume(db, snapshot.source_volume_id))?.tags ?? {};
}
