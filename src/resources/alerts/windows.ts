/**
 * The recent samples of one metric of one instance, as the alert evaluator keeps them: a ring of the
 * last `capacity` collection slots (slot n is the collection at n × interval since the epoch), each
 * holding its value or nothing. Samples are put by slot, so putting one twice (read back from the store,
 * then seen live) changes nothing, and a missed collection stays a gap.
 *
 * The window rules (issue 21, docs/api.md "Alerts"):
 * - the window ending at slot s spans the slots of the last `windowSlots` collections, s − windowSlots + 1
 *   to s, and is **covered** when its first slot holds a sample (and so does s: the one just collected);
 * - its value is the average of the samples it holds;
 * - it is **all good** when it is covered and none of its samples is past the threshold.
 * An incident opens when a covered window's average is past the threshold, and resolves after a whole
 * all-good window.
 */
import { type AlertCompare, isPast } from './rules.js';

export interface WindowStats {
  covered: boolean;
  /** The average of the samples in the window; null when it holds none. */
  average: number | null;
  samples: number;
  /** Covered, and no sample past the threshold. */
  allGood: boolean;
}

export class SampleRing {
  private readonly values: Float64Array;
  /**
   * The slot each position holds, or 0 when empty (slot 0 is 1970-01-01T00:00:00Z, never collected).
   * Slot numbers fit 32 bits at a 1 s interval until 2106.
   */
  private readonly slots: Uint32Array;

  constructor(readonly capacity: number) {
    this.values = new Float64Array(capacity);
    this.slots = new Uint32Array(capacity);
  }

  put(slot: number, value: number): void {
    const at = slot % this.capacity;
    this.values[at] = value;
    this.slots[at] = slot;
  }

  /** The value at `slot`, or undefined when the ring does not hold it (never put, or overwritten). */
  get(slot: number): number | undefined {
    const at = slot % this.capacity;
    return this.slots[at] === slot ? (this.values[at] as number) : undefined;
  }

  /** The newest slot held, or 0. */
  newest(): number {
    let newest = 0;
    for (const slot of this.slots) if (slot > newest) newest = slot;
    return newest;
  }

  /** The window of `windowSlots` slots ending at `lastSlot`, judged against a threshold. */
  window(lastSlot: number, windowSlots: number, compare: AlertCompare, threshold: number): WindowStats {
    const first = lastSlot - windowSlots + 1;
    let sum = 0;
    let count = 0;
    let past = false;
    for (let slot = Math.max(first, lastSlot - this.capacity + 1); slot <= lastSlot; slot++) {
      const at = slot % this.capacity;
      if (this.slots[at] !== slot) continue;
      const value = this.values[at] as number;
      sum += value;
      count += 1;
      if (!past && isPast(compare, value, threshold)) past = true;
    }
    const covered =
      windowSlots <= this.capacity && this.get(first) !== undefined && this.get(lastSlot) !== undefined;
    return { covered, average: count > 0 ? sum / count : null, samples: count, allGood: covered && !past };
  }
}

/** The collection slots a window of `windowMs` spans at `intervalMs` (at least one). */
export function windowSlots(windowMs: number, intervalMs: number): number {
  return Math.max(1, Math.floor(windowMs / intervalMs));
}
