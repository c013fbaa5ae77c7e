/**
 * Data transfer (`data_transfer`), pure: how a driver's cumulative byte counters become bytes billed.
 *
 * A driver reports, per instance, the bytes it has sent to and received from public addresses since its
 * counter began (ComputeDriver.publicTransfer). Billing keeps the last reading it counted (the base) and
 * adds what the counter grew by since. Counters restart: a driver restarts, a VM boots again and its NIC
 * counts from zero. A restart is recognised by the reading's `epoch` changing (when the driver names one)
 * or by either counter reading lower than the base; the new reading is then a new base, and all of it is
 * new bytes (the counter started from zero). So a delta is never negative, and no byte is counted twice:
 * bytes sent between the last reading and a reset are the only ones that can be missed.
 *
 * Price (docs/design.md, "Billing"): 0.01 USD per GB sent to public addresses; received bytes are shown, free.
 * A GB is 2^30 bytes, as for disks (rules.ts BYTES_PER_GB).
 */

import { DATA_TRANSFER_PRICE_MICROS } from './rules.js';

/** 0.01 USD per GB sent out, in micro-USD. */
export const TRANSFER_OUT_PRICE_MICROS = DATA_TRANSFER_PRICE_MICROS;
/** Received from public addresses: free, but shown. */
export const TRANSFER_IN_PRICE_MICROS = 0;

/** What a driver's counter says of one instance (cumulative bytes). */
export interface TransferReading {
  bytesOut: number;
  bytesIn: number;
  /** Names one life of the counter (a boot): a different one means the counter started again. */
  epoch?: string | null;
}

/** The last reading billing counted for an instance. */
export interface TransferBase {
  bytesOut: number;
  bytesIn: number;
  epoch: string | null;
}

export interface TransferDelta {
  /** Bytes to add since the base (never negative). */
  out: number;
  in: number;
  /** The base from now on. */
  base: TransferBase;
}

const whole = (value: number) => (Number.isFinite(value) && value > 0 ? Math.floor(value) : 0);

/**
 * The bytes a reading adds over the base (null: none yet, so the counter is counted from zero), and the
 * next base.
 */
export function transferDelta(base: TransferBase | null, reading: TransferReading): TransferDelta {
  const out = whole(reading.bytesOut);
  const inBytes = whole(reading.bytesIn);
  const epoch = reading.epoch ?? null;
  const next = { bytesOut: out, bytesIn: inBytes, epoch };
  const restarted =
    base === null ||
    (epoch !== null && base.epoch !== null && epoch !== base.epoch) ||
    out < base.bytesOut ||
    inBytes < base.bytesIn;
  if (restarted) return { out, in: inBytes, base: next };
  return { out: out - base.bytesOut, in: inBytes - base.bytesIn, base: next };
}
