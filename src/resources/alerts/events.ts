/**
 * Alert events: their types and the shape of their data, added to the platform's catalogue
 * (platform/events/catalog.ts). Written here until alert policies and incidents have a TypeBox record to pick them from.
 */
import { Type } from '@sinclair/typebox';
import { entry } from '../../platform/events/catalog.js';

const id = (description: string) => Type.String({ description });
const nullableId = (description: string) => Type.Union([Type.String(), Type.Null()], { description });
const nullableNumber = (description: string) => Type.Union([Type.Number(), Type.Null()], { description });

const AlertEvent = Type.Object({
  alert_id: id('The alert policy'),
  incident_id: nullableId('The incident (null on a test notification)'),
  name: Type.String({ description: 'The policy name' }),
  instance_id: nullableId('The instance (null on a test notification)'),
  instance_name: Type.Union([Type.String(), Type.Null()]),
  metric: Type.Union([Type.String(), Type.Null()], { description: 'A metric policy: the metric watched' }),
  compare: Type.Union([Type.String(), Type.Null()], { description: '`above` or `below`' }),
  state: Type.Union([Type.String(), Type.Null()], { description: 'A state policy: `error` or `stuck`' }),
  window: Type.Union([Type.String(), Type.Null()]),
  value: nullableNumber('alert.firing: the window average that fired; alert.resolved: the last one'),
  threshold: nullableNumber('The threshold (a stuck policy: the window in seconds)'),
  started_at: Type.Union([Type.String(), Type.Null()]),
  resolved_at: Type.Union([Type.String(), Type.Null()]),
  resolution: Type.Union([Type.String(), Type.Null()], {
    description: 'alert.resolved: recovered, instance_stopped, instance_deleted, no_longer_targeted…',
  }),
  console_url: Type.Union([Type.String(), Type.Null()], { description: 'The instance in the console' }),
  test: Type.Optional(
    Type.Boolean({ description: 'true on a test notification (POST /v1/alerts/{id}/test)' }),
  ),
});

export const ALERT_EVENTS = {
  'alert.firing': entry('An alert policy started firing', AlertEvent),
  'alert.resolved': entry('An alert incident resolved', AlertEvent),
};

type AlertEvents = typeof ALERT_EVENTS;
declare module '../../platform/events/catalog.js' {
  interface EventCatalog extends AlertEvents {}
}
