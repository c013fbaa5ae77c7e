/**
 * The snapshot as the services see it, and the pure rules of snapshots: how a scheduled one is named (the
 * schedules themselves belong to volumes: resources/volumes/backup-schedule.ts).
 */
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

/** How a scheduled snapshot is named: the source's name and the slot's time. */
export function scheduledName(sourceName: string, at: Date): string {
  const stamp = at.toISOString().slice(0, 16).replace(/[-:]/g, '').replace('T', '-');
  return `${sourceName.slice(0, 44)}-auto-${stamp}`;
}
