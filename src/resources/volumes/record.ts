/**
 * The volume as the services see it (the store's record, decoded), and the pure rules of volumes:
 * sizes, device names, and what a new volume and a new root volume look like.
 */
import { type Static, Type } from '@sinclair/typebox';
import { type Protected, Protection, UNPROTECTED } from '../../platform/domain/protection.js';
import { Nullable, StringEnum, Timestamp } from '../../platform/http/schemas.js';
import type { BackupSchedule } from './backup-schedule.js';
import { VOLUME_STATUSES } from './states.js';

export const VOLUME_KINDS = ['data', 'root'] as const;
export type VolumeKind = (typeof VOLUME_KINDS)[number];

export const FILESYSTEMS = ['ext4', 'xfs'] as const;
export type Filesystem = (typeof FILESYSTEMS)[number];

export const VOLUME_SIZE_GB = { min: 1, max: 16_384 } as const;
export const VOLUME_SORTS = ['created_at', 'name', 'size_gb'] as const;
export type VolumeSort = (typeof VOLUME_SORTS)[number];

/** A change queued behind the one in progress: attach once created, detach once resized. */
export const PENDING_ACTIONS = ['attach', 'detach'] as const;
export type PendingAction = (typeof PENDING_ACTIONS)[number];

/**
 * The volume record: the one declaration of its fields. The store's columns and decoding
 * (resources/volumes/store.ts), the API view (resources/volumes/view.ts: this minus what stays in the
 * server) and its descriptions follow from it. Timestamps are ISO 8601 UTC strings, as every record of
 * the store carries them.
 */
export const VolumeRecord = Type.Object({
  id: Type.String(),
  account_id: Type.String(),
  name: Type.String(),
  size_gb: Type.Integer(),
  region: Type.String(),
  status: StringEnum(VOLUME_STATUSES),
  kind: StringEnum(VOLUME_KINDS, {
    description: '`root`: the disk of an instance; `data`: a volume of its own',
  }),
  // Also the instance it will attach to once created (pending_action `attach`).
  instance_id: Nullable(Type.String({ description: 'The instance it is attached (or attaching) to' })),
  attached_at: Nullable(Timestamp),
  // Held from the attach request until detached.
  device_name: Nullable(
    Type.String({
      description: 'Its device on the instance (`/dev/vda` root, `/dev/vdb`… data), stable while attached',
    }),
  ),
  filesystem: Nullable(StringEnum(FILESYSTEMS)),
  tags: Type.Record(Type.String(), Type.String()),
  // The frequencies are checked where a schedule comes in (routes.ts `BackupSchedule`).
  backup_schedule: Nullable(
    Type.Unsafe<BackupSchedule>(
      Type.Object(
        { frequency: Type.String(), retention: Type.Integer() },
        { description: 'Scheduled snapshots (data volumes; a root volume follows its instance)' },
      ),
    ),
  ),
  pending_action: Nullable(StringEnum(PENDING_ACTIONS)),
  protection: Protection,
  /** The snapshot being written into the volume: restoring, or created from it. */
  restore_snapshot_id: Nullable(Type.String()),
  /** When that restore was asked for; with the volume id, it names the restore to the driver. */
  restore_started_at: Nullable(Timestamp),
  /** Bumped by every write; writers guard on it so two of them cannot both win. */
  version: Type.Integer(),
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type Volume = Static<typeof VolumeRecord>;

/** The volume as a refused delete names it (platform/domain/protection.ts). */
export const protectedVolume = (id: string): Protected => ({
  label: 'Volume',
  resource: 'volume',
  id,
  path: '/v1/volumes',
});

export type VolumeChanges = Partial<
  Omit<Volume, 'id' | 'account_id' | 'region' | 'kind' | 'version' | 'created_at'>
>;

/** The root disk is always the first virtio disk. */
export const ROOT_DEVICE = '/dev/vda';

/** Data volumes per instance: /dev/vdb to /dev/vdq. */
export const MAX_DATA_VOLUMES_PER_INSTANCE = 16;

/** The data devices in the order they are handed out. */
export const DATA_DEVICES: readonly string[] = Array.from(
  { length: MAX_DATA_VOLUMES_PER_INSTANCE },
  (_, i) => `/dev/vd${String.fromCharCode('b'.charCodeAt(0) + i)}`,
);

/**
 * The first data device not in `used`, or null when all 16 are taken. A device keeps its name while its
 * volume stays attached, so a freed name is reused only by a later attach.
 */
export function lowestFreeDevice(used: Iterable<string | null>): string | null {
  const taken = new Set(used);
  return DATA_DEVICES.find((device) => !taken.has(device)) ?? null;
}

/** What a new volume is given; the rest starts empty: detached, unformatted, untagged, no restore. */
export type NewVolumeFields = Pick<
  Volume,
  'id' | 'account_id' | 'name' | 'region' | 'size_gb' | 'status' | 'kind'
> &
  Partial<
    Pick<
      Volume,
      | 'instance_id'
      | 'device_name'
      | 'attached_at'
      | 'filesystem'
      | 'tags'
      | 'pending_action'
      | 'backup_schedule'
      | 'restore_snapshot_id'
      | 'restore_started_at'
      | 'protection'
    >
  >;

/** The record of a volume made at `at`: a data volume's create, a restore's new volume, a root volume. */
export function newVolume(fields: NewVolumeFields, at: string): Volume {
  return {
    instance_id: null,
    device_name: null,
    attached_at: null,
    filesystem: null,
    tags: {},
    pending_action: null,
    backup_schedule: null,
    restore_snapshot_id: null,
    restore_started_at: null,
    protection: UNPROTECTED,
    ...fields,
    version: 1,
    created_at: at,
    updated_at: at,
  };
}

/**
 * The root volume an instance is created with: attached from the start, sized by its type; restoring
 * when the instance boots from a snapshot.
 */
export function newRootVolume(fields: {
  id: string;
  accountId: string;
  instanceId: string;
  instanceName: string;
  region: string;
  sizeGb: number;
  at: string;
  restoreSnapshotId?: string | undefined;
}): Volume {
  const restoring = fields.restoreSnapshotId !== undefined;
  return newVolume(
    {
      id: fields.id,
      account_id: fields.accountId,
      name: `${fields.instanceName}-root`,
      region: fields.region,
      size_gb: fields.sizeGb,
      status: restoring ? 'restoring' : 'in-use',
      kind: 'root',
      instance_id: fields.instanceId,
      device_name: ROOT_DEVICE,
      attached_at: fields.at,
      ...(restoring ? { restore_snapshot_id: fields.restoreSnapshotId, restore_started_at: fields.at } : {}),
    },
    fields.at,
  );
}
