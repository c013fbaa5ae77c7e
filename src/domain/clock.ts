/** Time source injected wherever time matters (billing, retention, rate limits) so tests can move it. */
export interface Clock {
  now(): Date;
  /** now().getTime() without making a Date: asked on every request (authentication, rate limits). */
  nowMs(): number;
}

export const systemClock: Clock = { now: () => new Date(), nowMs: () => Date.now() };

/** A clock tests can set and advance; it never moves on its own. */
export class ManualClock implements Clock {
  constructor(private current = new Date('2026-01-01T00:00:00Z')) {}
  now(): Date {
    return new Date(this.current.getTime());
  }
  nowMs(): number {
    return this.current.getTime();
  }
  set(at: Date): void {
    this.current = new Date(at.getTime());
  }
  advance(ms: number): void {
    this.current = new Date(this.current.getTime() + ms);
  }
}

let formattedAtMs = Number.NaN;
let formatted = '';

/**
 * The system time in ISO 8601, formatted at most once per millisecond. Every response envelope and log
 * line carries the time, and formatting a Date costs more than the rest of a log line; at tens of
 * thousands of requests a second, many share a millisecond.
 */
export function isoTimeNow(): string {
  const nowMs = Date.now();
  if (nowMs !== formattedAtMs) {
    formatted = new Date(nowMs).toISOString();
    formattedAtMs = nowMs;
  }
  return formatted;
}
