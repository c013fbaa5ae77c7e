/**
 * Every answer carries X-RateLimit-Limit, -Remaining and -Reset (docs/design.md, "Rate limits"), the keyless
 * ones from the client address's budget: unknown API versions, the API document, /docs, unknown paths,
 * the plain-HTTP refusal, and the answers given before Fastify's hooks (408, 431, a malformed request,
 * WebSocket refusals) (issue 29 item 10). And the listener's own limits (item 7): more than 1,000 header
 * lines are a 431, a request that does not arrive in full within the deadline a 408, and connections
 * past the per-address cap are closed.
 */
import { readFileSync } from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_HEADER_COUNT } from '../src/platform/http/plugins/transport.js';
import { waitFor } from './helpers/common.js';
import { parseAnswer, type RawAnswer, rawExchange } from './helpers/raw-tls.js';
import { sendRequest, startTestServer, type TestServer } from './helpers/server.js';

interface Headers {
  [name: string]: string | string[] | undefined;
}

/** The three headers, each a plain integer, from the address's (Free plan) budget. */
function expectAddressBudget(headers: Headers, what: string): number {
  for (const name of ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset']) {
    expect(headers[name], `${name} on ${what}`).toMatch(/^\d+$/);
  }
  expect(headers['x-ratelimit-limit'], what).toBe('1000');
  expect(Number(headers['x-ratelimit-reset']), what).toBeGreaterThan(Date.now() / 1000);
  return Number(headers['x-ratelimit-remaining']);
}

function expectEnvelope(answer: { status: number; body: any }, status: number, code: string) {
  expect(answer.status, JSON.stringify(answer.body)?.slice(0, 300)).toBe(status);
  expect(answer.body).toMatchObject({
    success: false,
    error: { code },
    metadata: { request_id: expect.any(String) },
  });
}

function head(method: string, path: string, extra: string[] = []): string {
  return [`${method} ${path} HTTP/1.1`, 'Host: localhost', 'Connection: close', ...extra, '', ''].join(
    '\r\n',
  );
}

/** Plain TCP, for the plain-HTTP listener. */
function plainExchange(url: string, text: string): Promise<RawAnswer> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const socket = net.connect(Number(port), hostname, () => socket.write(text));
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', () => {});
    socket.on('close', () => resolve(parseAnswer(Buffer.concat(chunks).toString('utf8'))));
  });
}

describe('the X-RateLimit headers on every answer', () => {
  let server: TestServer;
  let ca: Buffer;
  beforeAll(async () => {
    server = await startTestServer();
    ca = readFileSync(server.running.certFile);
  });
  afterAll(async () => {
    await server?.close();
  });

  it('on keyless answers outside the guard, each spending one unit of the address budget', async () => {
    let before = expectAddressBudget((await server.request('GET', '/nowhere')).headers, 'a 404');
    for (const [path, status] of [
      ['/v3/instances', 404],
      ['/v3', 404],
      ['/v1/openapi.json', 200],
      ['/docs/json', 200],
      ['/docs/yaml', 200],
      ['/docs', 200],
      ['/no/such/path', 404],
    ] as const) {
      const reply = await server.request('GET', path);
      expect(reply.status, path).toBe(status);
      const remaining = expectAddressBudget(reply.headers, path);
      expect(remaining, path).toBe(before - 1);
      before = remaining;
    }
    // An unknown version is refused before any key is read: the address pays, not the account.
    const withKey = await server.request('GET', '/v3/instances', { key: server.rootKey });
    expectEnvelope(withKey, 404, 'not_found');
    expect(expectAddressBudget(withKey.headers, '/v3 with a key')).toBe(before - 1);
  });

  it('on health checks and console files, which report the budget without spending it', async () => {
    const first = expectAddressBudget((await server.request('GET', '/healthz')).headers, '/healthz');
    expect(expectAddressBudget((await server.request('GET', '/readyz')).headers, '/readyz')).toBe(first);
    expect(expectAddressBudget((await server.request('GET', '/console/')).headers, '/console/')).toBe(first);
    expect(expectAddressBudget((await server.request('GET', '/healthz')).headers, '/healthz')).toBe(first);
  });

  it('on the plain-HTTP refusal, from the listener and for a URL the router cannot take', async () => {
    const refused = await sendRequest(server.httpUrl!, null, 'GET', '/v1/account');
    expectEnvelope(refused, 400, 'invalid_request');
    expectAddressBudget(refused.headers, 'plain HTTP');
    const badUrl = await sendRequest(server.httpUrl!, null, 'GET', '/v1/instances/%ZZ');
    expectEnvelope(badUrl, 400, 'invalid_request');
    expect(badUrl.body.error.message).toMatch(/HTTPS is required/);
    expectAddressBudget(badUrl.headers, 'plain HTTP, bad URL');
    const malformed = await plainExchange(
      server.httpUrl!,
      'GET /v1/account HTTP/1.1\r\nHost localhost\r\n\r\n',
    );
    expectEnvelope(malformed, 400, 'invalid_request');
    expectAddressBudget(malformed.headers, 'plain HTTP, malformed header');
  });

  it('on 431s, public route or not, before Fastify or after', async () => {
    for (const [path, size] of [
      ['/healthz', 20_000],
      ['/v1/openapi.json', 20_000],
      ['/nowhere', 20_000],
      ['/healthz', 70_000],
    ] as const) {
      const answer = await rawExchange(server.url, ca, [
        head('GET', path, [`X-Padding: ${'p'.repeat(size)}`]),
      ]);
      expectEnvelope(answer, 431, 'headers_too_large');
      expectAddressBudget(answer.headers, `${path} with ${size} bytes of headers`);
    }
  });

  it('on a malformed request line', async () => {
    const answer = await rawExchange(server.url, ca, ['GET /v1/account HTTP/9.x\r\n\r\n']);
    expectEnvelope(answer, 400, 'invalid_request');
    expectAddressBudget(answer.headers, 'a malformed request line');
  });

  it(`answers more than ${MAX_HEADER_COUNT} header lines with 431 instead of dropping the rest`, async () => {
    const lines = (count: number) => Array.from({ length: count }, (_, i) => `X-H${i}: ${i}`);
    const tooMany = await rawExchange(server.url, ca, [
      head('GET', '/v1/account', [`Authorization: Bearer ${server.rootKey}`, ...lines(MAX_HEADER_COUNT)]),
    ]);
    expectEnvelope(tooMany, 431, 'headers_too_large');
    expect(tooMany.body.error.message).toMatch(/more than 1000 header lines/);
    expect(tooMany.headers['x-ratelimit-limit']).toBe('100000'); // after the guard: the account's budget
    const keyless = await rawExchange(server.url, ca, [
      head('GET', '/healthz', lines(MAX_HEADER_COUNT + 500)),
    ]);
    expectEnvelope(keyless, 431, 'headers_too_large');
    expectAddressBudget(keyless.headers, '1,501 header lines');
    // Exactly the limit is served (Host and Connection are two of the lines).
    const atLimit = await rawExchange(server.url, ca, [head('GET', '/healthz', lines(MAX_HEADER_COUNT - 2))]);
    expect(atLimit.status).toBe(200);
  });

  it('on WebSocket upgrades, refused or switched', async () => {
    const upgrade = (path: string) =>
      [
        `GET ${path} HTTP/1.1`,
        'Host: localhost',
        'Upgrade: websocket',
        'Connection: Upgrade',
        'Sec-WebSocket-Version: 13',
        'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
        '',
        '',
      ].join('\r\n');
    // To a route that is not a stream, without a key: the guard's 401.
    const notAStream = await firstAnswer(server.url, ca, upgrade('/v1/account'));
    expectEnvelope(notAStream, 401, 'authentication_failed');
    expectAddressBudget(notAStream.headers, 'an upgrade to a route that is not a stream');
    // To an unknown version.
    const unknown = await firstAnswer(server.url, ca, upgrade('/v3/metrics/stream'));
    expectEnvelope(unknown, 404, 'not_found');
    expectAddressBudget(unknown.headers, 'an upgrade to /v3');
    // A stream's 101 reports the address's budget without spending it (the stream spends its account's).
    const before = expectAddressBudget((await server.request('GET', '/healthz')).headers, '/healthz');
    const switched = await firstAnswer(server.url, ca, upgrade('/v1/metrics/stream'));
    expect(switched.status).toBe(101);
    expect(expectAddressBudget(switched.headers, 'a 101')).toBe(before);
  });
});

/**
 * The first answer on a TLS connection, read up to the end of its body (or of its head, for a 101);
 * the connection is then closed by us, whatever the server would do with it.
 */
function firstAnswer(url: string, ca: Buffer, text: string): Promise<RawAnswer> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    let received = Buffer.alloc(0);
    const socket = tls.connect({ host: hostname, port: Number(port), ca, servername: 'localhost' }, () =>
      socket.write(text),
    );
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no whole answer within 10 s: ${received.toString('utf8').slice(0, 300)}`));
    }, 10_000);
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const end = received.indexOf('\r\n\r\n');
      if (end === -1) return;
      const answer = parseAnswer(received.toString('utf8'));
      const length = answer.status === 101 ? 0 : Number(answer.headers['content-length'] ?? 0);
      if (received.length - end - 4 < length) return;
      clearTimeout(timer);
      socket.destroy();
      resolve(answer);
    });
    socket.on('error', () => {});
  });
}

describe('a whole-request deadline (NIMBUS_REQUEST_TIMEOUT_MS)', () => {
  let server: TestServer;
  let ca: Buffer;
  const deadlineMs = 1_000;
  beforeAll(async () => {
    server = await startTestServer({ env: { NIMBUS_REQUEST_TIMEOUT_MS: String(deadlineMs) } });
    ca = readFileSync(server.running.certFile);
  });
  afterAll(async () => {
    await server?.close();
  });

  /** Sends `first`, then one byte every `everyMs` until the server answers and closes; the answer and when. */
  function trickle(first: string, everyMs: number): Promise<{ answer: RawAnswer; elapsedMs: number }> {
    const { hostname, port } = new URL(server.url);
    const started = Date.now();
    return new Promise((resolve) => {
      const chunks: Buffer[] = [];
      let timer: NodeJS.Timeout | undefined;
      const socket = tls.connect({ host: hostname, port: Number(port), ca, servername: 'localhost' }, () => {
        socket.write(first);
        timer = setInterval(() => {
          if (!socket.destroyed) socket.write('x');
        }, everyMs);
      });
      socket.on('data', (chunk: Buffer) => chunks.push(chunk));
      socket.on('error', () => {});
      socket.on('close', () => {
        clearInterval(timer);
        resolve({
          answer: parseAnswer(Buffer.concat(chunks).toString('utf8')),
          elapsedMs: Date.now() - started,
        });
      });
    });
  }

  it('answers a body sent a byte at a time with 408 in the envelope, within the deadline', async () => {
    const { answer, elapsedMs } = await trickle(
      head('POST', '/v1/ssh-keys', [
        `Authorization: Bearer ${server.rootKey}`,
        'Content-Type: application/json',
        'Content-Length: 100000',
      ]),
      200,
    );
    expectEnvelope(answer, 408, 'request_timeout');
    expect(answer.headers['x-ratelimit-limit']).toMatch(/^\d+$/);
    expect(answer.headers['x-ratelimit-remaining']).toMatch(/^\d+$/);
    expect(answer.headers['x-ratelimit-reset']).toMatch(/^\d+$/);
    // The deadline plus Node's check interval (a quarter of it), with room for a loaded machine.
    expect(elapsedMs).toBeLessThan(deadlineMs * 5);
    expect(elapsedMs).toBeGreaterThanOrEqual(deadlineMs - 50);
  });

  it('answers headers sent a byte at a time with 408 too', async () => {
    const { answer, elapsedMs } = await trickle('GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: ', 200);
    expectEnvelope(answer, 408, 'request_timeout');
    expectAddressBudget(answer.headers, 'slow headers');
    expect(elapsedMs).toBeLessThan(deadlineMs * 5);
  });

  it('leaves a request that arrives in time alone', async () => {
    const reply = await server.request('POST', '/v1/ssh-keys', {
      key: server.rootKey,
      body: { name: 'on-time', public_key: 'not a key' },
    });
    expect(reply.status).toBe(400);
  });
});

describe('a per-address connection cap (NIMBUS_MAX_CONNECTIONS_PER_ADDRESS)', () => {
  let server: TestServer;
  let ca: Buffer;
  const cap = 3;
  beforeAll(async () => {
    server = await startTestServer({ env: { NIMBUS_MAX_CONNECTIONS_PER_ADDRESS: String(cap) } });
    ca = readFileSync(server.running.certFile);
  });
  afterAll(async () => {
    await server?.close();
  });

  /** Opens a TLS connection; resolves with it once the handshake is done, or with the error that ended it. */
  function connect(): Promise<tls.TLSSocket | Error> {
    const { hostname, port } = new URL(server.url);
    return new Promise((resolve) => {
      const socket = tls.connect({ host: hostname, port: Number(port), ca, servername: 'localhost' }, () =>
        resolve(socket),
      );
      socket.on('error', (error) => resolve(error));
      socket.on('close', () => resolve(new Error('closed before the handshake')));
    });
  }

  it('closes the connection past the cap, and takes new ones once a held one closes', async () => {
    const held: tls.TLSSocket[] = [];
    try {
      for (let i = 0; i < cap; i++) {
        const socket = await connect();
        expect(socket, `connection ${i + 1}`).toBeInstanceOf(tls.TLSSocket);
        held.push(socket as tls.TLSSocket);
      }
      const refused = await connect();
      expect(refused).toBeInstanceOf(Error);
      const again = await connect();
      expect(again).toBeInstanceOf(Error);
      // Logged once for the two refusals (at most once a minute).
      const logLines = () =>
        server
          .logs()
          .split('\n')
          .filter((line) => line.includes('per-address cap'));
      await waitFor('the refusal logged', () => (logLines().length === 1 ? true : undefined));
      expect(logLines()[0]).toContain('"cap":3');

      held.pop()?.destroy();
      const admitted = await waitFor('a connection admitted again', async () => {
        const socket = await connect();
        return socket instanceof tls.TLSSocket ? socket : undefined;
      });
      held.push(admitted);
      // A request on a held connection is served as usual.
      const reply = await new Promise<RawAnswer>((resolve) => {
        const chunks: Buffer[] = [];
        admitted.on('data', (chunk: Buffer) => chunks.push(chunk));
        admitted.on('close', () => resolve(parseAnswer(Buffer.concat(chunks).toString('utf8'))));
        admitted.write(head('GET', '/healthz'));
      });
      expect(reply.status).toBe(200);
      held.pop();
    } finally {
      for (const socket of held) socket.destroy();
    }
  });
});
