/** Backup schedule slots, as properties over any source, frequency and time. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { nextSlot, SCHEDULE_PERIOD_MS, scheduleOffsetMs } from './backup-schedule.js';

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
});
