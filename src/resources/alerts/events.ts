/**
 * Alert events: their types and the shape of their data, added to the platform's catalogue
 * (platform/events/catalog.ts). One shape for both: the policy's fields and the incident's, picked from
 * their records (record.ts). A test notification (POST /v1/alerts/{id}/test) has a policy but no incident,
 * so every field is nullable; where the event says more than the record (what `value` is on a resolve,
 * what a field means on a policy of the other kind), its description says it.
 */
import { type TSchema, Type } from '@sinclair/typebox';
import { entry } from '../../platform/events/catalog.js';
import { AlertIncidentRecord, AlertPolicyRecord } from './record.js';

const policy = AlertPolicyRecord.properties;
const incident = AlertIncidentRecord.properties;

/** A record's field, with what it means in the event. */
const said = <T extends TSchema>(field: T, description: string): T => ({ ...field, description });
/** A field every incident has, null on a test notification. */
const orNone = <T extends TSchema>(field: T) => Type.Union([field, Type.Null()]);

const AlertEvent = Type.Object({
  alert_id: Type.String({ description: 'The alert policy' }),
  incident_id: Type.Union([Type.String(), Type.Null()], {
    description: 'The incident (null on a test notification)',
  }),
  name: said(policy.name, 'The policy name'),
  instance_id: said(orNone(incident.instance_id), 'The instance (null on a test notification)'),
  instance_name: orNone(incident.instance_name),
  metric: said(policy.metric, 'A metric policy: the metric watched'),
  compare: said(policy.compare, '`above` or `below`'),
  state: said(policy.state, 'A state policy: `error` or `stuck`'),
  window: policy.window,
  value: said(incident.value, 'alert.firing: the window average that fired; alert.resolved: the last one'),
  threshold: incident.threshold,
  started_at: orNone(incident.started_at),
  resolved_at: incident.resolved_at,
  resolution: said(
    incident.resolution,
    'alert.resolved: recovered, instance_stopped, instance_deleted, no_longer_targeted…',
  ),
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
