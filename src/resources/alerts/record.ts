/**
 * The alert records: a policy and an incident, each the one declaration of its fields as the services
 * see them (the store's rows decoded: store.ts). The API views (routes.ts: each less what stays in the
 * server) and the data of the alert events (events.ts, picked) are derived from them, with their
 * descriptions. The condition's fields are declared once here and also taken by the input schemas.
 */
import { type Static, Type } from '@sinclair/typebox';
import { Targets } from '../../platform/domain/targets.js';
import { StringEnum, Timestamp } from '../../platform/http/schemas.js';
import {
  ALERT_COMPARES,
  ALERT_METRICS,
  ALERT_STATES,
  ALERT_WINDOWS,
  CHAT_FORMATS,
  INCIDENT_STATUSES,
  RESOLUTIONS,
} from './rules.js';

export const Metric = StringEnum(ALERT_METRICS, {
  description: 'The metric whose window average is compared: memory_percent is used over total memory',
});
export const Compare = StringEnum(ALERT_COMPARES, {
  description: 'Fire when the average is above or below the threshold',
});
export const Window = StringEnum(ALERT_WINDOWS, {
  description:
    'Metric policies: the window averaged over (and the whole window that must be back on the good side to ' +
    'resolve). `stuck`: how long in starting or stopping counts as stuck',
});
export const State = StringEnum(ALERT_STATES, {
  description: '`error`: the instance is in error; `stuck`: in starting or stopping longer than `window`',
});

export const AlertPolicyRecord = Type.Object({
  id: Type.String({ description: '`alr_…`' }),
  account_id: Type.String(),
  name: Type.String(),
  description: Type.Union([Type.String(), Type.Null()]),
  metric: Type.Union([Metric, Type.Null()]),
  compare: Type.Union([Compare, Type.Null()]),
  threshold: Type.Union([Type.Number(), Type.Null()]),
  window: Type.Union([Window, Type.Null()]),
  state: Type.Union([State, Type.Null()]),
  targets: Targets,
  channels: Type.Object({
    email: Type.Array(Type.String()),
    webhook_ids: Type.Array(Type.String()),
    chat: Type.Array(Type.Object({ url: Type.String(), format: StringEnum(CHAT_FORMATS) })),
  }),
  enabled: Type.Boolean(),
  created_at: Timestamp,
  updated_at: Timestamp,
});
/** A policy as services and the evaluator see it. */
export type AlertPolicy = Static<typeof AlertPolicyRecord>;

export const AlertIncidentRecord = Type.Object({
  id: Type.String({ description: '`inc_…`' }),
  account_id: Type.String(),
  policy_id: Type.String(),
  instance_id: Type.String(),
  // It may be gone by the time the incident resolves.
  instance_name: Type.String({ description: 'The instance’s name when the incident opened' }),
  status: StringEnum(INCIDENT_STATUSES),
  value: Type.Union([Type.Number(), Type.Null()], {
    description: 'The window average that fired (a stuck instance: seconds in the state; error: null)',
  }),
  threshold: Type.Union([Type.Number(), Type.Null()], {
    description: 'The threshold (a stuck policy: the window in seconds; error: null)',
  }),
  resolved_value: Type.Union([Type.Number(), Type.Null()], {
    description: 'The window average when it resolved by recovering',
  }),
  resolution: Type.Union([StringEnum(RESOLUTIONS), Type.Null()]),
  started_at: Timestamp,
  resolved_at: Type.Union([Timestamp, Type.Null()]),
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type AlertIncident = Static<typeof AlertIncidentRecord>;
