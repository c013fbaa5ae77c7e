/**
 * An empty body is no body (issue 29 item 11): many clients send `Content-Type: application/json` on
 * every request, so the bodiless actions take an empty body with that header, framed with
 * `Content-Length: 0` or as an empty chunked body, on /v1 and /v2; a route that needs a body still
 * answers the 400 that names the first field it lacks.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { account, expectError } from './helpers/common.js';
import { createRunning, waitForStatus } from './helpers/instances.js';
import { rawExchange } from './helpers/raw-tls.js';
import { type Reply, serverForSuite, type TestServer } from './helpers/server.js';
import { attached, createAvailable, waitForVolume } from './helpers/volumes.js';
import { type Receiver, startReceiver } from './helpers/webhook-receiver.js';

let receiver: Receiver;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver?.close();
});

type Framing = 'content-length' | 'chunked';

/** POSTs an empty body with `Content-Type: application/json`, framed one way or the other. */
async function postEmpty(server: TestServer, key: string, path: string, framing: Framing): Promise<Reply> {
  if (framing === 'content-length') {
    const reply = await server.request('POST', path, {
      key,
      rawBody: '',
      headers: { 'content-type': 'application/json' },
    });
    expect(reply.headers['content-type']).toMatch(/^application\/json/);
    return reply;
  }
  const answer = await rawExchange(server.url, readFileSync(server.running.certFile), [
    [
      `POST ${path} HTTP/1.1`,
      'Host: localhost',
      `Authorization: Bearer ${key}`,
      'Content-Type: application/json',
      'Transfer-Encoding: chunked',
      'Connection: close',
      '',
      '0',
      '',
      '',
    ].join('\r\n'),
  ]);
  return { status: answer.status, headers: answer.headers, body: answer.body, text: answer.text };
}

function expectAccepted(reply: Reply, status: number, what: string): void {
  expect(reply.status, `${what}: ${reply.text.slice(-400)}`).toBe(status);
  expect(reply.body.success, what).toBe(true);
}

describe('bodiless actions take an empty JSON body', () => {
  const server = serverForSuite({
    env: {
      NIMBUS_WEBHOOK_ALLOW_PRIVATE: '1',
      get NIMBUS_WEBHOOK_CA_FILE() {
        return receiver.caFile;
      },
    },
  });

  describe.each(['v1', 'v2'])('on /%s', (version) => {
    it.each<Framing>(['content-length', 'chunked'])(
      'start, stop, restart, detach, webhook test, redeliver, rotate-secret and alert test (%s)',
      async (framing) => {
        const { key } = await account(server);
        const post = (path: string) => postEmpty(server, key, `/${version}${path}`, framing);
        const instance = await createRunning(server, key);

        expectAccepted(await post(`/instances/${instance.id}/restart`), 202, 'restart');
        await waitForStatus(server, key, instance.id, 'running');
        expectAccepted(await post(`/instances/${instance.id}/stop`), 202, 'stop');
        await waitForStatus(server, key, instance.id, 'stopped');
        expectAccepted(await post(`/instances/${instance.id}/start`), 202, 'start');
        await waitForStatus(server, key, instance.id, 'running');

        const volume = await createAvailable(server, key);
        await attached(server, key, volume.id, instance.id);
        expectAccepted(await post(`/volumes/${volume.id}/detach`), 202, 'detach');
        await waitForVolume(server, key, volume.id, 'available');

        const hook = await server.request('POST', '/v1/webhooks', {
          key,
          body: { url: `${receiver.origin}/empty-${version}-${framing}`, events: ['*'] },
        });
        expect(hook.status, hook.text).toBe(201);
        const hookId = hook.body.data.id as string;
        const test = await post(`/webhooks/${hookId}/test`);
        expectAccepted(test, 200, 'webhook test');
        expectAccepted(
          await post(`/webhooks/${hookId}/deliveries/${test.body.data.id}/redeliver`),
          202,
          'redeliver',
        );
        const rotated = await post(`/webhooks/${hookId}/rotate-secret`);
        expectAccepted(rotated, 200, 'rotate-secret');
        expect(rotated.body.data.secret).toMatch(/^whsec_/);

        const policy = await server.request('POST', '/v1/alerts', {
          key,
          body: { name: `empty-${version}-${framing}`, state: 'error', channels: { webhook_ids: [hookId] } },
        });
        expect(policy.status, policy.text).toBe(201);
        expectAccepted(await post(`/alerts/${policy.body.data.id}/test`), 200, 'alert test');
      },
    );
  });

  it.each<Framing>(['content-length', 'chunked'])(
    'a route that needs a body answers the 400 naming the first field it lacks (%s)',
    async (framing) => {
      const { key } = await account(server);
      const reply = await postEmpty(server, key, '/v1/instances', framing);
      const error = expectError(reply, 400, 'invalid_request');
      expect(error.message).toBe('name is required');
      expect(error.details).toEqual({ field: 'name', value: null });
      const resize = await postEmpty(server, key, '/v2/instances/ins_nope/resize', framing);
      expect(expectError(resize, 400, 'invalid_request').details).toMatchObject({
        field: 'instance_type',
        value: null,
        allowed_values: expect.arrayContaining(['compute-2x']),
      });
    },
  );

  it('a body of whitespace or a JSON null is not empty: the first is malformed, the second no body', async () => {
    const { key } = await account(server);
    const instance = await createRunning(server, key);
    const spaces = await server.request('POST', `/v1/instances/${instance.id}/stop`, {
      key,
      rawBody: '  ',
      headers: { 'content-type': 'application/json' },
    });
    expect(expectError(spaces, 400, 'invalid_request').details).toMatchObject({
      field: 'body',
      position: 2,
      line: 1,
      column: 3,
    });
    const nothing = await server.request('POST', `/v1/instances/${instance.id}/stop`, {
      key,
      rawBody: 'null',
      headers: { 'content-type': 'application/json' },
    });
    expectAccepted(nothing, 202, 'stop with null');
  });
});
