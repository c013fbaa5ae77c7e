/**
 * The instance state machine, as data (DESIGN.md §4 "States"). Actions say from which statuses they may
 * start; the reconciler (services/instance-reconciler.ts) walks the transitional statuses to a settled
 * one. Diagram: docs/architecture.md.
 *
 *   create ─▶ starting ─▶ running ─stop─▶ stopping ─▶ stopped ─start─▶ starting
 *                 │          └─restart/resize─▶ stopping ─▶ starting ─▶ running
 *                 └─boot fails─▶ error ─start─▶ starting
 *   any status but deleting ─delete─▶ deleting ─▶ (gone: 404)
 */

export const INSTANCE_STATUSES = ['starting', 'running', 'stopping', 'stopped', 'deleting', 'error'] as const;
export type InstanceStatus = (typeof INSTANCE_STATUSES)[number];

export type InstanceAction = 'start' | 'stop' | 'force_stop' | 'restart' | 'resize' | 'update' | 'delete';

const EVERY_STATUS_BUT_DELETING = INSTANCE_STATUSES.filter((s) => s !== 'deleting');

/** The statuses each action may start from; any other is 409 conflict. */
export const ALLOWED_FROM: Record<InstanceAction, readonly InstanceStatus[]> = {
  start: ['stopped', 'error'],
  stop: ['running'],
  // The recovery for an instance stuck in starting or stopping: immediate, no graceful shutdown.
  force_stop: ['starting', 'running', 'stopping'],
  restart: ['running'],
  resize: ['running', 'stopped'],
  update: EVERY_STATUS_BUT_DELETING,
  delete: EVERY_STATUS_BUT_DELETING,
};

/** What the user asked for; kept on the instance until it settles, so the reconciler knows which event to write. */
export type InstanceOperation = 'create' | 'start' | 'stop' | 'restart' | 'resize' | 'delete';

/** The event written when an operation completes. */
export const COMPLETION_EVENT: Record<InstanceOperation, string> = {
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
