/**
 * Volume events: their types and the shape of their data, added to the platform's catalogue
 * (platform/events/catalog.ts). Every field but the id and the status is the record's own (optional:
 * what the kind's `eventData` sends).
 */
import { type Static, Type } from '@sinclair/typebox';
import { entry } from '../../platform/events/catalog.js';
import { VolumeRecord } from './record.js';

const VolumeEvent = Type.Object({
  volume_id: Type.String({ description: 'The volume' }),
  ...Type.Pick(VolumeRecord, ['name']).properties,
  status: Type.String(),
  // volume.detached: the instance it left.
  ...Type.Partial(Type.Pick(VolumeRecord, ['instance_id', 'size_gb', 'device_name', 'kind'])).properties,
});

/** The data every volume event carries. */
export type VolumeEventData = Static<typeof VolumeEvent>;

export const VOLUME_EVENTS = {
  'volume.created': entry('A volume was created', VolumeEvent),
  'volume.attached': entry('A volume was attached to an instance', VolumeEvent),
  'volume.detached': entry('A volume was detached', VolumeEvent),
  'volume.resized': entry('A volume grew', VolumeEvent),
  'volume.deleted': entry('A volume is gone', VolumeEvent),
};

type VolumeEvents = typeof VOLUME_EVENTS;
declare module '../../platform/events/catalog.js' {
  interface EventCatalog extends VolumeEvents {}
}
