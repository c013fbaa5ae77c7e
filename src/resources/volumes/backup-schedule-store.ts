/**
 * Backup schedules: one row per volume or instance that has one, kept in the same transactions as the
 * source's `backup_schedule`. The scheduler reads only due rows (`next_due_at` is indexed) and takes a
 * slot with a guarded update of `next_due_at`, so of two replicas reading the same due row one wins.
 */

import type { BackupScheduleRow, Executor } from '../../platform/store/schema.js';
import type { BackupSchedule, ScheduleSource } from './backup-schedule.js';

export interface DueSchedule {
  source_id: string;
  account_id: string;
  source_kind: ScheduleSource;
  frequency: BackupSchedule['frequency'];
  retention: number;
  next_due_at: string;
}

const decode = (row: BackupScheduleRow): DueSchedule => ({
  ...row,
  source_kind: row.source_kind as ScheduleSource,
  frequency: row.frequency as BackupSchedule['frequency'],
});

/** Sets (or with null removes) the source's schedule; `nextDueAt` is its first slot. */
export async function putSchedule(
  db: Executor,
  source: { id: string; accountId: string; kind: ScheduleSource },
  schedule: BackupSchedule | null,
  nextDueAt: Date | null,
  now: Date,
): Promise<void> {
  if (schedule === null || nextDueAt === null) {
    await removeSchedule(db, source.id);
    return;
  }
  await db
    .insertInto('backup_schedules')
    .values({
      source_id: source.id,
      account_id: source.accountId,
      source_kind: source.kind,
      frequency: schedule.frequency,
      retention: schedule.retention,
      next_due_at: nextDueAt.toISOString(),
      created_at: now.toISOString(),
    })
    .onConflict((oc) =>
      oc.column('source_id').doUpdateSet({
        frequency: schedule.frequency,
        retention: schedule.retention,
        next_due_at: nextDueAt.toISOString(),
      }),
    )
    .execute();
}

export async function removeSchedule(db: Executor, sourceId: string): Promise<void> {
  await db.deleteFrom('backup_schedules').where('source_id', '=', sourceId).execute();
}

export async function findSchedule(db: Executor, sourceId: string): Promise<DueSchedule | undefined> {
  const row = await db
    .selectFrom('backup_schedules')
    .selectAll()
    .where('source_id', '=', sourceId)
    .executeTakeFirst();
  return row && decode(row);
}

/** Up to `limit` schedules due at `now`, earliest first: a range read of the next_due_at index. */
export async function dueSchedules(db: Executor, now: Date, limit: number): Promise<DueSchedule[]> {
  const rows = await db
    .selectFrom('backup_schedules')
    .selectAll()
    .where('next_due_at', '<=', now.toISOString())
    .orderBy('next_due_at')
    .orderBy('source_id')
    .limit(limit)
    .execute();
  return rows.map(decode);
}

/** The earliest slot of any schedule (the first entry of the index), or null when there are none. */
export async function earliestDue(db: Executor): Promise<Date | null> {
  const row = await db
    .selectFrom('backup_schedules')
    .select('next_due_at')
    .orderBy('next_due_at')
    .limit(1)
    .executeTakeFirst();
  return row ? new Date(row.next_due_at) : null;
}

/**
 * Takes the slot: moves the schedule from the `next_due_at` read to `next`, only if nobody moved it
 * since. True for exactly one of any number of concurrent callers.
 */
export async function takeSlot(db: Executor, schedule: DueSchedule, next: Date): Promise<boolean> {
  const updated = await db
    .updateTable('backup_schedules')
    .set({ next_due_at: next.toISOString() })
    .where('source_id', '=', schedule.source_id)
    .where('next_due_at', '=', schedule.next_due_at)
    .executeTakeFirst();
  return updated.numUpdatedRows > 0n;
}
