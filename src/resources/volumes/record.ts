/**
 * The volume as the services see it (the store's record, decoded), and the pure rules of volumes:
 * sizes, device names, and what a new root volume looks like.
 */
import type { BackupSchedule } from './backup-schedule.js';
import type { VolumeStatus } from './states.js';

export const VOLUME_KINDS = ['data', 'root'] as const;
export type VolumeKind = (typeof VOLUME_KINDS)[number];

export const FILESYSTEMS = ['ext4', 'xfs'] as const;
export type Filesystem = (typeof FILESYSTEMS)[number];

export const VOLUME_SIZE_GB = { min: 1, max: 16_384 } as const;
export const VOLUME_SORTS = ['created_at', 'name', 'size_gb'] as const;
export type VolumeSort = (typeof VOLUME_SORTS)[number];

/** A change queued behind the one in progress: attach once created, detach once resized. */
export type PendingAction = 'attach' | 'detach';

/** Timestamps are ISO 8601 UTC strings, as every record of the store carries them. */
export interface Volume {
  id: string;
  account_id: string;
  name: string;
  region: string;
  size_gb: number;
  status: VolumeStatus;
  kind: VolumeKind;
  /** The instance it is attached to, attaching to, or will attach to once created. */
  instance_id: string | null;
  /** Its device on that instance (`/dev/vdb`…), held from the attach request until detached. */
  device_name: string | null;
  attached_at: string | null;
  filesystem: Filesystem | null;
  tags: Record<string, string>;
  pending_action: PendingAction | null;
  /** Scheduled snapshots of a data volume (a root volume follows its instance's schedule). */
  backup_schedule: BackupSchedule | null;
  /** The snapshot being written into the volume: restoring, or created from it. */
  restore_snapshot_id: string | null;
  /** When that restore was asked for; with the volume id, it names the restore to the driver. */
  restore_started_at: string | null;
  /** Bumped by every write; writers guard on it so two of them cannot both win. */
  version: number;
  created_at: string;
  updated_at: string;
}

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

/** The root volume an instance is created with: attached from the start, sized by its type. */
export function newRootVolume(fields: {
  id: string;
  accountId: string;
  instanceId: string;
  instanceName: string;
  region: string;
  sizeGb: number;
  at: string;
}): Volume {
  return {
    id: fields.id,
    account_id: fields.accountId,
    name: `${fields.instanceName}-root`,
    region: fields.region,
    size_gb: fields.sizeGb,
    status: 'in-use',
    kind: 'root',
    instance_id: fields.instanceId,
    device_name: ROOT_DEVICE,
    attached_at: fields.at,
    filesystem: null,
    tags: {},
    pending_action: null,
    backup_schedule: null,
    restore_snapshot_id: null,
    restore_started_at: null,
    version: 1,
    created_at: fields.at,
    updated_at: fields.at,
  };
}
