/**
 * Webhooks end to end (issue 12), over HTTPS to a real HTTPS receiver, on both stores: subscriptions and
 * their rules, deliveries of the events instances and keys write, the three signatures checked by
 * third-party verifiers, the delivery log, redelivery, test deliveries, 410, redirects, rotation, a slow
 * receiver, quotas and permissions. Retries on the manual clock are in webhook-retries.test.ts.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { verify as verifyGithubStyle } from '@octokit/webhooks-methods';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STORES } from './helpers/backends.js';
import { account, expectError, expectInvalid, waitFor } from './helpers/common.js';
import { COMPUTE } from './helpers/instances.js';
import { type Reply, serverForSuite, type TestServer } from './helpers/server.js';
import { type Received, type Receiver, startReceiver } from './helpers/webhook-receiver.js';

let receiver: Receiver;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver?.close();
});

let hookCounter = 0;
const newPath = () => `/hook-${++hookCounter}`;

async function subscribe(server: TestServer, key: string, body: Record<string, unknown>) {
  const reply = await server.request('POST', '/v1/webhooks', { key, body });
  expect(reply.status, reply.text).toBe(201);
  return reply.body.data as Record<string, any>;
}

/** Whether the body's `signature` is sha256= + HMAC over the body without it, checked in constant time. */
function bodySignatureValid(raw: string, secret: string): boolean {
  const { signature, ...unsigned } = JSON.parse(raw) as Record<string, unknown>;
  const expected = Buffer.from(
    `sha256=${createHmac('sha256', secret).update(JSON.stringify(unsigned)).digest('hex')}`,
  );
  const given = Buffer.from(String(signature));
  return given.length === expected.length && timingSafeEqual(given, expected);
}

const receivedAt = (at: string, timeoutMs = 10_000, count = 1) =>
  waitFor(
    `${count} request(s) at ${at}`,
    () => {
      const got = receiver.receivedAt(at);
      return got.length >= count ? got : undefined;
    },
    { timeoutMs, lastSeen: () => `${receiver.receivedAt(at).length} received` },
  );

describe.each(STORES)('webhooks (%s)', (store) => {
  const server = serverForSuite({
    store,
    env: {
      NIMBUS_WEBHOOK_ALLOW_PRIVATE: '1',
      get NIMBUS_WEBHOOK_CA_FILE() {
        return receiver.caFile;
      },
    },
  });

  it('delivers instance.created and instance.stopped signed three ways that stock verifiers accept', async () => {
    const { key } = await account(server);
    const at = newPath();
    const hook = await subscribe(server, key, {
      url: `${receiver.origin}${at}`,
      events: ['instance.created', 'instance.stopped'],
    });
    const secret = hook.secret as string;
    expect(secret).toMatch(/^whsec_/);
    expect(hook).toMatchObject({
      enabled: true,
      status: 'active',
      events: ['instance.created', 'instance.stopped'],
    });

    const created = await server.request('POST', '/v1/instances', {
      key,
      body: { name: 'hooked', ...COMPUTE },
    });
    expect(created.status, created.text).toBe(202);
    const id = created.body.data.id as string;
    const [first] = await receivedAt(at);
    const event = JSON.parse((first as Received).body);
    expect(event).toMatchObject({
      type: 'instance.created',
      data: { instance_id: id, name: 'hooked', status: 'starting' },
    });
    expect(Object.keys(event)).toEqual(['id', 'type', 'timestamp', 'data', 'signature']);

    await waitFor('running', async () => {
      const got = await server.request('GET', `/v1/instances/${id}`, { key });
      return got.body.data.status === 'running' ? true : undefined;
    });
    expect((await server.request('POST', `/v1/instances/${id}/stop`, { key })).status).toBe(202);
    const both = await receivedAt(at, 10_000, 2);
    const stopped = both[1] as Received;
    expect(JSON.parse(stopped.body)).toMatchObject({ type: 'instance.stopped', data: { instance_id: id } });

    for (const request of both) {
      expect(bodySignatureValid(request.body, secret)).toBe(true);
      expect(bodySignatureValid(request.body, `${secret}x`)).toBe(false);
      expect(
        await verifyGithubStyle(secret, request.body, String(request.headers['x-nimbus-signature'])),
      ).toBe(true);
      const standard = new StandardWebhook(secret, { format: 'raw' });
      expect(() => standard.verify(request.body, request.headers as Record<string, string>)).not.toThrow();
      expect(() =>
        new StandardWebhook('another-secret-entirely', { format: 'raw' }).verify(
          request.body,
          request.headers as Record<string, string>,
        ),
      ).toThrow();
      expect(request.headers['x-nimbus-event']).toBe(JSON.parse(request.body).type);
      expect(request.headers['x-nimbus-delivery']).toMatch(/^dlv_/);
      expect(request.headers['webhook-id']).toBe(request.headers['x-nimbus-delivery']);
      expect(request.headers['x-nimbus-timestamp']).toBe(request.headers['webhook-timestamp']);
      expect(request.headers['content-type']).toBe('application/json');
    }
  });

  it('the secret is shown once; a given secret is never echoed; lists and reads carry none', async () => {
    const { key } = await account(server);
    const given = await subscribe(server, key, {
      url: `${receiver.origin}${newPath()}`,
      events: ['*'],
      secret: 'a-secret-of-my-own-1234',
      description: 'mine',
    });
    expect(given).not.toHaveProperty('secret');
    const read = await server.request('GET', `/v1/webhooks/${given.id}`, { key });
    expect(read.status).toBe(200);
    expect(read.text).not.toContain('a-secret-of-my-own');
    const list = await server.request('GET', '/v1/webhooks', { key });
    expect(list.body.data.map((w: any) => w.id)).toContain(given.id);
    expect(list.text).not.toMatch(/secret-of-my-own|whsec_/);
    const created = await server.request('POST', '/v1/webhooks', {
      key,
      body: { url: `${receiver.origin}${newPath()}`, events: ['*'] },
    });
    expect(created.headers['cache-control']).toBe('no-store');
  });

  it('a generated secret is not kept for an idempotent replay, which answers without it', async () => {
    const { key } = await account(server);
    const options = {
      key,
      body: { url: `${receiver.origin}${newPath()}`, events: ['*'] },
      headers: { 'idempotency-key': `hook-${store}` },
    };
    const first = await server.request('POST', '/v1/webhooks', options);
    expect(first.status, first.text).toBe(201);
    const secret = first.body.data.secret as string;
    expect(secret).toMatch(/^whsec_/);
    const replay = await server.request('POST', '/v1/webhooks', options);
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.data.id).toBe(first.body.data.id);
    expect(replay.body.data).not.toHaveProperty('secret');
    const kept = await server.running.backends.store.db
      .selectFrom('idempotency_keys')
      .select('response_body')
      .where('key', '=', `hook-${store}`)
      .execute();
    expect(kept).toHaveLength(1);
    expect(kept[0]?.response_body).not.toContain(secret);
    const sealed = await server.running.backends.store.db
      .selectFrom('webhooks')
      .select('secret')
      .where('id', '=', first.body.data.id)
      .executeTakeFirstOrThrow();
    expect(sealed.secret).not.toContain(secret.slice(6));
  });

  it('the delivery log shows each attempt; a delivery can be read and redelivered as a new one', async () => {
    const { key } = await account(server);
    const at = newPath();
    const hook = await subscribe(server, key, { url: `${receiver.origin}${at}`, events: ['api_key.*'] });
    const made = await server.request('POST', '/v1/account/api-keys', {
      key,
      body: { name: 'for the log', permissions: ['account:read'] },
    });
    expect(made.status, made.text).toBe(201);
    await receivedAt(at);
    const log = await waitFor('a settled delivery', async () => {
      const got = await server.request('GET', `/v1/webhooks/${hook.id}/deliveries`, { key });
      return got.body.data[0]?.status === 'succeeded' ? got : undefined;
    });
    const [delivery] = log.body.data;
    expect(delivery).toMatchObject({
      webhook_id: hook.id,
      event_type: 'api_key.created',
      status: 'succeeded',
      attempts: 1,
      last_status_code: 200,
      last_error: null,
      response_excerpt: 'ok',
      next_attempt_at: null,
      redelivery_of: null,
    });
    expect(delivery.duration_ms).toBeGreaterThanOrEqual(0);
    const one = await server.request('GET', `/v1/webhooks/${hook.id}/deliveries/${delivery.id}`, { key });
    expect(one.body.data).toEqual(delivery);
    const filtered = await server.request('GET', `/v1/webhooks/${hook.id}/deliveries?status=failed`, { key });
    expect(filtered.body.data).toEqual([]);

    const again = await server.request(
      'POST',
      `/v1/webhooks/${hook.id}/deliveries/${delivery.id}/redeliver`,
      { key },
    );
    expect(again.status, again.text).toBe(202);
    expect(again.body.data).toMatchObject({
      status: 'pending',
      redelivery_of: delivery.id,
      event_id: delivery.event_id,
    });
    const both = await receivedAt(at, 10_000, 2);
    const [original, repeat] = both as [Received, Received];
    expect(JSON.parse(repeat.body).id).toBe(JSON.parse(original.body).id);
    expect(repeat.headers['x-nimbus-delivery']).toBe(again.body.data.id);
  });

  it('a test delivery is sent at once and answered with its outcome', async () => {
    const { key } = await account(server);
    const at = newPath();
    const hook = await subscribe(server, key, { url: `${receiver.origin}${at}`, events: ['instance.*'] });
    const tested = await server.request('POST', `/v1/webhooks/${hook.id}/test`, { key });
    expect(tested.status, tested.text).toBe(200);
    expect(tested.body.data).toMatchObject({
      event_type: 'webhook.test',
      status: 'succeeded',
      attempts: 1,
      last_status_code: 200,
    });
    const [got] = receiver.receivedAt(at);
    expect(JSON.parse((got as Received).body)).toMatchObject({
      type: 'webhook.test',
      data: { webhook_id: hook.id },
    });
  });

  it('410 Gone disables the subscription at once, with a reason and a webhook.disabled event', async () => {
    const { key } = await account(server);
    const at = newPath();
    receiver.answer(at, { status: 410 });
    const hook = await subscribe(server, key, { url: `${receiver.origin}${at}`, events: ['*'] });
    const tested = await server.request('POST', `/v1/webhooks/${hook.id}/test`, { key });
    expect(tested.body.data).toMatchObject({ status: 'failed', last_status_code: 410 });
    const read = await server.request('GET', `/v1/webhooks/${hook.id}`, { key });
    expect(read.body.data).toMatchObject({
      status: 'disabled',
      disabled_reason: expect.stringContaining('410'),
    });
    const events = await server.request('GET', `/v1/events?type=webhook.disabled&resource_id=${hook.id}`, {
      key,
    });
    expect(events.body.data).toHaveLength(1);
    // Enabling it again makes it active.
    const revived = await server.request('PATCH', `/v1/webhooks/${hook.id}`, {
      key,
      body: { enabled: true },
    });
    expect(revived.body.data).toMatchObject({ status: 'active', disabled_reason: null });
  });

  it('a redirect is not followed: the attempt fails with the 3xx and will be retried', async () => {
    const { key } = await account(server);
    const at = newPath();
    const target = newPath();
    receiver.answer(at, { status: 302, headers: { location: `${receiver.origin}${target}` } });
    const hook = await subscribe(server, key, { url: `${receiver.origin}${at}`, events: ['*'] });
    const tested = await server.request('POST', `/v1/webhooks/${hook.id}/test`, { key });
    expect(tested.body.data).toMatchObject({ status: 'pending', attempts: 1, last_status_code: 302 });
    expect(tested.body.data.next_attempt_at).not.toBeNull();
    expect(receiver.receivedAt(target)).toEqual([]);
  });

  it('after a rotation both secrets sign until the overlap ends; with no overlap only the new one', async () => {
    const { key } = await account(server);
    const at = newPath();
    const hook = await subscribe(server, key, {
      url: `${receiver.origin}${at}`,
      events: ['*'],
      secret: 'old-secret-0123456789',
    });
    const rotated = await server.request('POST', `/v1/webhooks/${hook.id}/rotate-secret`, {
      key,
      body: { secret: 'new-secret-0123456789', overlap_seconds: 3600 },
    });
    expect(rotated.status, rotated.text).toBe(200);
    expect(rotated.body.data.previous_secret_expires_at).not.toBeNull();
    expect(rotated.body.data).not.toHaveProperty('secret');
    await server.request('POST', `/v1/webhooks/${hook.id}/test`, { key });
    const [during] = receiver.receivedAt(at) as Received[];
    const header = String(during?.headers['x-nimbus-signature']);
    expect(header.split(',')).toHaveLength(2);
    for (const secret of ['old-secret-0123456789', 'new-secret-0123456789']) {
      const mine = header
        .split(',')
        .find(
          (s) => s === `sha256=${createHmac('sha256', secret).update(String(during?.body)).digest('hex')}`,
        );
      expect(mine, secret).toBeDefined();
      expect(() =>
        new StandardWebhook(secret, { format: 'raw' }).verify(
          String(during?.body),
          during?.headers as Record<string, string>,
        ),
      ).not.toThrow();
    }
    expect(bodySignatureValid(String(during?.body), 'new-secret-0123456789')).toBe(true);

    const generated = await server.request('POST', `/v1/webhooks/${hook.id}/rotate-secret`, {
      key,
      body: { overlap_seconds: 0 },
    });
    expect(generated.body.data.secret).toMatch(/^whsec_/);
    expect(generated.body.data.previous_secret_expires_at).toBeNull();
    await server.request('POST', `/v1/webhooks/${hook.id}/test`, { key });
    const after = receiver.receivedAt(at)[1] as Received;
    expect(String(after.headers['x-nimbus-signature']).split(',')).toHaveLength(1);
    expect(
      await verifyGithubStyle(
        generated.body.data.secret,
        after.body,
        String(after.headers['x-nimbus-signature']),
      ),
    ).toBe(true);
  });

  it('a slow receiver does not hold up deliveries to another', async () => {
    const { key } = await account(server);
    const slow = newPath();
    const fast = newPath();
    receiver.answer(slow, { status: 200, delayMs: 4_000 });
    await subscribe(server, key, { url: `${receiver.origin}${slow}`, events: ['api_key.created'] });
    await subscribe(server, key, { url: `${receiver.origin}${fast}`, events: ['api_key.created'] });
    const started = Date.now();
    for (let i = 0; i < 12; i++) {
      await server.request('POST', '/v1/account/api-keys', {
        key,
        body: { name: `k${i}`, permissions: ['account:read'] },
      });
    }
    await receivedAt(fast, 3_000, 12);
    expect(Date.now() - started).toBeLessThan(3_500);
    expect(receiver.receivedAt(slow).length).toBeLessThanOrEqual(12);
  });

  it('refuses bad subscriptions field by field', async () => {
    const { key } = await account(server);
    const url = `${receiver.origin}${newPath()}`;
    const bad = async (body: Record<string, unknown>, field: string) => {
      const reply = await server.request('POST', '/v1/webhooks', {
        key,
        body: { url, events: ['*'], ...body },
      });
      expectInvalid(reply, field);
      return reply;
    };
    const unknown = await bad({ events: ['instance.exploded'] }, 'events');
    expect(unknown.body.error.details.allowed_values).toEqual(
      expect.arrayContaining(['*', 'instance.*', 'instance.created']),
    );
    await bad({ events: ['volumes.*'] }, 'events');
    await bad({ secret: 'too-short' }, 'secret');
    await bad({ url: 'http://127.0.0.1/plain' }, 'url');
    await bad({ url: 'https://user:pass@127.0.0.1/creds' }, 'url');
    await bad({ url: 'not a url' }, 'url');
    await bad({ description: 'line\nbreak' }, 'description');
  });

  it('quotas, permissions and other accounts', async () => {
    const free = await server.createAccount({ plan: 'free', perHour: 1_000_000, burst: 100_000 });
    for (let i = 0; i < 5; i++)
      await subscribe(server, free.key, { url: `${receiver.origin}/q${i}`, events: ['*'] });
    const over = await server.request('POST', '/v1/webhooks', {
      key: free.key,
      body: { url: `${receiver.origin}/q5`, events: ['*'] },
    });
    expect(expectError(over, 403, 'quota_exceeded').details).toMatchObject({ quota: 'webhooks', limit: 5 });

    const owner = await account(server);
    const hook = await subscribe(server, owner.key, { url: `${receiver.origin}${newPath()}`, events: ['*'] });
    const readOnly = await server.request('POST', '/v1/account/api-keys', {
      key: owner.key,
      body: { name: 'reader', permissions: ['webhooks:read'] },
    });
    const reader = readOnly.body.data.key as string;
    expect((await server.request('GET', `/v1/webhooks/${hook.id}`, { key: reader })).status).toBe(200);
    expectError(
      await server.request('POST', '/v1/webhooks', {
        key: reader,
        body: { url: `${receiver.origin}/x`, events: ['*'] },
      }),
      403,
      'forbidden',
    );
    expectError(await server.request('DELETE', `/v1/webhooks/${hook.id}`, { key: reader }), 403, 'forbidden');

    const stranger = await account(server);
    for (const [method, path] of [
      ['GET', `/v1/webhooks/${hook.id}`],
      ['PATCH', `/v1/webhooks/${hook.id}`],
      ['DELETE', `/v1/webhooks/${hook.id}`],
      ['POST', `/v1/webhooks/${hook.id}/test`],
      ['GET', `/v1/webhooks/${hook.id}/deliveries`],
    ] as const) {
      const reply: Reply = await server.request(method, path, {
        key: stranger.key,
        ...(method === 'PATCH' ? { body: { enabled: false } } : {}),
      });
      expectError(reply, 404, 'not_found');
    }
    const deleted = await server.request('DELETE', `/v1/webhooks/${hook.id}`, { key: owner.key });
    expect(deleted.status).toBe(200);
    expectError(await server.request('GET', `/v1/webhooks/${hook.id}`, { key: owner.key }), 404, 'not_found');
  });

  it('serves the event catalogue', async () => {
    const types = await server.request('GET', '/v1/events/types', { key: server.rootKey });
    expect(types.status, types.text).toBe(200);
    const names = types.body.data.map((t: any) => t.type);
    expect(names).toEqual(
      expect.arrayContaining(['instance.created', 'instance.stopped', 'api_key.created', 'webhook.test']),
    );
    const created = types.body.data.find((t: any) => t.type === 'instance.created');
    expect(created.data.properties).toHaveProperty('instance_id');
  });
});

describe('webhook URLs and private addresses (NIMBUS_WEBHOOK_ALLOW_PRIVATE unset)', () => {
  const server = serverForSuite();

  it.each([
    ['loopback IPv4', 'https://127.0.0.1/hook'],
    ['loopback IPv6', 'https://[::1]/hook'],
    ['10/8', 'https://10.1.2.3/hook'],
    ['172.16/12', 'https://172.20.0.1/hook'],
    ['192.168/16', 'https://192.168.1.1/hook'],
    ['the metadata address', 'https://169.254.169.254/latest'],
    ['an IPv4-mapped loopback', 'https://[::ffff:127.0.0.1]/hook'],
    ['an IPv4-compatible loopback', 'https://[::7f00:1]/hook'],
    ['an IPv4-translated loopback', 'https://[::ffff:0:7f00:1]/hook'],
    ['a NAT64 form of the metadata address', 'https://[64:ff9b::a9fe:a9fe]/latest'],
    ['a 6to4 form of 10/8', 'https://[2002:a00:1::1]/hook'],
    ['NAT64 local use', 'https://[64:ff9b:1::808:808]/hook'],
    ['Teredo', 'https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/hook'],
    ['a name resolving to loopback', 'https://localhost/hook'],
    ['plain http', 'http://example.com/hook'],
    ['credentials', 'https://user:pass@example.com/hook'],
  ])('refuses %s', async (_label, url) => {
    const reply = await server.request('POST', '/v1/webhooks', {
      key: server.rootKey,
      body: { url, events: ['*'] },
    });
    expectInvalid(reply, 'url');
    expect(reply.body.error.details.value).toBe(url);
  });
});
