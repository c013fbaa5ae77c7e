/** State tables (platform/lifecycle/state-table.ts) and the instance table, as properties over any status and action. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  INSTANCE_STATES,
  INSTANCE_STATUSES,
  type InstanceAction,
  type InstanceStatus,
} from '../../resources/instances/states.js';
import { defineStateTable, isAllowed, statusAfter } from './state-table.js';

const ACTIONS = Object.keys(INSTANCE_STATES.actions) as InstanceAction[];
const anyStatus = fc.constantFrom(...INSTANCE_STATUSES);
const anyAction = fc.constantFrom(...ACTIONS);

/** Where the reconciler takes a transitional status when the machine behaves. */
const SETTLES: Partial<Record<InstanceStatus, InstanceStatus | 'gone'>> = {
  starting: 'running',
  stopping: 'stopped',
  deleting: 'gone',
};

describe('the instance state table', () => {
  it('an allowed action writes a status of the table; a refused one starts from none of its statuses', () => {
    fc.assert(
      fc.property(anyStatus, anyAction, (status, action) => {
        if (isAllowed(INSTANCE_STATES, action, status)) {
          expect(INSTANCE_STATUSES).toContain(statusAfter(INSTANCE_STATES, action, status));
        } else {
          expect(INSTANCE_STATES.actions[action].from).not.toContain(status);
        }
      }),
    );
  });

  it('deleting allows nothing; every other status allows delete and update', () => {
    fc.assert(
      fc.property(anyStatus, (status) => {
        const allowed = ACTIONS.filter((a) => isAllowed(INSTANCE_STATES, a, status));
        if (status === 'deleting') expect(allowed).toEqual([]);
        else expect(allowed).toEqual(expect.arrayContaining(['delete', 'update']));
      }),
    );
  });

  it('any sequence of requests, with settles in between, stays in the table and ends in deleting for good', () => {
    const event = fc.oneof(
      anyAction.map((action) => ({ action })),
      fc.constant({ settle: true as const }),
    );
    fc.assert(
      fc.property(fc.array(event, { maxLength: 40 }), (events) => {
        let status: InstanceStatus | 'gone' = INSTANCE_STATES.create.status;
        let deleted = false;
        for (const step of events) {
          if (status === 'gone') break;
          if ('settle' in step) status = SETTLES[status] ?? status;
          else if (isAllowed(INSTANCE_STATES, step.action, status)) {
            status = statusAfter(INSTANCE_STATES, step.action, status);
          }
          if (status === 'deleting') deleted = true;
          if (deleted) expect(['deleting', 'gone']).toContain(status);
          else expect(INSTANCE_STATUSES).toContain(status);
        }
      }),
    );
  });

  it('resize writes stopping from running and stays stopped from stopped', () => {
    expect(statusAfter(INSTANCE_STATES, 'resize', 'running')).toBe('stopping');
    expect(statusAfter(INSTANCE_STATES, 'resize', 'stopped')).toBe('stopped');
    expect(statusAfter(INSTANCE_STATES, 'update', 'error')).toBe('error');
  });
});

describe('defineStateTable', () => {
  it('refuses an action that starts from a status the table does not have', () => {
    expect(() =>
      defineStateTable<'a' | 'b', 'go'>({
        kind: 'thing',
        statuses: ['a'],
        create: { status: 'a' },
        actions: { go: { from: ['b'], to: 'a' } },
      }),
    ).toThrow(/go starts from unknown status b/);
  });
});
