/**
 * Alert messages on the live metric streams (issue 21, item 3) over HTTPS/WSS on both stores, with the
 * real `ws` client and a manual clock driving the samples (as test/alerts.test.ts does): an incident that
 * fires and resolves on a watched instance reaches the streams of its account that watch it — the
 * instance's own stream and an account-wide one — and no other: not a stream of another instance, not
 * another account's stream. The clock stays where the collection that fired (or resolved) left it: the
 * transition makes the status relay due at its commit, so the messages do not wait for the relay's next
 * poll (which ran beside the evaluation in the same batch of due jobs, and is a second of clock away).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/domain/clock.js';
import { STORES } from './helpers/backends.js';
import { account } from './helpers/common.js';
import { createInstance } from './helpers/instances.js';
import { openStream, type StreamClient } from './helpers/metrics-stream.js';
import { serverForSuite } from './helpers/server.js';
import { startSmtpRelay } from './helpers/smtp-relay.js';

const relay = await startSmtpRelay();
afterAll(() => relay.close());

const PIN = 'nimbus.sim/metrics';
const TICK = 10_000;

type Json = Record<string, any>;

describe.each(STORES)('alert messages on metric streams (%s)', (store) => {
  const clock = new ManualClock(new Date('2026-04-06T12:00:00Z'));
  const server = serverForSuite({
    store,
    clock,
    steppedJobs: true,
    env: {
      NIMBUS_SIM_SPEEDUP: '1',
      NIMBUS_METRICS_INTERVAL_SECONDS: '10',
      NIMBUS_SMTP_URL: relay.url,
    },
  });
  const open: StreamClient[] = [];
  afterAll(async () => {
    for (const client of open.splice(0)) {
      client.close();
      await client.closed;
    }
  });

  /** Runs every due job (collections, evaluations, the status relay) until nothing is due. */
  async function settle(): Promise<void> {
    for (let round = 0; round < 100; round++) {
      if ((await server.running.backends.jobs.runDue()) === 0) return;
    }
    throw new Error('jobs kept coming due');
  }
  async function tick(): Promise<void> {
    clock.advance(TICK);
    await settle();
  }
  /** A running instance pinned to `cpu` percent. */
  async function pinned(key: string, name: string, cpu: number): Promise<string> {
    const instance = await createInstance(server, key, { name, tags: { [PIN]: `cpu_percent=${cpu}` } });
    await settle();
    await tick();
    return instance.id as string;
  }
  async function incidentsOf(key: string, policyId: string): Promise<Json[]> {
    const reply = await server.request('GET', `/v1/alerts/${policyId}/incidents`, { key });
    expect(reply.status, reply.text).toBe(200);
    return reply.body.data;
  }
  async function stream(key: string, path: string, subscribe?: Json): Promise<StreamClient> {
    const client = openStream(server, path, { key });
    open.push(client);
    await client.next('ready');
    if (subscribe) {
      client.send({ type: 'subscribe', ...subscribe });
      await client.next('subscribed');
    }
    return client;
  }
  const alerts = (client: StreamClient) => client.received.filter((m) => m.type === 'alert');

  it('a firing and then resolved incident reaches the streams watching its instance, only in its account', async () => {
    const owner = await account(server);
    const other = await account(server);
    const hot = await pinned(owner.key, 'hot', 95);
    const cool = await pinned(owner.key, 'cool', 10);
    const othersHot = await pinned(other.key, 'others-hot', 95);
    const reply = await server.request('POST', '/v1/alerts', {
      key: owner.key,
      body: {
        name: 'High CPU',
        metric: 'cpu_percent',
        compare: 'above',
        threshold: 80,
        window: '1m',
        channels: { email: [`oncall-${store}@example.com`] },
      },
    });
    expect(reply.status, reply.text).toBe(201);
    const policyId = reply.body.data.id as string;

    const own = await stream(owner.key, `/v1/instances/${hot}/metrics/stream`);
    const fleet = await stream(owner.key, '/v1/metrics/stream', { instances: [hot, cool] });
    const coolOnly = await stream(owner.key, `/v1/instances/${cool}/metrics/stream`);
    const othersStream = await stream(other.key, `/v1/instances/${othersHot}/metrics/stream`);

    let firing: Json | undefined;
    for (let i = 0; i < 10 && !firing; i++) {
      await tick();
      firing = (await incidentsOf(owner.key, policyId))[0];
    }
    expect(firing, 'an incident within ten collections').toBeDefined();
    const incident = firing as Json;
    const fired = {
      type: 'alert',
      event: 'alert.firing',
      instance_id: hot,
      policy_id: policyId,
      incident_id: incident.id,
      name: 'High CPU',
      metric: 'cpu_percent',
      compare: 'above',
      state: null,
      window: '1m',
      value: 95,
      threshold: 80,
      started_at: incident.started_at,
      resolved_at: null,
    };
    for (const client of [own, fleet]) {
      const message = await client.next('alert');
      expect(message).toMatchObject(fired);
      expect(Date.parse(message.timestamp)).toBeGreaterThanOrEqual(Date.parse(incident.started_at));
    }

    const back = await server.request('PATCH', `/v1/instances/${hot}`, {
      key: owner.key,
      body: { tags: { [PIN]: 'cpu_percent=10' } },
    });
    expect(back.status, back.text).toBe(200);
    let resolved: Json | undefined;
    for (let i = 0; i < 15 && !resolved; i++) {
      await tick();
      resolved = (await incidentsOf(owner.key, policyId)).find((found) => found.status === 'resolved');
    }
    expect(resolved, 'resolved within fifteen collections').toBeDefined();
    for (const client of [own, fleet]) {
      expect(await client.next('alert')).toMatchObject({
        ...fired,
        event: 'alert.resolved',
        value: 10,
        resolved_at: (resolved as Json).resolved_at,
      });
      // One message each way: nothing repeated while the incident stayed open.
      expect(alerts(client).map((m) => m.event)).toEqual(['alert.firing', 'alert.resolved']);
    }
    // The other streams were sent their messages as these were (the firing ones several collections ago).
    expect(alerts(coolOnly)).toEqual([]);
    expect(alerts(othersStream)).toEqual([]);
  });
});
