/**
 * The instance state machine, as data (docs/design.md, "Instance states"). Each action says from which statuses it may
 * start and which status it writes at once; the reconciler (resources/instances/reconciler.ts) walks the
 * transitional statuses to the target. Diagram: docs/architecture.md.
 *
 *   create ─▶ starting ─▶ running ─stop─▶ stopping ─▶ stopped ─start─▶ starting
 *                 │          └─restart/resize─▶ stopping ─▶ starting ─▶ running
 *                 └─boot fails─▶ error ─start─▶ starting
 *   any status but deleting ─delete─▶ deleting ─▶ (gone: 404)
 */

import { defineStateTable, statusesExcept } from '../../platform/lifecycle/state-table.js';
import type { INSTANCE_EVENTS } from './events.js';

export const INSTANCE_STATUSES = ['starting', 'running', 'stopping', 'stopped', 'deleting', 'error'] as const;
export type InstanceStatus = (typeof INSTANCE_STATUSES)[number];

export type InstanceAction = 'start' | 'stop' | 'force_stop' | 'restart' | 'resize' | 'update' | 'delete';

const EVERY_STATUS_BUT_DELETING = statusesExcept(INSTANCE_STATUSES, 'deleting');

export const INSTANCE_STATES = defineStateTable<InstanceStatus, InstanceAction>({
  kind: 'instance',
  statuses: INSTANCE_STATUSES,
  create: { status: 'starting', target: 'running' },
  actions: {
    start: { from: ['stopped', 'error'], to: 'starting', target: 'running' },
    stop: { from: ['running'], to: 'stopping', target: 'stopped' },
    // The recovery for an instance stuck in starting or stopping: immediate, no graceful shutdown.
    force_stop: { from: ['starting', 'running', 'stopping'], to: 'stopped' },
    restart: { from: ['running'], to: 'stopping', target: 'running' },
    // From running: stop, change, start. From stopped: just change; the instance stays stopped.
    resize: {
      from: ['running', 'stopped'],
      to: (current) => (current === 'running' ? 'stopping' : 'stopped'),
    },
    update: { from: EVERY_STATUS_BUT_DELETING },
    delete: { from: EVERY_STATUS_BUT_DELETING, to: 'deleting', target: 'gone' },
  },
});

/** The statuses each action may start from; any other is 409 conflict. */
export const ALLOWED_FROM: Record<InstanceAction, readonly InstanceStatus[]> = Object.fromEntries(
  Object.entries(INSTANCE_STATES.actions).map(([action, t]) => [action, t.from]),
) as Record<InstanceAction, readonly InstanceStatus[]>;

/** What the user asked for; kept on the instance until it settles, so the reconciler knows which event to write. */
export type InstanceOperation = 'create' | 'start' | 'stop' | 'restart' | 'resize' | 'delete';

export type InstanceEventType = keyof typeof INSTANCE_EVENTS;

/** The event written when an operation completes. */
export const COMPLETION_EVENT: Record<InstanceOperation, InstanceEventType> = {
  create: 'instance.started',
  start: 'instance.started',
  stop: 'instance.stopped',
  restart: 'instance.restarted',
  resize: 'instance.resized',
  delete: 'instance.deleted',
};

export function isAllowed(action: InstanceAction, status: string): boolean {
  return (ALLOWED_FROM[action] as readonly string[]).includes(status);
}
