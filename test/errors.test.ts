/**
 * Every failure answers in the error envelope with the right code and status
 * (docs/design.md, "Envelope and errors").
 */

import { readFileSync } from 'node:fs';
import https from 'node:https';
import { describe, expect, it } from 'vitest';
import { STORES } from './helpers/backends.js';
import { expectErrorEnvelope } from './helpers/common.js';
import { serverForSuite, startTestServer } from './helpers/server.js';

describe.each(STORES)('error envelope (%s)', (store) => {
  const server = serverForSuite({ store });

  it('answers an unknown route with 404 not_found', async () => {
    const reply = await server.request('GET', '/v1/no-such-thing', { key: server.rootKey });
    expect(reply.status).toBe(404);
    expectErrorEnvelope(reply.body, 'not_found');
    const outside = await server.request('GET', '/nope');
    expect(outside.status).toBe(404);
    expectErrorEnvelope(outside.body, 'not_found');
  });

  it('answers a wrong method with 405 and an Allow header', async () => {
    const reply = await server.request('DELETE', '/v1/account', { key: server.rootKey });
    expect(reply.status).toBe(405);
    expectErrorEnvelope(reply.body, 'method_not_allowed');
    expect(reply.headers.allow).toBe('GET, HEAD, PATCH');
    expect(reply.body.error.details.allowed_values).toEqual(['GET', 'HEAD', 'PATCH']);
  });

  it('answers malformed JSON with 400 invalid_request', async () => {
    const reply = await server.request('PATCH', '/v1/account', {
      key: server.rootKey,
      rawBody: '{"name": ',
      headers: { 'content-type': 'application/json' },
    });
    expect(reply.status).toBe(400);
    expectErrorEnvelope(reply.body, 'invalid_request');
    expect(reply.body.error.message).toMatch(/JSON/);
  });

  it('answers a non-JSON Content-Type with 400 naming the header and the allowed value', async () => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml']) {
      const reply = await server.request('PATCH', '/v1/account', {
        key: server.rootKey,
        rawBody: 'name=x',
        headers: { 'content-type': type },
      });
      expect(reply.status, type).toBe(400);
      expectErrorEnvelope(reply.body, 'invalid_request');
      expect(reply.body.error.details).toEqual({
        field: 'Content-Type',
        value: type,
        allowed_values: ['application/json'],
      });
    }
  });

  it('answers a body over 1 MiB with 413 payload_too_large', async () => {
    const big = JSON.stringify({ name: 'x'.repeat(1024 * 1024) });
    const reply = await server.request('PATCH', '/v1/account', {
      key: server.rootKey,
      rawBody: big,
      headers: { 'content-type': 'application/json' },
    });
    expect(reply.status).toBe(413);
    expectErrorEnvelope(reply.body, 'payload_too_large');
  });

  it('answers a body over 1 MiB sent without Content-Length (chunked) with 413', async () => {
    const ca = readFileSync(server.running.certFile);
    const reply = await new Promise<{ status: number; body: any }>((resolve, reject) => {
      const req = https.request(
        `${server.url}/v1/account`,
        {
          method: 'PATCH',
          ca,
          servername: 'localhost',
          headers: { authorization: `Bearer ${server.rootKey}`, 'content-type': 'application/json' },
        },
        (res) => {
          let text = '';
          res.on('data', (c) => {
            text += c;
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
        },
      );
      req.on('error', reject);
      const chunk = 'x'.repeat(64 * 1024);
      req.write('{"name":"');
      for (let i = 0; i < 20; i++) req.write(chunk);
      req.end('"}');
    });
    expect(reply.status).toBe(413);
    expectErrorEnvelope(reply.body, 'payload_too_large');
  });

  it('names the field, the value and the allowed values when validation fails', async () => {
    const badEnum = await server.request('GET', '/v1/instance-types?order=sideways', { key: server.rootKey });
    expect(badEnum.status).toBe(400);
    expectErrorEnvelope(badEnum.body, 'invalid_request');
    expect(badEnum.body.error.details).toEqual({
      field: 'order',
      value: 'sideways',
      allowed_values: ['asc', 'desc'],
    });

    const tooBig = await server.request('GET', '/v1/regions?limit=500', { key: server.rootKey });
    expect(tooBig.status).toBe(400);
    expect(tooBig.body.error.details).toMatchObject({ field: 'limit', value: 500 });

    const missing = await server.request('POST', '/v1/account/api-keys', { key: server.rootKey, body: {} });
    expect(missing.status).toBe(400);
    expect(missing.body.error.details).toMatchObject({ field: 'name', value: null });
    expect(missing.body.error.message).toBe('name is required');

    const unknownField = await server.request('PATCH', '/v1/account', {
      key: server.rootKey,
      body: { plan: 'free' },
    });
    expect(unknownField.status).toBe(400);
    expect(unknownField.body.error.details).toMatchObject({ field: 'plan', value: 'free' });

    // JSON bodies are typed: nothing is converted (a number is not a name, a string not a list).
    const numberName = await server.request('POST', '/v1/account/api-keys', {
      key: server.rootKey,
      body: { name: 42 },
    });
    expect(numberName.status).toBe(400);
    expect(numberName.body.error.details).toMatchObject({ field: 'name', value: 42 });
    const stringList = await server.request('POST', '/v1/account/api-keys', {
      key: server.rootKey,
      body: { name: 'k', permissions: 'account:read' },
    });
    expect(stringList.status).toBe(400);
    expect(stringList.body.error.details).toMatchObject({ field: 'permissions', value: 'account:read' });
    const emptyCompany = await server.request('PATCH', '/v1/account', {
      key: server.rootKey,
      body: { company: '' },
    });
    expect(emptyCompany.status).toBe(400);
    expect(emptyCompany.body.error.details.field).toBe('company');

    const badPermission = await server.request('POST', '/v1/account/api-keys', {
      key: server.rootKey,
      body: { name: 'k', permissions: ['instances:delete'] },
    });
    expect(badPermission.status).toBe(400);
    expect(badPermission.body.error.details.field).toBe('permissions.0');
    expect(badPermission.body.error.details.allowed_values).toContain('instances:write');
  });
});

describe('internal errors', () => {
  it('answers 500 server_error without a stack trace, and readiness turns 503, when the store is gone', async () => {
    const server = await startTestServer();
    try {
      // Warm the key cache so authentication still passes; the handler's own query then fails.
      expect((await server.request('GET', '/v1/account', { key: server.rootKey })).status).toBe(200);
      await server.running.backends.store.close();

      const reply = await server.request('GET', '/v1/account/api-keys', { key: server.rootKey });
      expect(reply.status).toBe(500);
      expectErrorEnvelope(reply.body, 'server_error');
      expect(reply.body.error.message).toBe('Internal server error');
      expect(reply.text).not.toMatch(/destroyed|kysely|sqlite|stack/i);
      // The error is logged through request.log, so its line names the request it belongs to.
      const errorLine = server
        .logs()
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as Record<string, unknown>)
        .find((line) => line.msg === 'unhandled error');
      expect(errorLine?.request_id).toBe(reply.headers['x-request-id']);
      expect(errorLine?.level).toBe(50);

      const ready = await server.request('GET', '/readyz');
      expect(ready.status).toBe(503);
      expectErrorEnvelope(ready.body, 'service_unavailable');
      expect((await server.request('GET', '/healthz')).status).toBe(200);
    } finally {
      await server.close().catch(() => {});
    }
  });
});
