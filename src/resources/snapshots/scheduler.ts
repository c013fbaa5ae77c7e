/**
 * The snapshot scheduler: makes the scheduled snapshots of backup schedules on time, and keeps only the
 * newest `retention` of each.
 *
 * How it works. It is one durable job of the job runner (`snapshot-schedules:due`), so across replicas
 * one process runs it at a time (the runner's lease), and a restart finds it where it was left. A run
 * reads the schedules due now from the `next_due_at` index (never the schedules that are not due), and
 * for each takes its slot with a guarded update — `next_due_at` moves from the value read to the first
 * slot after now, only if nobody moved it since — and makes the snapshot in that same transaction. So a
 * slot makes one snapshot however many processes look at it, and a schedule that missed several slots
 * while the server was down makes one snapshot, then waits for the next slot in the future. The run
 * then asks to be woken at the earliest `next_due_at` (the first entry of the index); a schedule that is
 * set or changed wakes it at once.
 *
 * Cost: the due schedules of one read (up to 100) are taken in one transaction, one commit for all of
 * them (on SQLite a commit is an fsync, and it dominates). Each slot's snapshot is made under a
 * savepoint: a source that fails to copy is rolled back alone, its slot still taken (skipped), so one
 * bad source never holds up the others nor makes them run twice.
 *
 * Retention is a job per schedule (`snapshot-retention:<source id>`), enqueued with each scheduled
 * snapshot: once no scheduled snapshot of the source is still being made, it deletes those past the
 * newest `retention` (snapshots.ts `prune`).
 */
import { sql } from 'kysely';
import type { Clock } from '../../platform/domain/clock.js';
import type { JobHandler, JobRunner } from '../../platform/jobs/runner.js';
import type { Lifecycle } from '../../platform/lifecycle/lifecycle.js';
import type { Store } from '../../platform/store/db.js';
import { nextSlot } from '../volumes/backup-schedule.js';
import { dueSchedules, earliestDue, findSchedule, takeSlot } from '../volumes/backup-schedule-store.js';
import type { SnapshotService } from './service.js';

export const RETENTION_JOB = 'snapshot-retention';

/** Due schedules read per query, and queries per run before yielding to other jobs. */
const BATCH = 100;
const BATCHES_PER_RUN = 10;
/** How long retention waits before looking again while a scheduled snapshot is still being made. */
const RETENTION_RECHECK_MS = 30_000;

export class SnapshotScheduler implements JobHandler {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly jobs: JobRunner,
    private readonly lifecycle: Lifecycle,
    private readonly snapshots: SnapshotService,
    /** Told of a slot whose snapshot could not be made (the slot is skipped); by default nobody is. */
    private readonly onError: (error: unknown, sourceId: string) => void = () => {},
  ) {}

  /** The retention job of a schedule (RETENTION_JOB, subject: the schedule's source). */
  readonly retention: JobHandler = {
    run: async (sourceId) => {
      const schedule = await findSchedule(this.store.db, sourceId);
      if (!schedule) return null;
      if (await this.snapshots.prune(schedule)) return null;
      return new Date(this.clock.now().getTime() + RETENTION_RECHECK_MS);
    },
    giveUp: async () => {},
  };

  /** One run: every schedule due now makes its snapshot; returns when the next one is due. */
  async run(): Promise<Date | null> {
    const now = this.clock.now();
    for (let batch = 0; batch < BATCHES_PER_RUN; batch++) {
      const due = await dueSchedules(this.store.db, now, BATCH);
      // A transaction of the lifecycle core: the runner is woken once it commits, if anything was enqueued.
      await this.lifecycle.transaction(async (ctx) => {
        const trx = ctx.trx;
        const room = new Map<string, number>();
        for (const schedule of due) {
          if (!(await takeSlot(trx, schedule, nextSlot(schedule.source_id, schedule.frequency, now))))
            continue;
          await sql`savepoint scheduled_slot`.execute(trx);
          try {
            const slot = new Date(schedule.next_due_at);
            // A slot's writes hold nothing back in the context (no quota claim, no counts), so a
            // rollback to the savepoint leaves nothing of them to write at the end.
            const snapshot = await this.snapshots.createScheduled(ctx, schedule, slot, room);
            if (snapshot) await this.jobs.enqueue(trx, RETENTION_JOB, schedule.source_id);
            await sql`release savepoint scheduled_slot`.execute(trx);
          } catch (error) {
            await sql`rollback to savepoint scheduled_slot`.execute(trx);
            await sql`release savepoint scheduled_slot`.execute(trx);
            this.onError(error, schedule.source_id);
          }
        }
      });
      if (due.length < BATCH) break;
      // Many due at once: yield, and come straight back for the rest.
      if (batch === BATCHES_PER_RUN - 1) return now;
    }
    return earliestDue(this.store.db);
  }

  async giveUp(): Promise<void> {}
}
