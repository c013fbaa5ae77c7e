/**
 * Instance events: their types and the shape of their data, added to the platform's catalogue
 * (platform/events/catalog.ts). What the record has is picked from it; the rest is what a change says.
 */
import { type Static, Type } from '@sinclair/typebox';
import { entry } from '../../platform/events/catalog.js';
import { InstanceRecord } from './record.js';

const InstanceEvent = Type.Object(
  {
    instance_id: Type.String({ description: 'The instance' }),
    ...Type.Pick(InstanceRecord, ['name']).properties,
    // Not the record's status: an event also says `deleted`, which no record is.
    status: Type.String({ description: 'The instance status after the change (`deleted` once gone)' }),
    forced: Type.Optional(Type.Boolean({ description: 'instance.stopped: a forced stop' })),
    changed: Type.Optional(
      Type.Array(Type.String(), { description: 'instance.updated: the fields changed' }),
    ),
    instance_type: Type.Optional(Type.String({ description: 'instance.resized: the new type' })),
    reason: Type.Optional(Type.String({ description: 'instance.error: why (boot_failed, driver_failure)' })),
    message: Type.Optional(Type.String()),
  },
  { additionalProperties: false },
);

/** The data every instance event carries; the rest is per type. */
export type InstanceEventData = Static<typeof InstanceEvent>;

export const INSTANCE_EVENTS = {
  'instance.created': entry('An instance was created; it is starting', InstanceEvent),
  'instance.started': entry('An instance finished booting and is running', InstanceEvent),
  'instance.stopped': entry('An instance stopped (gracefully, or forced)', InstanceEvent),
  'instance.restarted': entry('An instance finished a restart and is running', InstanceEvent),
  'instance.resized': entry('An instance has its new type', InstanceEvent),
  'instance.updated': entry('An instance’s name, tags, monitoring or backup schedule changed', InstanceEvent),
  'instance.deleted': entry('An instance and its root volume are gone', InstanceEvent),
  'instance.error': entry('An instance failed (boot failure, or the driver kept failing)', InstanceEvent),
};

type InstanceEvents = typeof INSTANCE_EVENTS;
declare module '../../platform/events/catalog.js' {
  interface EventCatalog extends InstanceEvents {}
}
