import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { type AccessLogFields, accessLogWriter, createLogger } from './logger.js';

function capture() {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      lines.push(...String(chunk).split('\n').filter(Boolean));
      done();
    },
  });
  return { logger: createLogger('info', sink), lines };
}

/** The line without its time, which differs between two calls. */
function untimed(line: string | undefined) {
  return line?.replace(/"time":"[^"]+",/, '');
}

const fieldSets: AccessLogFields[] = [
  {
    request_id: 'req_1',
    method: 'GET',
    route: '/v1/account',
    path: '/v1/account',
    status: 200,
    ms: 0.42,
    account: 'acct_1',
    ip: '127.0.0.1',
  },
  // No account (a 401), a path that needs escaping, a duration that is not a finite number.
  {
    request_id: 'req_2',
    method: 'GET',
    route: 'unmatched',
    path: '/v1/"quoted"\\back\u0001slash/ünïcode/\u2028',
    status: 404,
    ms: Number.NaN,
    account: undefined,
    ip: '::1',
  },
  // A surrogate pair (kept as it is) and a lone surrogate (escaped), in a route and a path.
  {
    request_id: 'req_3',
    method: 'DELETE',
    route: '/v1/\ud83d\ude80',
    path: '/v1/\ud83d\ude80/\ud800x',
    status: 500,
    ms: 12345.67,
    account: 'acct_"3"',
    ip: '10.0.0.1',
  },
];

describe('accessLogWriter', () => {
  it('writes exactly the line logger.info(fields, "request") writes', () => {
    for (const fields of fieldSets) {
      const { logger, lines } = capture();
      logger.info(fields, 'request');
      accessLogWriter(logger)(fields);
      expect(lines).toHaveLength(2);
      expect(untimed(lines[1])).toBe(untimed(lines[0]));
      expect(JSON.parse(lines[1] ?? '').path).toBe(fields.path);
    }
  });

  it("carries a child logger's bindings, as pino does", () => {
    const { logger, lines } = capture();
    const child = logger.child({ component: 'api' });
    child.info(fieldSets[0], 'request');
    accessLogWriter(child)(fieldSets[0] as AccessLogFields);
    expect(untimed(lines[1])).toBe(untimed(lines[0]));
    expect(JSON.parse(lines[1] ?? '').component).toBe('api');
  });

  it("obeys the logger's level", () => {
    const { logger, lines } = capture();
    logger.level = 'warn';
    accessLogWriter(logger)(fieldSets[0] as AccessLogFields);
    expect(lines).toHaveLength(0);
  });
});

describe('createLogger', () => {
  it('censors credentials named at the top level', () => {
    const { logger, lines } = capture();
    logger.info({ api_key: 'nmb_secret', key: 'k', secret: 's' }, 'oops');
    expect(lines[0]).not.toMatch(/nmb_secret|"k"|"s"/);
  });

  it('leaves nested credentials to the ordinary logger, which censors them', () => {
    const { logger, lines } = capture();
    logger.info({ body: { api_key: 'nmb_secret', secret: 'hush' } }, 'nested');
    expect(lines[0]).not.toMatch(/nmb_secret|hush/);
    expect(JSON.parse(lines[0] ?? '{}').body).toEqual({ api_key: '[redacted]', secret: '[redacted]' });
  });
});
