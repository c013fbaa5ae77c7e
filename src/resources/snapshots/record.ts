/**
 * The snapshot as the services see it, and the pure rules of snapshots: how a scheduled one is named (the
 * schedules themselves belong to volumes: resources/volumes/backup-schedule.ts).
 */
import { type Static, Type } from '@sinclair/typebox';
import { Nullable, StringEnum, Timestamp } from '../../platform/http/schemas.js';
import { SNAPSHOT_STATUSES } from './states.js';

export const SNAPSHOT_KINDS = ['manual', 'scheduled'] as const;
export type SnapshotKind = (typeof SNAPSHOT_KINDS)[number];

export const SNAPSHOT_SORTS = ['created_at', 'name', 'size_gb'] as const;
export type SnapshotSort = (typeof SNAPSHOT_SORTS)[number];

/**
 * The snapshot record: the one declaration of its fields. The store's columns and decoding
 * (resources/snapshots/store.ts) and the API view (resources/snapshots/view.ts: this minus what stays in
 * the server) follow from it. Timestamps are ISO 8601 UTC strings, as every record of the store carries them.
 */
export const SnapshotRecord = Type.Object({
  id: Type.String(),
  account_id: Type.String(),
  name: Type.String(),
  source_volume_id: Type.String({
    description: 'The volume it was taken of (kept after that volume is deleted)',
  }),
  source_instance_id: Nullable(
    Type.String({ description: 'Set when the source is the root volume of this instance' }),
  ),
  size_gb: Type.Integer({ description: 'The size of the source when it was taken' }),
  region: Type.String(),
  status: StringEnum(SNAPSHOT_STATUSES),
  kind: StringEnum(SNAPSHOT_KINDS, {
    description: '`manual`: asked for; `scheduled`: made by a backup schedule (retention deletes old ones)',
  }),
  error: Nullable(Type.String({ description: 'Why it failed (status `failed`)' })),
  tags: Type.Record(Type.String(), Type.String()),
  /** Bumped by every write; writers guard on it so two of them cannot both win. */
  version: Type.Integer(),
  created_at: Timestamp,
  completed_at: Nullable({ ...Timestamp, description: 'When it became available or failed' }),
  updated_at: Timestamp,
});
export type Snapshot = Static<typeof SnapshotRecord>;

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
