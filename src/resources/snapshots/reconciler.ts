/**
 * The snapshot reconciler: decides the one step that moves a snapshot from `creating` to `available`
 * or `failed`, or from `deleting` to gone. The lifecycle core runs it as the `snapshot` job.
 *
 * Each step reads where the copy is (the driver's `inspectSnapshot`), then asks the driver for the one
 * thing that moves it on (copy, delete, purge) and looks again, or returns the write that records where
 * it got with its event, or the time the copy should settle. The source's tags are read when the copy
 * begins (the simulator's fault tag lives there); after that the snapshot no longer needs its source.
 */

import type { ComputeDriver } from '../../drivers/driver.js';
import type { Clock } from '../../platform/domain/clock.js';
import type { Reconciler, Step } from '../../platform/lifecycle/lifecycle.js';
import { type SnapshotEventType, snapshotSpec } from './kind.js';
import type { Snapshot, SnapshotChanges } from './record.js';
import type { SnapshotStatus } from './states.js';

type SnapshotStep = Step<SnapshotStatus, SnapshotChanges, SnapshotEventType>;

const AGAIN: SnapshotStep = { next: 'again' };

export class SnapshotReconciler
  implements Reconciler<SnapshotStatus, Snapshot, SnapshotChanges, SnapshotEventType>
{
  constructor(
    private readonly driver: ComputeDriver,
    private readonly clock: Clock,
    /** The tags of the snapshot's source (the volume's, or its instance's for a root volume); {} if gone. */
    private readonly sourceTags: (snapshot: Snapshot) => Promise<Record<string, string>>,
  ) {}

  /** The driver kept failing: a snapshot being made fails, saying so; one being deleted is left as it is. */
  giveUp(snapshot: Snapshot, error: unknown): SnapshotStep | null {
    if (snapshot.status !== 'creating') return null;
    const reason = `driver_failure: ${String(error)}`;
    return {
      next: 'settle',
      changes: { status: 'failed', error: reason, completed_at: this.clock.now().toISOString() },
      event: { type: 'snapshot.failed', data: { error: reason } },
    };
  }

  async step(snapshot: Snapshot): Promise<SnapshotStep> {
    const spec = snapshotSpec(snapshot);
    const copy = await this.driver.inspectSnapshot(spec);
    switch (snapshot.status) {
      case 'creating':
        switch (copy.state) {
          case 'absent':
            await this.driver.createSnapshot(snapshotSpec(snapshot, await this.sourceTags(snapshot)));
            return AGAIN;
          case 'creating':
            return { next: 'wait', until: copy.settlesAt };
          case 'failed': {
            const error = copy.error ?? 'the copy failed';
            return {
              next: 'settle',
              changes: { status: 'failed', error, completed_at: this.clock.now().toISOString() },
              event: { type: 'snapshot.failed', data: { error } },
            };
          }
          default:
            return {
              next: 'settle',
              changes: { status: 'available', completed_at: this.clock.now().toISOString() },
              event: { type: 'snapshot.completed' },
            };
        }
      case 'deleting':
        switch (copy.state) {
          case 'absent':
            return { next: 'remove', event: { type: 'snapshot.deleted', data: { status: 'deleted' } } };
          case 'deleting':
            return { next: 'wait', until: copy.settlesAt };
          default:
            await this.driver.deleteSnapshot(spec);
            return AGAIN;
        }
      default:
        return { next: 'done' };
    }
  }
}
