/**
 * The instance reconciler: the job that moves an instance from a transitional status to a settled one.
 *
 * Each run reads the instance and asks the driver where its machine is, then does the one thing that
 * moves it on: provision, boot, shut down, reboot, resize, power off, destroy, or record that the
 * machine got where the status was heading (with the operation's event, in the same transaction as the
 * status). When the machine is mid-change it returns the time the change should settle, and the job
 * comes back then. Every step is decided from the state it finds, and every driver call is idempotent,
 * so a run that is cut short (kill -9) is simply run again, by this process or another replica.
 *
 * A machine that will not settle by itself (a simulated fault) ends the job; a PATCH of the instance's
 * tags, a forced stop or a delete enqueues it again.
 */
import type { Clock } from '../domain/clock.js';
import { COMPLETION_EVENT, type InstanceOperation } from '../domain/instance-states.js';
import type { ComputeDriver, MachineState } from '../drivers/driver.js';
import type { JobHandler } from '../jobs/runner.js';
import type { Store } from '../store/db.js';
import * as instances from '../store/instances.js';
import type { InstanceRow } from '../store/schema.js';
import { deleteRootVolume } from '../store/volumes.js';
import { machineSpec, typeOf } from './instance-view.js';
import type { InstanceService } from './instances.js';

/** A run takes at most this many steps before yielding to other jobs; it is enqueued again at once. */
const MAX_STEPS_PER_RUN = 12;

type Step = { next: 'again' } | { next: 'wait'; until: Date | null } | { next: 'done' };
const AGAIN: Step = { next: 'again' };
const DONE: Step = { next: 'done' };
const waitFor = (machine: MachineState): Step => ({ next: 'wait', until: machine.settlesAt });

export class InstanceReconciler implements JobHandler {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly driver: ComputeDriver,
    private readonly instanceService: InstanceService,
  ) {}

  async run(instanceId: string): Promise<Date | null> {
    for (let step = 0; step < MAX_STEPS_PER_RUN; step++) {
      const row = await instances.findInstance(this.store.db, instanceId);
      if (!row) return null;
      const machine = await this.driver.inspect(machineSpec(row));
      const outcome = await this.step(row, machine);
      if (outcome.next === 'done') return null;
      if (outcome.next === 'wait') return outcome.until;
    }
    return this.clock.now();
  }

  /** The driver kept failing: the instance goes to error, with the reason in its event. */
  async giveUp(instanceId: string, error: unknown): Promise<void> {
    const row = await instances.findInstance(this.store.db, instanceId);
    if (!row || row.status === 'deleting') return;
    await this.settle(row, { status: 'error', operation: null, operation_at: null }, 'instance.error', {
      reason: 'driver_failure',
      message: String(error),
    });
  }

  private async step(row: InstanceRow, machine: MachineState): Promise<Step> {
    const spec = machineSpec(row);
    const operation = row.operation as InstanceOperation | null;
    const askedAt = Date.parse(row.operation_at ?? '1970-01-01T00:00:00Z');
    const bootedSinceAsked = machine.bootStartedAt !== null && machine.bootStartedAt.getTime() >= askedAt;

    switch (row.status) {
      case 'deleting':
        await this.driver.destroy(spec);
        // Lost to a concurrent write (the row changed since it was read): look again.
        return (await this.remove(row)) ? DONE : AGAIN;

      case 'starting':
        switch (machine.power) {
          case 'absent':
            await this.driver.provision(spec);
            return AGAIN;
          case 'off':
            if (machine.instanceType !== row.instance_type) await this.driver.resize(spec);
            else await this.driver.start(spec);
            return AGAIN;
          case 'failed':
            if (!bootedSinceAsked) {
              await this.driver.start(spec);
              return AGAIN;
            }
            return this.settle(
              row,
              { status: 'error', operation: null, operation_at: null },
              'instance.error',
              {
                reason: 'boot_failed',
              },
            );
          case 'running':
            return this.settle(
              row,
              { status: 'running', operation: null, operation_at: null },
              COMPLETION_EVENT[operation ?? 'start'],
              operation === 'resize' ? { instance_type: row.instance_type } : {},
            );
          default:
            return waitFor(machine);
        }

      case 'stopping':
        if (operation === 'restart') {
          if (machine.power === 'running' && !bootedSinceAsked) {
            await this.driver.reboot(spec);
            return AGAIN;
          }
          if (machine.power === 'stopping') return waitFor(machine);
          return this.advance(row, { status: 'starting' });
        }
        switch (machine.power) {
          case 'running':
          case 'booting':
            await this.driver.stop(spec, { force: false });
            return AGAIN;
          case 'stopping':
          case 'resizing':
            return waitFor(machine);
          default:
            if (operation === 'resize') return this.advance(row, { status: 'starting' });
            return this.settle(
              row,
              { status: 'stopped', operation: null, operation_at: null },
              'instance.stopped',
            );
        }

      case 'stopped':
        switch (machine.power) {
          case 'running':
          case 'booting':
          case 'stopping':
          case 'failed':
            // A forced stop: the status already says stopped; the machine follows at once.
            await this.driver.stop(spec, { force: true });
            return AGAIN;
          case 'resizing':
            return waitFor(machine);
          case 'off':
            if (machine.instanceType !== row.instance_type) {
              await this.driver.resize(spec);
              return AGAIN;
            }
            break;
        }
        if (operation === 'resize') {
          return this.settle(row, { operation: null, operation_at: null }, 'instance.resized', {
            instance_type: row.instance_type,
          });
        }
        return DONE;

      default:
        return DONE;
    }
  }

  /** A status change with more to do: written guarded by version, then the next step follows. */
  private async advance(row: InstanceRow, changes: instances.InstanceChanges): Promise<Step> {
    await instances.updateInstance(this.store.db, row, {
      ...changes,
      updated_at: this.clock.now().toISOString(),
    });
    return AGAIN;
  }

  /** The instance got where it was going: the status and its event, in one transaction. */
  private async settle(
    row: InstanceRow,
    changes: instances.InstanceChanges,
    event: string,
    eventData: Record<string, unknown> = {},
  ): Promise<Step> {
    const settled = await this.store.db.transaction().execute(async (trx) => {
      const next = await instances.updateInstance(trx, row, {
        ...changes,
        updated_at: this.clock.now().toISOString(),
      });
      if (next) await this.instanceService.recordInstanceEvent(trx, event, next, eventData);
      return next;
    });
    // Lost to a concurrent request: look again at what it left.
    return settled ? DONE : AGAIN;
  }

  /** Deletes the instance with its root volume, GPUs and event, if it is still as read; false if not. */
  private async remove(row: InstanceRow): Promise<boolean> {
    return this.store.db.transaction().execute(async (trx) => {
      if (!(await instances.deleteInstance(trx, row))) return false;
      await deleteRootVolume(trx, row.id);
      const gpus = typeOf(row.instance_type).gpu?.count ?? 0;
      if (gpus > 0) await instances.releaseGpus(trx, row.region, gpus);
      await this.instanceService.recordInstanceEvent(trx, COMPLETION_EVENT.delete, {
        ...row,
        status: 'deleted',
      });
      return true;
    });
  }
}
