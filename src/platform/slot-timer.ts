/**
 * A timer that calls back at every boundary of `slotMs` of wall time (Date.now()), never before one.
 * Node runs a timeout on the event loop's monotonic clock in whole milliseconds, and Date.now() is
 * another clock, so a plain `setTimeout(f, boundary - Date.now())` now and then fires a millisecond
 * before the boundary (about 1 in 250 here); a stream tick taken then floors to the previous slot and
 * sends that slot's samples a second time (seen in CI as two metrics messages with one timestamp).
 */
export interface SlotTimer {
  stop(): void;
}

export function everySlot(slotMs: number, onSlot: (boundaryMs: number) => void): SlotTimer {
  let timer: NodeJS.Timeout | null = null;
  let stopped = false;
  const waitFor = (boundaryMs: number) => {
    timer = setTimeout(() => {
      if (stopped) return;
      if (Date.now() < boundaryMs) return waitFor(boundaryMs);
      next();
      onSlot(boundaryMs);
    }, boundaryMs - Date.now());
    timer.unref();
  };
  const next = () => {
    const now = Date.now();
    waitFor(now - (now % slotMs) + slotMs);
  };
  next();
  return {
    stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
    },
  };
}
