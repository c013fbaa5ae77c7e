/**
 * Two replicas on one PostgreSQL database, both running their delivery workers over the same deliveries,
 * never send one attempt twice: every event reaches the receiver exactly once (the receiver always
 * answers 200, so nothing is retried). They share NIMBUS_SECRET_KEY, as operations.md asks, so either
 * can open a secret the other sealed.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresDatabase, HAVE_POSTGRES } from './helpers/backends.js';
import { account, waitFor } from './helpers/common.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { type Receiver, startReceiver } from './helpers/webhook-receiver.js';

const EVENTS = 200;

describe.runIf(HAVE_POSTGRES)('webhook deliveries from two replicas (postgres)', () => {
  let receiver: Receiver;
  const replicas: TestServer[] = [];
  let dropDatabase: (() => Promise<void>) | null = null;

  beforeAll(async () => {
    receiver = await startReceiver();
    const database = await createPostgresDatabase();
    dropDatabase = database.drop;
    const env = {
      NIMBUS_WEBHOOK_ALLOW_PRIVATE: '1',
      NIMBUS_WEBHOOK_CA_FILE: receiver.caFile,
      NIMBUS_SECRET_KEY: randomBytes(32).toString('base64'),
    };
    replicas.push(await startTestServer({ databaseUrl: database.url, env }));
    replicas.push(await startTestServer({ databaseUrl: database.url, env }));
  });
  afterAll(async () => {
    for (const replica of replicas) await replica.close();
    if (dropDatabase) await dropDatabase();
    await receiver?.close();
  });

  it(`${EVENTS} events made through both replicas, each delivered exactly once`, async () => {
    const [a, b] = replicas as [TestServer, TestServer];
    const { key } = await account(a);
    const hook = await a.request('POST', '/v1/webhooks', {
      key,
      body: { url: `${receiver.origin}/replicas`, events: ['api_key.*'] },
    });
    expect(hook.status, hook.text).toBe(201);
    // Keys made and deleted through both replicas: two events each.
    for (let i = 0; i < EVENTS / 2; i++) {
      const through = i % 2 === 0 ? a : b;
      const made = await through.request('POST', '/v1/account/api-keys', {
        key,
        body: { name: `k${i}`, permissions: ['account:read'] },
      });
      expect(made.status, made.text).toBe(201);
      expect(
        (await through.request('DELETE', `/v1/account/api-keys/${made.body.data.id}`, { key })).status,
      ).toBe(200);
    }
    const got = await waitFor(
      'every delivery',
      () => {
        const received = receiver.receivedAt('/replicas');
        return received.length >= EVENTS ? received : undefined;
      },
      { timeoutMs: 30_000, lastSeen: () => String(receiver.receivedAt('/replicas').length) },
    );
    const eventIds = got.map((r) => JSON.parse(r.body).id as string);
    expect(new Set(eventIds).size).toBe(EVENTS);
    expect(eventIds).toHaveLength(EVENTS);
    // Each attempt is recorded once the receiver has answered: wait for the log to show them all.
    await waitFor('every delivery recorded as succeeded', async () => {
      const log = await a.request(
        'GET',
        `/v1/webhooks/${hook.body.data.id}/deliveries?status=succeeded&limit=1`,
        {
          key,
        },
      );
      return log.body.pagination.total_items === EVENTS ? true : undefined;
    });
    const all = receiver.receivedAt('/replicas');
    const sent = new Map<string, string[]>();
    for (const request of all) {
      const eventId = JSON.parse(request.body).id as string;
      sent.set(eventId, [...(sent.get(eventId) ?? []), String(request.headers['x-nimbus-delivery'])]);
    }
    expect([...sent].filter(([, deliveries]) => deliveries.length > 1)).toEqual([]);
    expect(all).toHaveLength(EVENTS);
  });
});
