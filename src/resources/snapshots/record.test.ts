/** Schedule slots and the snapshot state table, as properties over any source, frequency and time. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isAllowed, statusAfter } from '../../platform/lifecycle/state-table.js';
import { nextSlot, SCHEDULE_PERIOD_MS, scheduledName, scheduleOffsetMs } from './record.js';
import { SNAPSHOT_STATES, SNAPSHOT_STATUSES, type SnapshotAction } from './states.js';

const anyFrequency = fc.constantFrom('hourly', 'daily', 'weekly' as const);
const anySource = fc.stringMatching(/^(vol|ins)_[0-9a-z]{26}$/);
/** 1970 to 2100. */
const anyTime = fc.integer({ min: 0, max: 4_102_444_800_000 }).map((ms) => new Date(ms));

describe('backup schedule slots', () => {
  it('the next slot is after the time asked about, within one period, at the source’s offset', () => {
    fc.assert(
      fc.property(anySource, anyFrequency, anyTime, (source, frequency, after) => {
        const next = nextSlot(source, frequency, after);
        const period = SCHEDULE_PERIOD_MS[frequency];
        expect(next.getTime()).toBeGreaterThan(after.getTime());
        expect(next.getTime() - after.getTime()).toBeLessThanOrEqual(period);
        expect((next.getTime() - scheduleOffsetMs(source, frequency)) % period).toBe(0);
      }),
    );
  });

  it('slots follow each other one period apart, and any time between two slots leads to the later one', () => {
    fc.assert(
      fc.property(
        anySource,
        anyFrequency,
        anyTime,
        fc.double({ min: 0, max: 1, noNaN: true }),
        (source, frequency, after, f) => {
          const slot = nextSlot(source, frequency, after);
          const period = SCHEDULE_PERIOD_MS[frequency];
          const following = nextSlot(source, frequency, slot);
          expect(following.getTime() - slot.getTime()).toBe(period);
          const between = new Date(slot.getTime() + Math.floor(f * (period - 1)));
          expect(nextSlot(source, frequency, between)).toEqual(following);
        },
      ),
    );
  });

  it('a server down across many slots is due once: the slot after "now" is in the future', () => {
    fc.assert(
      fc.property(
        anySource,
        anyFrequency,
        anyTime,
        fc.integer({ min: 1, max: 1000 }),
        (source, frequency, at, missed) => {
          const due = nextSlot(source, frequency, at);
          const now = new Date(due.getTime() + missed * SCHEDULE_PERIOD_MS[frequency]);
          expect(nextSlot(source, frequency, now).getTime()).toBeGreaterThan(now.getTime());
        },
      ),
    );
  });

  it('offsets spread within the period, in whole minutes', () => {
    fc.assert(
      fc.property(anySource, anyFrequency, (source, frequency) => {
        const offset = scheduleOffsetMs(source, frequency);
        expect(offset).toBeGreaterThanOrEqual(0);
        expect(offset).toBeLessThan(SCHEDULE_PERIOD_MS[frequency]);
        expect(offset % 60_000).toBe(0);
      }),
    );
  });

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
