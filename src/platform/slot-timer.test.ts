/**
 * The stream's slot timer calls back at or after each boundary by Date.now(), each boundary once. A plain
 * `setTimeout(f, boundary - Date.now())` fires a millisecond early now and then (Node times it on the
 * loop's monotonic clock, in whole milliseconds; Date.now() is another clock): here about 1 in 250, which
 * made a stream tick floor to the previous slot and send its samples twice. 800 slots make it near
 * certain that the plain timeout would have fired early at least once.
 */
import { describe, expect, it } from 'vitest';
import { everySlot } from './slot-timer.js';

describe('everySlot', () => {
  it('never calls back before its boundary, and calls back once per boundary until stopped', async () => {
    const fired: { boundary: number; at: number }[] = [];
    await new Promise<void>((resolve) => {
      const timer = everySlot(5, (boundary) => {
        fired.push({ boundary, at: Date.now() });
        if (fired.length === 800) {
          timer.stop();
          resolve();
        }
      });
    });
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(fired).toHaveLength(800);
    expect(fired.filter(({ boundary, at }) => at < boundary)).toEqual([]);
    for (const [i, { boundary }] of fired.entries()) {
      expect(boundary % 5).toBe(0);
      if (i > 0) expect(boundary).toBeGreaterThan(fired[i - 1]?.boundary as number);
    }
  }, 30_000);
});
