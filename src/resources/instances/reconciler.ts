/**
 * The instance reconciler: decides the one step that moves an instance from a transitional status
 * towards a settled one. The lifecycle core (platform/lifecycle/lifecycle.ts) runs it as the `instance` job and
 * carries out what it returns.
 *
 * Each step reads where the machine is (the driver's `inspect`), then either asks the driver for the one
 * thing that moves it on (provision, boot, shut down, reboot, resize, power off, destroy; a machine just
 * provisioned is booted in the same step) and looks again, or returns the write that records where the
 * machine got (with the operation's event), or the time the machine's current change should settle.
 * Every driver call is idempotent and every step is decided from the state found, so a run that is cut
 * short (kill -9) is simply run again, by this process or another replica.
 *
 * A machine that will not settle by itself (a simulated fault) ends the job; a PATCH of the instance's
 * tags, a forced stop or a delete enqueues it again. An instance created from a snapshot waits, powered
 * off, until its root disk is restored; the restore's end enqueues it again.
 */

import type { ComputeDriver, MachineSpec, MachineState } from '../../drivers/driver.js';
import type { Reconciler, Step } from '../../platform/lifecycle/lifecycle.js';
import type { InstanceEventData } from './events.js';
import { type InstanceEventType, machineSpec } from './kind.js';
import type { Instance, InstanceChanges } from './record.js';
import { COMPLETION_EVENT, type InstanceStatus } from './states.js';

type InstanceStep = Step<InstanceStatus, InstanceChanges, InstanceEventType>;

const AGAIN: InstanceStep = { next: 'again' };
const DONE: InstanceStep = { next: 'done' };
const waitFor = (machine: MachineState): InstanceStep => ({ next: 'wait', until: machine.settlesAt });
const SETTLED = { operation: null, operation_at: null } as const;

function settle(
  changes: InstanceChanges,
  type: InstanceEventType,
  data?: Partial<InstanceEventData>,
): InstanceStep {
  return { next: 'settle', changes, event: data ? { type, data } : { type } };
}

export class InstanceReconciler
  implements Reconciler<InstanceStatus, Instance, InstanceChanges, InstanceEventType>
{
  constructor(
    private readonly driver: ComputeDriver,
    /** Whether a snapshot is still being written over the instance's root disk (it boots once it is not). */
    private readonly rootRestoring: (instance: Instance) => Promise<boolean> = async () => false,
  ) {}

  /** The driver kept failing: the instance goes to error, with the reason in its event. */
  giveUp(instance: Instance, error: unknown): InstanceStep | null {
    if (instance.status === 'deleting') return null;
    return settle({ status: 'error', ...SETTLED }, 'instance.error', {
      reason: 'driver_failure',
      message: String(error),
    });
  }

  /** An instance to be started whose machine is off (of `machineType`): resize, wait for its root, or boot. */
  private async powerOn(
    instance: Instance,
    spec: MachineSpec,
    machineType: string | null,
  ): Promise<InstanceStep> {
    if (machineType !== instance.instance_type) await this.driver.resize(spec);
    else if (await this.rootRestoring(instance)) {
      // Created from a snapshot: the restore's end enqueues this job again.
      return { next: 'wait', until: null };
    } else await this.driver.start(spec);
    return AGAIN;
  }

  async step(instance: Instance): Promise<InstanceStep> {
    const spec = machineSpec(instance);
    const machine = await this.driver.inspect(spec);
    const operation = instance.operation;
    const askedAt = Date.parse(instance.operation_at ?? '1970-01-01T00:00:00Z');
    const bootedSinceAsked = machine.bootStartedAt !== null && machine.bootStartedAt.getTime() >= askedAt;

    switch (instance.status) {
      case 'deleting':
        await this.driver.destroy(spec);
        return { next: 'remove', event: { type: COMPLETION_EVENT.delete, data: { status: 'deleted' } } };

      case 'starting':
        switch (machine.power) {
          case 'absent':
            // A machine is provisioned powered off, of the instance's type: it boots in the same step
            // instead of one more look (both calls are idempotent, so a run cut short is run again).
            await this.driver.provision(spec);
            return this.powerOn(instance, spec, instance.instance_type);
          case 'off':
            return this.powerOn(instance, spec, machine.instanceType);
          case 'failed':
            if (!bootedSinceAsked) {
              await this.driver.start(spec);
              return AGAIN;
            }
            return settle({ status: 'error', ...SETTLED }, 'instance.error', { reason: 'boot_failed' });
          case 'running':
            return settle(
              { status: 'running', ...SETTLED },
              COMPLETION_EVENT[operation ?? 'start'],
              operation === 'resize' ? { instance_type: instance.instance_type } : undefined,
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
          return { next: 'advance', changes: { status: 'starting' } };
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
            if (operation === 'resize') return { next: 'advance', changes: { status: 'starting' } };
            return settle({ status: 'stopped', ...SETTLED }, 'instance.stopped');
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
            if (machine.instanceType !== instance.instance_type) {
              await this.driver.resize(spec);
              return AGAIN;
            }
            break;
        }
        if (operation === 'resize') {
          return settle(SETTLED, 'instance.resized', { instance_type: instance.instance_type });
        }
        return DONE;

      case 'running':
        // A machine that went away by itself (a real driver notices and asks for this look): a guest that
        // powered itself off is stopped; a VM that died (killed, crashed) is an error, with the driver's reason.
        if (machine.power === 'off') {
          return settle({ status: 'stopped', ...SETTLED }, 'instance.stopped', { reason: 'guest_shutdown' });
        }
        if (machine.power === 'failed' || machine.power === 'absent') {
          return settle({ status: 'error', ...SETTLED }, 'instance.error', {
            reason: 'machine_exited',
            message: machine.failure ?? 'the machine is gone',
          });
        }
        return DONE;

      default:
        return DONE;
    }
  }
}
