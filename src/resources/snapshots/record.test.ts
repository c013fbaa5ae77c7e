/** Scheduled snapshot names and the snapshot state table, as properties. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isAllowed, statusAfter } from '../../platform/lifecycle/state-table.js';
import { scheduledName } from './record.js';
import { SNAPSHOT_STATES, SNAPSHOT_STATUSES, type SnapshotAction } from './states.js';

/** 1970 to 2100. */
const anyTime = fc.integer({ min: 0, max: 4_102_444_800_000 }).map((ms) => new Date(ms));

describe('scheduled snapshots', () => {
  it('scheduled names are valid names (1–64 of [A-Za-z0-9._-]) for any source name', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[A-Za-z0-9._-]{1,64}$/), anyTime, (name, at) => {
        expect(scheduledName(name, at)).toMatch(/^[A-Za-z0-9._-]{1,64}$/);
      }),
    );
  });
});

describe('the snapshot state table', () => {
  const anyAction = fc.constantFrom(...(Object.keys(SNAPSHOT_STATES.actions) as SnapshotAction[]));
  it('an allowed action writes a status of the table; nothing leaves deleting', () => {
    fc.assert(
      fc.property(fc.constantFrom(...SNAPSHOT_STATUSES), anyAction, (status, action) => {
        if (isAllowed(SNAPSHOT_STATES, action, status)) {
          expect(SNAPSHOT_STATUSES).toContain(statusAfter(SNAPSHOT_STATES, action, status));
          expect(status).not.toBe('deleting');
        }
      }),
    );
  });
  it('only an available snapshot is restored, and a restore leaves it available', () => {
    for (const status of SNAPSHOT_STATUSES) {
      expect(isAllowed(SNAPSHOT_STATES, 'restore', status)).toBe(status === 'available');
    }
    expect(statusAfter(SNAPSHOT_STATES, 'restore', 'available')).toBe('available');
  });
});
