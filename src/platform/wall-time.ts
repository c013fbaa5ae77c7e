/**
 * The wall-clock time at which a log line or a response is written, in ISO 8601. Deliberately not the
 * injected Clock (platform/domain/clock.ts): that is the time the domain runs on (and tests move), whereas a log
 * line and an envelope's `metadata.timestamp` say when they were produced.
 *
 * Formatted at most once per millisecond: every response envelope and log line carries the time, and
 * formatting a Date costs more than the rest of a log line; at tens of thousands of requests a second,
 * many share a millisecond.
 */
let formattedAtMs = Number.NaN;
let formatted = '';

export function isoTimeNow(): string {
  const nowMs = Date.now();
  if (nowMs !== formattedAtMs) {
    formatted = new Date(nowMs).toISOString();
    formattedAtMs = nowMs;
  }
  return formatted;
}
