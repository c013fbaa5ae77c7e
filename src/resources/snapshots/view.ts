/** How a snapshot looks to users: its record without what stays in the server (docs/api.md, Snapshots). */
import { type Static, Type } from '@sinclair/typebox';
import { viewOf } from '../../platform/http/view-of.js';
import { SnapshotRecord } from './record.js';

// Made again as an object of its own, so its $id and title come first as in every other schema.
export const SnapshotView = Type.Object(
  Type.Omit(SnapshotRecord, ['account_id', 'version', 'updated_at']).properties,
  { $id: 'Snapshot', title: 'Snapshot' },
);
export type SnapshotView = Static<typeof SnapshotView>;
export const snapshotView = viewOf(SnapshotView);
