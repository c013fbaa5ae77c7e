/**
 * The snapshot state machine, as data (docs/design.md, "Snapshot states"). A snapshot is taken once and then only
 * read (restored from), renamed, or deleted; the reconciler (resources/snapshots/reconciler.ts) drives the
 * transitional statuses. Diagram: docs/api.md, "Snapshots".
 *
 *   create ─▶ creating ─▶ available          (the driver copied the source)
 *                  └────▶ failed             (the driver could not: `error` says why)
 *   available | failed ─delete─▶ deleting ─▶ (gone: 404)
 *   available ─restore─▶ available           (the restore is the target's change, not the snapshot's)
 */

import { defineStateTable, statusesExcept } from '../../platform/lifecycle/state-table.js';
import type { InstanceStatus } from '../instances/states.js';
import type { VolumeStatus } from '../volumes/states.js';
import type { SNAPSHOT_EVENTS } from './events.js';

export const SNAPSHOT_STATUSES = ['creating', 'available', 'failed', 'deleting'] as const;
export type SnapshotStatus = (typeof SNAPSHOT_STATUSES)[number];

export type SnapshotAction = 'update' | 'restore' | 'delete';

/**
 * The statuses a snapshot's source may be in when it is taken: a settled disk, attached or not (a live,
 * crash-consistent copy), or an instance that is running or stopped (the copy is of its root disk).
 */
export const SNAPSHOT_SOURCE_STATUSES = {
  volume: ['available', 'in-use'],
  instance: ['running', 'stopped'],
} as const satisfies { volume: readonly VolumeStatus[]; instance: readonly InstanceStatus[] };

export const SNAPSHOT_STATES = defineStateTable<SnapshotStatus, SnapshotAction>({
  kind: 'snapshot',
  statuses: SNAPSHOT_STATUSES,
  create: { status: 'creating', target: 'available', sources: SNAPSHOT_SOURCE_STATUSES },
  actions: {
    update: { from: statusesExcept(SNAPSHOT_STATUSES, 'deleting') },
    // The snapshot stays available; the volume (or instance) it is restored into does the work.
    restore: {
      from: ['available'],
      description:
        "Into a new volume, over a detached data volume of the snapshot's region at least as large, or, for a snapshot of a root volume, over the root disk of a stopped instance.",
    },
    delete: { from: ['available', 'failed'], to: 'deleting', target: 'gone' },
  },
});

export type SnapshotEventType = keyof typeof SNAPSHOT_EVENTS;
