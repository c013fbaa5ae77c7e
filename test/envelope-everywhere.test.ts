/**
 * Every answer is in the error envelope and says what a client can act on (issue 29 item 13):
 * validation errors list `allowed_values` wherever the schema has a set, whether the field is missing,
 * of the wrong type or of a wrong value (body, nested fields, query); malformed JSON names where and
 * why; the plain-HTTP refusal names the scheme; and the requests Node or `ws` used to answer on their
 * own (no Host, CONNECT, a bad WebSocket handshake, an upgrade to a route that is no stream) get the
 * envelope too, over raw TLS.
 */
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { IMAGES, INSTANCE_TYPES, REGION_NAMES } from '../src/resources/catalog/catalog.js';
import { FIREWALL_PRESETS } from '../src/resources/instances/rules.js';
import { BACKUP_FREQUENCIES } from '../src/resources/volumes/backup-schedule.js';
import { account, expectError } from './helpers/common.js';
import { COMPUTE } from './helpers/instances.js';
import { type RawAnswer, rawExchange } from './helpers/raw-tls.js';
import { sendRequest, serverForSuite, type TestServer } from './helpers/server.js';

/** The error envelope (docs/design.md, "Envelope and errors"), exactly: no field beyond those it names. */
function expectExactEnvelope(body: any, code: string): void {
  expect(Object.keys(body).sort()).toEqual(['error', 'metadata', 'success']);
  expect(body.success).toBe(false);
  expect(body.error.code).toBe(code);
  expect(typeof body.error.message).toBe('string');
  for (const field of Object.keys(body.error)) {
    expect(['code', 'message', 'details', 'retry_after']).toContain(field);
  }
  if ('details' in body.error) expect(typeof body.error.details).toBe('object');
  expect(Object.keys(body.metadata).sort()).toEqual(['request_id', 'timestamp']);
  expect(body.metadata.request_id).toMatch(/^req_/);
}

function expectRawEnvelope(answer: RawAnswer, status: number, code: string): any {
  expect(answer.status, answer.text.slice(0, 400)).toBe(status);
  expect(answer.headers['content-type']).toBe('application/json; charset=utf-8');
  expect(answer.headers['x-request-id']).toBe(answer.body?.metadata?.request_id);
  expectExactEnvelope(answer.body, code);
  return answer.body.error;
}

const STREAM_KEY = 'dGhlIHNhbXBsZSBub25jZQ==';

describe('every answer in the envelope, with details a client can use', () => {
  const server = serverForSuite();
  const ca = (s: TestServer) => readFileSync(s.running.certFile);
  const raw = (lines: string[]) => rawExchange(server.url, ca(server), [[...lines, '', ''].join('\r\n')]);
  const upgrade = (path: string, key: string, extra: string[] = [], method = 'GET') =>
    raw([
      `${method} ${path} HTTP/1.1`,
      'Host: localhost',
      `Authorization: Bearer ${key}`,
      'Connection: Upgrade',
      'Upgrade: websocket',
      'Sec-WebSocket-Version: 13',
      ...extra,
    ]);

  describe('allowed_values wherever the schema has a set', () => {
    const TYPES = INSTANCE_TYPES.map((t) => t.name);

    it('for a missing, mistyped or wrong enum field of a body, nested ones included', async () => {
      const { key } = await account(server);
      const create = (body: Record<string, unknown>) =>
        server.request('POST', '/v1/instances', { key, body });
      const { instance_type: _, ...withoutType } = COMPUTE;
      for (const [body, value] of [
        [{ name: 'a', ...withoutType }, null],
        [{ name: 'a', ...COMPUTE, instance_type: 5 }, 5],
        [{ name: 'a', ...COMPUTE, instance_type: 'compute-3x' }, 'compute-3x'],
      ] as const) {
        const error = expectError(await create(body), 400, 'invalid_request');
        expect(error.details).toEqual({ field: 'instance_type', value, allowed_values: TYPES });
      }
      const nested = await create({ name: 'a', ...COMPUTE, backup_schedule: { retention: 3 } });
      expect(expectError(nested, 400, 'invalid_request').details).toEqual({
        field: 'backup_schedule.frequency',
        value: null,
        allowed_values: [...BACKUP_FREQUENCIES],
      });
      // A union with null lists null among the values (PATCH /v1/alerts/{id}: metric may be cleared).
      // Validation comes before the handler, so no policy need exist.
      const cleared = await server.request('PATCH', '/v1/alerts/alr_none', { key, body: { metric: 7 } });
      const error = expectError(cleared, 400, 'invalid_request');
      expect(error.details?.field).toBe('metric');
      expect(error.details?.allowed_values).toContain('cpu_percent');
      expect(error.details?.allowed_values).toContain(null);
      expect(error.message).toMatch(/must be one of: .*cpu_percent.*, null$/);
    });

    it('for a query parameter given twice (the wrong type) or a wrong value', async () => {
      const { key } = await account(server);
      for (const query of ['order=up', 'order=asc&order=desc']) {
        const reply = await server.request('GET', `/v1/instances?${query}`, { key });
        expect(expectError(reply, 400, 'invalid_request').details).toMatchObject({
          field: 'order',
          allowed_values: ['asc', 'desc'],
        });
      }
    });

    it('property: every error about an enum field of a create names all its allowed values', async () => {
      const { key } = await account(server);
      const sets: Record<string, readonly unknown[]> = {
        instance_type: TYPES,
        region: REGION_NAMES,
        image: IMAGES.map((i) => i.name),
        firewall_preset: FIREWALL_PRESETS,
        'backup_schedule.frequency': BACKUP_FREQUENCIES,
      };
      const damage = fc.oneof(
        fc.constant({ omit: true as const }),
        fc.record({
          value: fc.oneof(
            fc.integer(),
            fc.boolean(),
            fc.constant(null),
            fc.string(),
            fc.array(fc.string(), { maxLength: 2 }),
            fc.constant({}),
          ),
        }),
      );
      const fieldDamage = fc.record(
        {
          instance_type: damage,
          region: damage,
          image: damage,
          firewall_preset: damage,
          frequency: damage,
        },
        { requiredKeys: [] },
      );
      await fc.assert(
        fc.asyncProperty(fieldDamage, async (damages) => {
          const body: Record<string, any> = {
            name: 'prop',
            ...COMPUTE,
            firewall_preset: 'web',
            backup_schedule: { frequency: 'daily', retention: 3 },
          };
          let damaged = false;
          for (const [field, change] of Object.entries(damages)) {
            const target = field === 'frequency' ? body.backup_schedule : body;
            if ('omit' in change) delete target[field];
            else target[field] = change.value;
            // Omitting an optional field, or a value that happens to be allowed, damages nothing.
            const set = sets[field === 'frequency' ? 'backup_schedule.frequency' : field] ?? [];
            const optional = field === 'firewall_preset' || field === 'frequency';
            if ('omit' in change ? !optional : !set.includes(change.value)) damaged = true;
          }
          fc.pre(damaged);
          const reply = await server.request('POST', '/v1/instances', { key, body });
          const error = expectError(reply, 400, 'invalid_request');
          const set = sets[String(error.details?.field)];
          expect(set, JSON.stringify(error)).toBeDefined();
          expect(error.details?.allowed_values, JSON.stringify(body)).toEqual([...(set ?? [])]);
        }),
        { numRuns: 60 },
      );
    });
  });

  describe('details on malformed JSON and on plain HTTP', () => {
    it('malformed JSON names the position, line, column and reason', async () => {
      const { key } = await account(server);
      const reply = await server.request('POST', '/v1/instances', {
        key,
        rawBody: '{\n  "name": "a",\n  "region": us-east-1\n}',
        headers: { 'content-type': 'application/json' },
      });
      const error = expectError(reply, 400, 'invalid_request');
      expectExactEnvelope(reply.body, 'invalid_request');
      expect(error.details).toEqual({
        field: 'body',
        position: 29,
        line: 3,
        column: 13,
        reason: 'expected a JSON value (an object, array, string, number, true, false or null)',
      });
    });

    it('the plain-HTTP refusal names the scheme required and whether a key was exposed', async () => {
      const keyless = await sendRequest(server.httpUrl!, null, 'GET', '/v1/account');
      expect(expectError(keyless, 400, 'invalid_request').details).toEqual({
        field: 'scheme',
        value: 'http',
        allowed_values: ['https'],
        api_key_exposed: false,
      });
      const keyed = await sendRequest(server.httpUrl!, null, 'GET', '/v1/instances/%ZZ', {
        key: 'nmb_leaked',
      });
      expect(expectError(keyed, 400, 'invalid_request').details).toMatchObject({
        field: 'scheme',
        api_key_exposed: true,
      });
    });
  });

  describe('what Node and ws answered on their own', () => {
    it('an HTTP/1.1 request without Host is a 400 naming the header; HTTP/1.0 needs none', async () => {
      const { key } = await account(server);
      const answer = await raw(['GET /v1/account HTTP/1.1', `Authorization: Bearer ${key}`]);
      const error = expectRawEnvelope(answer, 400, 'invalid_request');
      expect(error.details).toEqual({ field: 'Host', value: null });
      expect(answer.headers.connection).toBe('close');
      const old = await raw(['GET /v1/account HTTP/1.0', `Authorization: Bearer ${key}`]);
      expect(old.status, old.text.slice(0, 300)).toBe(200);
    });

    it('CONNECT is a 405 in the envelope (over plain HTTP, the HTTPS refusal)', async () => {
      const answer = await raw(['CONNECT example.com:443 HTTP/1.1', 'Host: example.com:443']);
      const error = expectRawEnvelope(answer, 405, 'method_not_allowed');
      expect(error.details).toEqual({
        method: 'CONNECT',
        allowed_values: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'],
      });
      expect(answer.headers.allow).toBe('GET, HEAD, POST, PUT, PATCH, DELETE');
      expect(answer.headers['x-ratelimit-limit']).toBeDefined();

      const { port } = new URL(server.httpUrl!);
      const { connect } = await import('node:net');
      const plain = await new Promise<string>((resolve) => {
        const socket = connect(Number(port), '127.0.0.1', () =>
          socket.write('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n'),
        );
        let text = '';
        socket.on('data', (chunk) => {
          text += chunk.toString();
        });
        socket.on('close', () => resolve(text));
      });
      expect(plain).toMatch(/^HTTP\/1\.1 400 /);
      expect(plain).toContain('"allowed_values":["https"]');
    });

    it('a bad Sec-WebSocket-Key, version or protocol on a stream is a 400 naming the header', async () => {
      const { key } = await account(server);
      const badKey = await upgrade('/v1/metrics/stream', key, ['Sec-WebSocket-Key: not-a-key']);
      expect(expectRawEnvelope(badKey, 400, 'invalid_request').details).toEqual({
        field: 'Sec-WebSocket-Key',
        value: 'not-a-key',
      });
      const noKey = await upgrade('/v2/metrics/stream', key);
      expect(expectRawEnvelope(noKey, 400, 'invalid_request').details.field).toBe('Sec-WebSocket-Key');
      const badVersion = await raw([
        'GET /v1/metrics/stream HTTP/1.1',
        'Host: localhost',
        'Connection: Upgrade',
        'Upgrade: websocket',
        'Sec-WebSocket-Version: 7',
        `Sec-WebSocket-Key: ${STREAM_KEY}`,
      ]);
      expect(expectRawEnvelope(badVersion, 400, 'invalid_request').details).toEqual({
        field: 'Sec-WebSocket-Version',
        value: '7',
        allowed_values: ['13', '8'],
      });
      expect(badVersion.headers['sec-websocket-version']).toBe('13, 8');
      const badProtocol = await upgrade('/v1/metrics/stream', key, [
        `Sec-WebSocket-Key: ${STREAM_KEY}`,
        'Sec-WebSocket-Protocol: a b,,',
      ]);
      expect(expectRawEnvelope(badProtocol, 400, 'invalid_request').message).toMatch(
        /Sec-WebSocket-Protocol/,
      );
    });

    it('an upgrade to a route that is not a stream is never a 101: 400, or 404 where nothing is', async () => {
      const { key } = await account(server);
      for (const [method, path] of [
        ['GET', '/v1/account'],
        ['GET', '/v2/instances'],
        ['POST', '/v1/instances'],
      ] as const) {
        const answer = await upgrade(path, key, [`Sec-WebSocket-Key: ${STREAM_KEY}`], method);
        expect(expectRawEnvelope(answer, 400, 'invalid_request').details).toEqual({
          field: 'Upgrade',
          value: 'websocket',
        });
      }
      const nowhere = await upgrade('/v1/no-such-stream', key, [`Sec-WebSocket-Key: ${STREAM_KEY}`]);
      expectRawEnvelope(nowhere, 404, 'not_found');
      const keyless = await raw([
        'GET /v1/account HTTP/1.1',
        'Host: localhost',
        'Connection: Upgrade',
        'Upgrade: websocket',
        'Sec-WebSocket-Version: 13',
        `Sec-WebSocket-Key: ${STREAM_KEY}`,
      ]);
      expectRawEnvelope(keyless, 401, 'authentication_failed');
    });

    it('a well-formed upgrade to a stream still switches protocols', async () => {
      const { key } = await account(server);
      const answer = await rawExchange(server.url, ca(server), [
        [
          'GET /v1/metrics/stream HTTP/1.1',
          'Host: localhost',
          `Authorization: Bearer ${key}`,
          'Connection: Upgrade',
          'Upgrade: websocket',
          'Sec-WebSocket-Version: 13',
          `Sec-WebSocket-Key: ${STREAM_KEY}`,
          '',
          // A close frame (masked, code 1000), so that the server ends the exchange.
          '',
        ].join('\r\n'),
        Buffer.from([0x88, 0x82, 0, 0, 0, 0, 0x03, 0xe8]),
      ]);
      expect(answer.text).toMatch(/^HTTP\/1\.1 101 /);
      expect(answer.headers['sec-websocket-accept']).toBe('s3pPLMBiTxaQ9kYGzzhZRbK+xOo=');
    });
  });
});
