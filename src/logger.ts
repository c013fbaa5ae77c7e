/**
 * Structured JSON logs (pino). Lines are collected per event-loop turn and written asynchronously
 * (log-destination.ts); main.ts flushes on shutdown and the destination on exit. Credentials are
 * redacted wherever they could appear, as a second line of defence: the request log itself never
 * includes headers.
 */
import pino, { type Logger } from 'pino';
import type { LogLevel } from './config.js';
import { isoTimeNow } from './domain/clock.js';
import { TurnBatchedDestination } from './log-destination.js';

export const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers["x-api-key"]',
  'headers.authorization',
  'headers["x-api-key"]',
  'api_key',
  '*.api_key',
  'key',
  'secret',
  '*.secret',
];
const REDACTION_CENSOR = '[redacted]';

/**
 * A child for lines made only of scalar fields (the access log). Redaction works by field name, and the
 * wildcard paths above (`*.api_key`, `*.secret`) only ever match inside an object-valued field; pino
 * still runs them over every field of every line, which costs more than formatting the line. A line
 * with no object-valued field comes out byte for byte the same without them, so this child keeps only
 * the other paths. Anything that may hold an object must be logged through the ordinary logger.
 */
export function scalarLineLogger(logger: Logger): Logger {
  return logger.child(
    {},
    { redact: { paths: REDACTED_PATHS.filter((p) => !p.startsWith('*')), censor: REDACTION_CENSOR } },
  );
}

/** pino's isoTime, from the per-millisecond cache the response envelopes share. */
const isoTimestamp = () => `,"time":"${isoTimeNow()}"`;

export function createLogger(
  level: LogLevel,
  destination: pino.DestinationStream = TurnBatchedDestination.stdout(),
): Logger {
  return pino(
    {
      level,
      base: { service: 'nimbus' },
      timestamp: isoTimestamp,
      redact: { paths: REDACTED_PATHS, censor: REDACTION_CENSOR },
    },
    destination,
  );
}
