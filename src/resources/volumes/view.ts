/** How a volume looks to users: its record without what stays in the server (docs/api.md, Volumes). */
import { type Static, Type } from '@sinclair/typebox';
import { viewOf } from '../../platform/http/view-of.js';
import { VolumeRecord } from './record.js';

// Made again as an object of its own, so its $id and title come first as in every other schema.
export const VolumeView = Type.Object(
  Type.Omit(VolumeRecord, [
    'account_id',
    'pending_action',
    'restore_snapshot_id',
    'restore_started_at',
    'version',
  ]).properties,
  { $id: 'Volume', title: 'Volume' },
);
export type VolumeView = Static<typeof VolumeView>;
export const volumeView = viewOf(VolumeView);

/** A volume as an instance's answer lists it. */
const AttachedVolumeView = Type.Pick(VolumeRecord, [
  'id',
  'name',
  'device_name',
  'size_gb',
  'kind',
  'status',
]);
export type AttachedVolumeView = Static<typeof AttachedVolumeView>;
export const attachedVolumeView = viewOf(AttachedVolumeView);
