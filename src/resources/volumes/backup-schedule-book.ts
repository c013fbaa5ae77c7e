/**
 * Backup schedules as the volume and instance services keep them: the source's `backup_schedule` field
 * is mirrored into the indexed `backup_schedules` table in the same transaction, and the snapshot
 * scheduler's job (resources/snapshots/scheduler.ts) is told to look again, since the new slot may be
 * earlier than the one it waits for.
 */
import type { Clock } from '../../platform/domain/clock.js';
import type { JobRunner } from '../../platform/jobs/runner.js';
import type { Executor } from '../../platform/store/schema.js';
import { type BackupSchedule, nextSlot, type ScheduleSource } from './backup-schedule.js';
import { putSchedule, removeSchedule } from './backup-schedule-store.js';

/** The snapshot scheduler's one job: it runs when the earliest schedule is due. */
export const SCHEDULER_JOB = { kind: 'snapshot-schedules', subject: 'due' } as const;

export class BackupScheduleBook {
  constructor(
    private readonly clock: Clock,
    private readonly jobs: JobRunner,
  ) {}

  /** Sets the source's schedule (null removes it); its first slot is the next one after now. */
  async put(
    trx: Executor,
    source: { id: string; accountId: string; kind: ScheduleSource },
    schedule: BackupSchedule | null,
  ): Promise<void> {
    const now = this.clock.now();
    const next = schedule ? nextSlot(source.id, schedule.frequency, now) : null;
    await putSchedule(trx, source, schedule, next, now);
    if (schedule) await this.jobs.enqueue(trx, SCHEDULER_JOB.kind, SCHEDULER_JOB.subject);
  }

  async remove(trx: Executor, sourceId: string): Promise<void> {
    await removeSchedule(trx, sourceId);
  }
}
