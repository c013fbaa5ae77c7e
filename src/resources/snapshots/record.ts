/**
 * The snapshot as the services see it, and the pure rules of snapshots and backup schedules: which
 * slot a schedule is due at next.
 */
import type { BackupSchedule } from '../instances/record.js';
import type { SnapshotStatus } from './states.js';

export const SNAPSHOT_KINDS = ['manual', 'scheduled'] as const;
export type SnapshotKind = (typeof SNAPSHOT_KINDS)[number];

export const SNAPSHOT_SORTS = ['created_at', 'name', 'size_gb'] as const;
export type SnapshotSort = (typeof SNAPSHOT_SORTS)[number];

/** Timestamps are ISO 8601 UTC strings, as every record of the store carries them. */
export interface Snapshot {
  id: string;
  account_id: string;
  name: string;
  /** The volume it was taken of; kept after that volume is deleted (a snapshot outlives its source). */
  source_volume_id: string;
  /** Set when the source is an instance's root volume: that instance. */
  source_instance_id: string | null;
  size_gb: number;
  region: string;
  status: SnapshotStatus;
  kind: SnapshotKind;
  /** Why it failed; null otherwise. */
  error: string | null;
  tags: Record<string, string>;
  version: number;
  created_at: string;
  completed_at: string | null;
  updated_at: string;
}

export type SnapshotChanges = Partial<
  Omit<
    Snapshot,
    | 'id'
    | 'account_id'
    | 'source_volume_id'
    | 'source_instance_id'
    | 'region'
    | 'kind'
    | 'version'
    | 'created_at'
  >
>;

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

/** How a scheduled snapshot is named: the source's name and the slot's time. */
export function scheduledName(sourceName: string, at: Date): string {
  const stamp = at.toISOString().slice(0, 16).replace(/[-:]/g, '').replace('T', '-');
  return `${sourceName.slice(0, 44)}-auto-${stamp}`;
}
