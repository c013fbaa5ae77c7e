/**
 * The data transfer collector: every NIMBUS_METRICS_INTERVAL_SECONDS it reads the driver's public
 * transfer counters (ComputeDriver.publicTransfer) of every instance whose machine may be up, and counts
 * what they grew by (resources/billing/transfer.ts, transfer-store.ts).
 *
 * It is one durable job (`billing-transfer:all`) of its own, not part of the metrics collector's round:
 * that one samples only instances with monitoring on, and every instance pays for its traffic. Across
 * replicas one process collects at a time (the runner's lease). Each page of instances is read from the
 * driver and then counted in one transaction with the new bases, so a crash between the two counts
 * nothing of the page, and the next round's reading carries its bytes; no byte is counted twice.
 *
 * A driver without the port (or with nothing to count) bills no data transfer.
 */
import type { ComputeDriver, MachineSpec } from '../../drivers/driver.js';
import type { Clock } from '../../platform/domain/clock.js';
import type { JobHandler, JobRunner } from '../../platform/jobs/runner.js';
import type { Store } from '../../platform/store/db.js';
import { instanceTypeNamed } from '../catalog/catalog.js';
import { recordTransfer, type TransferInstance } from './transfer-store.js';

export const TRANSFER_JOB = { kind: 'billing-transfer', subject: 'all' } as const;

/** Instances read from the driver and counted (one transaction) at a time. */
const PAGE = 500;
/** Bases of instances that are gone are forgotten once this old. */
const FORGET_AFTER_MS = 86_400_000;

export interface TransferCollectorOptions {
  intervalMs: number;
  /** Told of a page whose counters could not be read or counted; the round goes on without it. */
  onError?: (error: unknown) => void;
}

interface InstanceRow extends TransferInstance {
  instance_type: string;
  image: string;
  tags: string;
}

export class TransferCollector implements JobHandler {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly jobs: JobRunner,
    private readonly driver: ComputeDriver,
    private readonly options: TransferCollectorOptions,
  ) {}

  /** Makes sure the job exists (every process asks; the job is one row). */
  async start(): Promise<void> {
    if (!this.driver.publicTransfer) return;
    await this.jobs.enqueue(this.store.db, TRANSFER_JOB.kind, TRANSFER_JOB.subject);
    this.jobs.wake();
  }

  /** Never lets the job end for a passing failure: it starts again at the next tick. */
  async giveUp(): Promise<void> {
    await this.start();
  }

  /** One round; returns when the next one is due. */
  async run(): Promise<Date | null> {
    if (!this.driver.publicTransfer) return null;
    const interval = this.options.intervalMs;
    const at = this.clock.now();
    let after = '';
    for (;;) {
      const page = await this.instancesAfter(after);
      if (page.length === 0) break;
      try {
        await this.countPage(page, at);
      } catch (error) {
        this.options.onError?.(error);
      }
      after = (page.at(-1) as InstanceRow).id;
      if (page.length < PAGE) break;
    }
    await this.forgetGone(at);
    return new Date((Math.floor(at.getTime() / interval) + 1) * interval);
  }

  /** Counts what the driver says of one page, in one transaction. */
  private async countPage(page: InstanceRow[], at: Date): Promise<void> {
    const readings = await this.driver.publicTransfer!(page.map(specOf));
    const counted = page.flatMap((instance) => {
      const reading = readings.get(instance.id);
      return reading ? [{ instance, reading }] : [];
    });
    if (counted.length === 0) return;
    await this.store.db.transaction().execute((trx) => recordTransfer(trx, counted, at));
  }

  /** Instances whose machine may be up (a stopping one still counts its last bytes). */
  private instancesAfter(after: string): Promise<InstanceRow[]> {
    return this.store.db
      .selectFrom('instances')
      .select(['id', 'account_id', 'name', 'region', 'instance_type', 'image', 'tags'])
      .where('status', 'in', ['starting', 'running', 'stopping'])
      .where('id', '>', after)
      .orderBy('id')
      .limit(PAGE)
      .execute();
  }

  /** Bases of deleted instances (their counted bytes stay). */
  private async forgetGone(at: Date): Promise<void> {
    const before = new Date(at.getTime() - FORGET_AFTER_MS).toISOString();
    await this.store.db
      .deleteFrom('transfer_counters')
      .where('read_at', '<', before)
      .where(({ not, exists, selectFrom }) =>
        not(
          exists(
            selectFrom('instances')
              .select('instances.id')
              .whereRef('instances.id', '=', 'transfer_counters.resource_id'),
          ),
        ),
      )
      .execute();
  }
}

function specOf(instance: InstanceRow): MachineSpec {
  return {
    id: instance.id,
    instanceType: instanceTypeNamed(instance.instance_type),
    image: instance.image,
    region: instance.region,
    userData: null,
    tags: JSON.parse(instance.tags) as Record<string, string>,
  };
}
