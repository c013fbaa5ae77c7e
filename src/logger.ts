/**
 * Structured JSON logs (pino). Lines are buffered and written asynchronously; main.ts flushes on exit.
 * Credentials are redacted wherever they could appear, as a second line of defence: the request log
 * itself never includes headers.
 */
import pino, { type Logger } from 'pino';
import type { LogLevel } from './config.js';

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

export function createLogger(
  level: LogLevel,
  destination: pino.DestinationStream = pino.destination({ dest: 1, sync: false, minLength: 4096 }),
): Logger {
  return pino(
    {
      level,
      base: { service: 'nimbus' },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    },
    destination,
  );
}
