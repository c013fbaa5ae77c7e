import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, scalarLineLogger } from './logger.js';

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

describe('scalarLineLogger', () => {
  it('writes a line of scalar fields exactly as the redacting logger does', () => {
    const { logger, lines } = capture();
    const fields = {
      request_id: 'req_1',
      method: 'GET',
      route: '/v1/account',
      path: '/v1/account',
      status: 200,
      ms: 0.42,
      account: undefined,
      ip: '127.0.0.1',
    };
    logger.info(fields, 'request');
    scalarLineLogger(logger).info(fields, 'request');
    expect(lines).toHaveLength(2);
    expect(untimed(lines[1])).toBe(untimed(lines[0]));
  });

  it('still censors credentials named at the top level', () => {
    const { logger, lines } = capture();
    scalarLineLogger(logger).info({ api_key: 'nmb_secret', key: 'k', secret: 's' }, 'oops');
    expect(lines[0]).not.toMatch(/nmb_secret|"k"|"s"/);
  });

  it('leaves nested credentials to the ordinary logger, which censors them', () => {
    const { logger, lines } = capture();
    logger.info({ body: { api_key: 'nmb_secret', secret: 'hush' } }, 'nested');
    expect(lines[0]).not.toMatch(/nmb_secret|hush/);
    expect(JSON.parse(lines[0] ?? '{}').body).toEqual({ api_key: '[redacted]', secret: '[redacted]' });
  });
});
