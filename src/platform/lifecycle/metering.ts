/**
 * How the lifecycle core keeps the metered history billing reads, without knowing prices or billing's
 * tables: the composition root gives it billing's meter store (resources/billing/meter-store.ts). A kind
 * that is billed says what its record pays in its state (`ResourceKind.meter`, opaque here); on every
 * write that changes what it pays, the core switches the record's metered interval in the transaction of
 * the write, so the history holds exactly what committed.
 */
import type { Executor } from '../store/schema.js';

/** What a record pays in its state, as billing describes it; the core only compares and hands it on. */
export type BilledState = object;

export interface Metering {
  /** Equal keys bill the same: a write that keeps the key (a rename) starts no new interval. */
  key(meter: BilledState | null): string;
  /**
   * Ends the record's open interval at `at` and opens one for `next` (none when it stops paying), in the
   * write's transaction. `isNew`: the record is being created in it, so it has no interval to end.
   */
  switchMeter(
    trx: Executor,
    resourceId: string,
    next: BilledState | null,
    at: Date,
    isNew: boolean,
  ): Promise<void>;
}
