/**
 * Status and alert messages across replicas: two servers on one PostgreSQL database sharing Redis.
 * Replica B runs no jobs at all (its runner is stopped), so the transitions, the evaluations, the outbox
 * and the status relay all happen on replica A; a stream on B sees them only through the Redis
 * broadcaster. (Two servers in the test
 * process, as test/webhook-replicas.test.ts runs them: each has its own store pool, Redis connections,
 * broadcaster and job runner.)
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresDatabase, HAVE_POSTGRES, HAVE_REDIS, REDIS_URL } from './helpers/backends.js';
import { account } from './helpers/common.js';
import { act, createInstance, createRunning, fault, waitForStatus } from './helpers/instances.js';
import { openStream } from './helpers/metrics-stream.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { type SmtpRelay, startSmtpRelay } from './helpers/smtp-relay.js';

describe.runIf(HAVE_POSTGRES && HAVE_REDIS)('metric stream status across replicas (postgres + redis)', () => {
  const replicas: TestServer[] = [];
  let dropDatabase: (() => Promise<void>) | null = null;
  let relay: SmtpRelay | null = null;

  beforeAll(async () => {
    const database = await createPostgresDatabase();
    dropDatabase = database.drop;
    relay = await startSmtpRelay();
    const env = {
      NIMBUS_REDIS_URL: REDIS_URL,
      NIMBUS_METRICS_INTERVAL_SECONDS: '1',
      NIMBUS_SMTP_URL: relay.url,
    };
    replicas.push(await startTestServer({ databaseUrl: database.url, env }));
    replicas.push(await startTestServer({ databaseUrl: database.url, env }));
    await replicas[1]?.running.backends.jobs.stop();
  });
  afterAll(async () => {
    for (const replica of replicas) await replica.close();
    if (dropDatabase) await dropDatabase();
    await relay?.close();
  });

  it('a stream on replica B gets the transitions replica A makes', async () => {
    const [a, b] = replicas as [TestServer, TestServer];
    const { key } = await account(a);
    const id = (await createRunning(a, key)).id;
    const client = openStream(b, `/v1/instances/${id}/metrics/stream`, { key });
    expect(await client.next('ready')).toMatchObject({ statuses: { [id]: 'running' } });
    client.send({ type: 'subscribe', interval: 1 });
    await client.next('subscribed');
    // B samples the machine itself (the simulator answers any replica alike).
    expect((await client.next('metrics')).instance_id).toBe(id);
    expect((await act(a, key, id, 'stop')).status).toBe(202);
    const stopped = await client.next('status', 15_000);
    expect(stopped).toMatchObject({ instance_id: id, status: 'stopped', event: 'instance.stopped' });
    expect((await act(a, key, id, 'start')).status).toBe(202);
    expect(await client.next('status', 15_000)).toMatchObject({
      status: 'running',
      event: 'instance.started',
    });
    client.close();
    await client.closed;
  });

  it('a stream on replica B gets the alert incidents replica A opens', async () => {
    const [a, b] = replicas as [TestServer, TestServer];
    const { key } = await account(a);
    const failing = await createInstance(a, key, { name: 'fails', ...fault('boot-error') });
    await waitForStatus(a, key, failing.id, 'error');
    const client = openStream(b, '/v1/metrics/stream', { key });
    await client.next('ready');
    client.send({ type: 'subscribe', instances: [failing.id] });
    await client.next('subscribed');
    // The policy comes after the subscription, so its incident is news to the stream.
    const policy = await a.request('POST', '/v1/alerts', {
      key,
      body: { name: 'Broken', state: 'error', channels: { email: ['oncall@example.com'] } },
    });
    expect(policy.status, policy.text).toBe(201);
    expect(await client.next('alert', 20_000)).toMatchObject({
      event: 'alert.firing',
      instance_id: failing.id,
      policy_id: policy.body.data.id,
      name: 'Broken',
      state: 'error',
      metric: null,
    });
    client.close();
    await client.closed;
  });

  it('a key revoked on replica A ends its stream on replica B at once (the Redis notice, not the cache expiry)', async () => {
    const [a, b] = replicas as [TestServer, TestServer];
    const { key } = await account(a);
    const id = (await createRunning(a, key)).id;
    const viewer = await a.request('POST', '/v1/account/api-keys', {
      key,
      body: { name: 'viewer', permissions: ['monitoring:read'] },
    });
    expect(viewer.status, viewer.text).toBe(201);
    const client = openStream(b, `/v1/instances/${id}/metrics/stream`, { key: viewer.body.data.key });
    await client.next('ready');
    const revokedAt = Date.now();
    expect((await a.request('DELETE', `/v1/account/api-keys/${viewer.body.data.id}`, { key })).status).toBe(
      200,
    );
    expect((await client.closed).code).toBe(4401);
    // Well inside NIMBUS_AUTH_CACHE_SECONDS (5 s): B learnt of it from A's broadcast.
    expect(Date.now() - revokedAt).toBeLessThan(2_500);
  });
});
