/**
 * Structured JSON logs (pino). Lines are collected into large chunks and written asynchronously
 * (platform/log-destination.ts); main.ts flushes on shutdown and the destination on exit. Credentials are
 * redacted wherever they could appear, as a second line of defence: the request log itself never
 * includes headers.
 */
import pino, { type Logger } from 'pino';
import type { LogLevel } from './config.js';
import { BufferedLogDestination } from './log-destination.js';
import { isoTimeNow } from './wall-time.js';

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

/** The fields of the access log: scalars that never carry a credential, so nothing in them is redacted. */
export interface AccessLogFields {
  request_id: string;
  method: string;
  route: string;
  path: string;
  status: number;
  ms: number;
  account: string | undefined;
  ip: string;
}

/**
 * The writer of the access log, the one line every request writes. The line is what
 * `logger.info(fields, 'request')` writes, byte for byte (platform/logger.test.ts holds it to that), made by one
 * JSON.stringify: pino assembles a line from dozens of small strings that must then be joined and
 * flattened, about 2 µs a request under load (docs/benchmarks.md). Lines go to the logger's own
 * destination and obey its level. For loggers made by createLogger (its time format is written here).
 */
export function accessLogWriter(logger: Logger): (fields: AccessLogFields) => void {
  const destination = (logger as unknown as Record<symbol, pino.DestinationStream>)[pino.symbols.streamSym];
  if (destination === undefined) throw new Error('accessLogWriter needs a pino logger');
  // pino's order: level, time, the logger's bindings, the fields, the message. The fields object has one
  // fixed shape, which JSON.stringify serialises fastest; spreading it into a bigger object would not.
  const head = `{"level":${logger.levels.values.info},"time":`;
  const bindings = JSON.stringify(logger.bindings()).slice(1, -1);
  const afterTime = bindings === '' ? ',' : `,${bindings},`;
  return (fields) => {
    if (!logger.isLevelEnabled('info')) return;
    const json = JSON.stringify(fields);
    const fieldsPart = json.length > 2 ? `${json.slice(1, -1)},` : '';
    destination.write(`${head}"${isoTimeNow()}"${afterTime}${fieldsPart}"msg":"request"}\n`);
  };
}

/** pino's isoTime, from the per-millisecond cache the response envelopes share. */
const isoTimestamp = () => `,"time":"${isoTimeNow()}"`;

export function createLogger(
  level: LogLevel,
  destination: pino.DestinationStream = BufferedLogDestination.stdout(),
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
