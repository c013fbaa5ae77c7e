/**
 * The WebSocket error handler's rule: a client's faults are one warn line per address and minute, and
 * leave the socket to finish its close; anything else is an error line and the socket is dropped.
 */
import { Writable } from 'node:stream';
import fc from 'fast-check';
import type { FastifyRequest } from 'fastify';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { WebSocket } from 'ws';
import { FAULT_LOG_WINDOW_MS, websocketErrorHandler } from './websocket-faults.js';

function harness() {
  const lines: { level: number; msg: string; client_ip?: string }[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      for (const line of chunk.toString().split('\n')) if (line) lines.push(JSON.parse(line));
      done();
    },
  });
  let now = 0;
  const handler = websocketErrorHandler(pino({ level: 'info' }, sink), () => now);
  let terminated = 0;
  const socket = {
    terminate: () => {
      terminated += 1;
    },
  } as unknown as WebSocket;
  const fault = (ip: string, error: Error) =>
    handler(error, socket, { ip, id: 'req_1', url: '/v1/metrics/stream' } as FastifyRequest);
  return {
    lines,
    fault,
    advance: (ms: number) => {
      now += ms;
    },
    terminated: () => terminated,
    settle: () => new Promise((resolve) => setImmediate(resolve)),
  };
}

function tooBig(): Error {
  return Object.assign(new RangeError('Max payload size exceeded'), {
    code: 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH',
  });
}

describe('websocketErrorHandler', () => {
  it('logs client faults once per address within a minute, at warn, and never drops the socket', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ ip: fc.constantFrom('10.0.0.1', '10.0.0.2', '::1'), gapMs: fc.nat(30_000) }), {
          maxLength: 60,
        }),
        async (faults) => {
          const h = harness();
          const expected: string[] = [];
          const lastLogged = new Map<string, number>();
          let now = 0;
          for (const { ip, gapMs } of faults) {
            h.advance(gapMs);
            now += gapMs;
            const last = lastLogged.get(ip);
            if (last === undefined || now - last >= FAULT_LOG_WINDOW_MS) {
              lastLogged.set(ip, now);
              expected.push(ip);
            }
            h.fault(ip, tooBig());
          }
          await h.settle();
          expect(h.lines.map((line) => line.client_ip)).toEqual(expected);
          expect(h.lines.every((line) => line.level === 40)).toBe(true);
          expect(h.terminated()).toBe(0);
        },
      ),
    );
  });

  it('a connection reset is a client fault too; any other error is ours: error level, socket dropped', async () => {
    const h = harness();
    h.fault('10.0.0.1', Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }));
    h.fault('10.0.0.3', new TypeError('cannot read properties of undefined'));
    await h.settle();
    expect(h.lines.map((line) => line.level)).toEqual([40, 50]);
    expect(h.terminated()).toBe(1);
  });
});
