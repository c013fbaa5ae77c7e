/**
 * Backup schedules: a data volume, or an instance for its root volume, can ask for scheduled snapshots
 * (`backup_schedule`). The schedule belongs to the volume side; the snapshot scheduler
 * (resources/snapshots/scheduler.ts) reads the due ones and makes the snapshots. These are its pure
 * rules: the frequencies and retention a schedule takes, and which slot it is due at next.
 */

export const BACKUP_FREQUENCIES = ['hourly', 'daily', 'weekly'] as const;
export const BACKUP_RETENTION = { min: 1, max: 90 } as const;

export interface BackupSchedule {
  frequency: (typeof BACKUP_FREQUENCIES)[number];
  retention: number;
}

/** What a backup schedule belongs to. */
export type ScheduleSource = 'volume' | 'instance';

const HOUR_MS = 3_600_000;
export const SCHEDULE_PERIOD_MS: Record<BackupSchedule['frequency'], number> = {
  hourly: HOUR_MS,
  daily: 24 * HOUR_MS,
  weekly: 7 * 24 * HOUR_MS,
};

/**
 * Where in its period a source's snapshots are taken: a fixed offset derived from the source id (FNV-1a),
 * so schedules spread over the period instead of all firing on the hour, and one source always fires at
 * the same minute of its period.
 */
export function scheduleOffsetMs(sourceId: string, frequency: BackupSchedule['frequency']): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < sourceId.length; i++) {
    hash ^= sourceId.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  const minutes = SCHEDULE_PERIOD_MS[frequency] / 60_000;
  return (hash % minutes) * 60_000;
}

/**
 * The first slot of the schedule strictly after `after`: slots are `offset + k × period` from the Unix
 * epoch. A schedule that missed slots (the server was down) is due once, at the slot it missed, and
 * then moves here: past the present, so missed slots are never made up one by one.
 */
export function nextSlot(sourceId: string, frequency: BackupSchedule['frequency'], after: Date): Date {
  const period = SCHEDULE_PERIOD_MS[frequency];
  const offset = scheduleOffsetMs(sourceId, frequency);
  const k = Math.floor((after.getTime() - offset) / period) + 1;
  return new Date(offset + k * period);
}
