/**
 * Snapshot events: their types and the shape of their data, added to the platform's catalogue
 * (platform/events/catalog.ts). What the record has is picked from it; snapshot.restored adds what it wrote.
 */
import { type Static, Type } from '@sinclair/typebox';
import { entry } from '../../platform/events/catalog.js';
import { SnapshotRecord } from './record.js';

const SnapshotEvent = Type.Object({
  snapshot_id: Type.String({ description: 'The snapshot' }),
  ...Type.Pick(SnapshotRecord, ['name']).properties,
  status: Type.String({ description: 'The snapshot status after the change (`deleted` once gone)' }),
  ...Type.Partial(Type.Pick(SnapshotRecord, ['kind', 'source_volume_id', 'source_instance_id', 'size_gb']))
    .properties,
  error: Type.Optional(SnapshotRecord.properties.error),
  volume_id: Type.Optional(
    Type.String({
      description: 'snapshot.restored: the volume written (new, overwritten, or a root volume)',
    }),
  ),
  instance_id: Type.Optional(
    Type.Union([Type.String(), Type.Null()], {
      description: 'snapshot.restored: the instance whose root disk was restored',
    }),
  ),
});

/** The data every snapshot event carries; the rest is per type. */
export type SnapshotEventData = Static<typeof SnapshotEvent>;

export const SNAPSHOT_EVENTS = {
  'snapshot.created': entry('A snapshot was asked for', SnapshotEvent),
  'snapshot.completed': entry('A snapshot is available', SnapshotEvent),
  'snapshot.failed': entry('A snapshot failed', SnapshotEvent),
  'snapshot.deleted': entry('A snapshot is gone', SnapshotEvent),
  'snapshot.restored': entry('A snapshot was restored', SnapshotEvent),
};

type SnapshotEvents = typeof SNAPSHOT_EVENTS;
declare module '../../platform/events/catalog.js' {
  interface EventCatalog extends SnapshotEvents {}
}
