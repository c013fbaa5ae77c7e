/**
 * Metric streams hold their key to account as REST does (issue 29, items 3, 4 and the WebSocket part of
 * 7), over the real WSS server on both stores: a revoked or expired key, a suspended account and a lost
 * permission end open streams within the auth cache window; every subscribe is authorised anew; client
 * messages spend the account's rate budget and a flood is closed with 4429; oversized frames close
 * with 1009 and are logged once, as a client fault.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_PENDING_MESSAGES, RECHECK_MS } from '../src/resources/metrics/streams.js';
import { STORES } from './helpers/backends.js';
import { account, expectError, waitFor } from './helpers/common.js';
import { createRunning } from './helpers/instances.js';
import { openStream, type StreamClient } from './helpers/metrics-stream.js';
import { serverForSuite } from './helpers/server.js';

const AUTH_CACHE_SECONDS = 2;
/** Longest a stream may outlive what ends it: the auth cache's lifetime, then the next recheck. */
const WINDOW_MS = AUTH_CACHE_SECONDS * 1000 + RECHECK_MS;

/** How long after `sinceMs` the stream closed, with its code and the error message before it. */
async function closing(client: StreamClient, sinceMs: number) {
  const { code } = await client.closed;
  return {
    code,
    afterMs: Date.now() - sinceMs,
    error: client.received.find((m) => m.type === 'error'),
  };
}

describe.each(STORES)('Metric streams: authorisation and budget (%s)', (store) => {
  const server = serverForSuite({
    store,
    env: {
      NIMBUS_METRICS_INTERVAL_SECONDS: '1',
      NIMBUS_AUTH_CACHE_SECONDS: String(AUTH_CACHE_SECONDS),
    },
  });
  const open: StreamClient[] = [];
  const stream = (path: string, key: string) => {
    const client = openStream(server, path, { key });
    open.push(client);
    return client;
  };
  afterEach(async () => {
    for (const client of open.splice(0)) {
      client.close();
      await client.closed;
    }
  });

  async function keyOf(ownerKey: string, body: Record<string, unknown>) {
    const created = await server.request('POST', '/v1/account/api-keys', { key: ownerKey, body });
    expect(created.status, created.text).toBe(201);
    return created.body.data as { id: string; key: string };
  }

  it('a revoked key: its open stream closes 4401 at once, and REST refuses it', async () => {
    const owner = await account(server);
    const instance = (await createRunning(server, owner.key)).id;
    const viewer = await keyOf(owner.key, { name: 'viewer', permissions: ['monitoring:read'] });
    const client = stream(`/v1/instances/${instance}/metrics/stream`, viewer.key);
    await client.next('ready');
    client.send({ type: 'subscribe', interval: 1 });
    await client.next('metrics');
    const revokedAt = Date.now();
    const revoked = await server.request('DELETE', `/v1/account/api-keys/${viewer.id}`, { key: owner.key });
    expect(revoked.status, revoked.text).toBe(200);
    const closed = await closing(client, revokedAt);
    expect(closed.code).toBe(4401);
    expect(closed.error?.code).toBe('authentication_failed');
    expect(closed.afterMs).toBeLessThan(WINDOW_MS);
    expectError(
      await server.request('GET', '/v1/account', { key: viewer.key }),
      401,
      'authentication_failed',
    );
  });

  it('a revoked key cannot subscribe to an instance created after the revocation', async () => {
    const owner = await account(server);
    const viewer = await keyOf(owner.key, { name: 'viewer', permissions: ['monitoring:read'] });
    const client = stream('/v1/metrics/stream', viewer.key);
    await client.next('ready');
    expect(
      (await server.request('DELETE', `/v1/account/api-keys/${viewer.id}`, { key: owner.key })).status,
    ).toBe(200);
    const later = (await createRunning(server, owner.key)).id;
    client.send({ type: 'subscribe', interval: 1, instances: [later] });
    expect((await client.closed).code).toBe(4401);
    expect(client.received.map((m) => m.type)).not.toContain('subscribed');
    expect(client.received.map((m) => m.type)).not.toContain('metrics');
  });

  it('an expired key: its stream closes 4401 within the window after expires_at', async () => {
    const owner = await account(server);
    const instance = (await createRunning(server, owner.key)).id;
    const expiresAt = Date.now() + 3_000;
    const viewer = await keyOf(owner.key, {
      name: 'short-lived',
      permissions: ['monitoring:read'],
      expires_at: new Date(expiresAt).toISOString(),
    });
    const client = stream(`/v1/instances/${instance}/metrics/stream`, viewer.key);
    await client.next('ready');
    const closed = await closing(client, expiresAt);
    expect(closed.code).toBe(4401);
    expect(closed.afterMs).toBeGreaterThanOrEqual(0);
    expect(closed.afterMs).toBeLessThan(WINDOW_MS);
  });

  it('a suspended account: every stream of it closes 4403 (admin set-account-status)', async () => {
    const owner = await account(server);
    const instance = (await createRunning(server, owner.key)).id;
    const one = stream(`/v1/instances/${instance}/metrics/stream`, owner.key);
    const all = stream('/v1/metrics/stream', owner.key);
    await one.next('ready');
    await all.next('ready');
    const suspendedAt = Date.now();
    await server.admin('set-account-status', '--account', owner.id, '--status', 'suspended');
    for (const client of [one, all]) {
      const closed = await closing(client, suspendedAt);
      expect(closed.code).toBe(4403);
      expect(closed.error).toMatchObject({ code: 'forbidden', message: 'This account is suspended' });
      expect(closed.afterMs).toBeLessThan(WINDOW_MS);
    }
  });

  it('a permission taken from the key (no notice at all): 4403 within the auth cache window', async () => {
    const owner = await account(server);
    const instance = (await createRunning(server, owner.key)).id;
    const viewer = await keyOf(owner.key, { name: 'viewer', permissions: ['monitoring:read'] });
    const client = stream(`/v1/instances/${instance}/metrics/stream`, viewer.key);
    await client.next('ready');
    // As an operator's SQL would: nothing tells the server, so only the stream's own recheck can see it.
    await server.running.backends.store.db
      .updateTable('api_keys')
      .set({ permissions: JSON.stringify(['instances:read']) })
      .where('id', '=', viewer.id)
      .execute();
    const changedAt = Date.now();
    const closed = await closing(client, changedAt);
    expect(closed.code).toBe(4403);
    expect(closed.error?.details).toEqual({ required_permission: 'monitoring:read' });
    expect(closed.afterMs).toBeLessThan(WINDOW_MS + 500);
  });

  it("every subscribe is authorised: another account's instance is 4404, never data", async () => {
    const owner = await account(server);
    const stranger = await account(server);
    const theirs = (await createRunning(server, stranger.key)).id;
    const client = stream('/v1/metrics/stream', owner.key);
    await client.next('ready');
    client.send({ type: 'subscribe', interval: 1, instances: [theirs] });
    expect((await client.closed).code).toBe(4404);
    expect(client.received.find((m) => m.type === 'error')?.details).toEqual({
      resource: 'instance',
      id: theirs,
    });
    expect(client.received.some((m) => m.type === 'metrics' || m.type === 'subscribed')).toBe(false);
  });

  it('each client message spends a request of the account: past the budget, 4429', async () => {
    const limited = await server.createAccount({ perHour: 1_000, burst: 10 });
    const instance = (await createRunning(server, limited.key)).id;
    const before = (await server.request('GET', '/v1/account/rate-limit', { key: limited.key })).body.data;
    const client = stream(`/v1/instances/${instance}/metrics/stream`, limited.key);
    await client.next('ready');
    // One at a time, each answered: only the budget can end this.
    let answered = 0;
    for (let i = 0; i < before.burst_remaining + 5; i++) {
      client.send({ type: 'subscribe', interval: 1 + (i % 5) });
      const outcome = await Promise.race([client.next('subscribed').then(() => 'subscribed'), client.closed]);
      if (outcome !== 'subscribed') break;
      answered += 1;
    }
    const { code } = await client.closed;
    expect(code).toBe(4429);
    const error = client.received.find((m) => m.type === 'error');
    expect(error?.code).toBe('rate_limit_exceeded');
    expect(error?.details?.retry_after).toBeGreaterThan(0);
    // The stream took one request and each answered subscribe one more: the burst is spent.
    expect(answered).toBe(before.burst_remaining - 1);
    const after = (await server.request('GET', '/v1/account/rate-limit', { key: limited.key })).body.data;
    expect(after.burst_remaining).toBe(0);
    expect(before.remaining - after.remaining).toBeGreaterThanOrEqual(before.burst_remaining);
    expectError(await server.request('GET', '/v1/account', { key: limited.key }), 429, 'rate_limit_exceeded');
  });

  it('a flood of subscribes on one socket is closed with 4429 after a bounded number is handled', async () => {
    const owner = await server.createAccount({ perHour: 1_000_000, burst: 100_000 });
    const instance = (await createRunning(server, owner.key)).id;
    const before = (await server.request('GET', '/v1/account/rate-limit', { key: owner.key })).body.data;
    const client = stream(`/v1/instances/${instance}/metrics/stream`, owner.key);
    await client.next('ready');
    const text = JSON.stringify({ type: 'subscribe', interval: 2 });
    for (let i = 0; i < 5_000; i++) client.socket.send(text);
    const { code } = await client.closed;
    expect(code).toBe(4429);
    expect(client.received.find((m) => m.type === 'error')?.details).toEqual({
      max_pending_messages: MAX_PENDING_MESSAGES,
    });
    const handled = client.received.filter((m) => m.type === 'subscribed').length;
    expect(handled).toBeLessThan(5_000);
    // The budget paid for the stream and for every message the server handled before it closed.
    await waitFor('the budget to show the messages', async () => {
      const after = (await server.request('GET', '/v1/account/rate-limit', { key: owner.key })).body.data;
      return before.remaining - after.remaining >= handled + 1 ? true : undefined;
    });
  });

  it('oversized frames before any key: closed with 1009, logged once per address, never as an error', async () => {
    const logStart = server.logs().length;
    const big = 'x'.repeat(64 * 1024);
    for (let i = 0; i < 5; i++) {
      const client = openStream(server, '/v1/metrics/stream');
      client.send(big);
      expect((await client.closed).code).toBe(1009);
    }
    const lines = server
      .logs()
      .slice(logStart)
      .split('\n')
      .filter((line) => /payload|WebSocket/i.test(line));
    for (const line of lines) {
      const entry = JSON.parse(line) as { level: number; msg: string; stack?: string; err?: unknown };
      expect(entry.level).toBeLessThan(50);
      expect(entry.err).toBeUndefined();
      expect(line).not.toMatch(/\n\s+at /);
    }
    expect(lines).toHaveLength(1);
  });
});
