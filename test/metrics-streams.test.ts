/**
 * Live metric streams over WSS on both stores, with the real `ws` client: authentication by header and
 * by first message, every close code, interval and metric changes, status messages on transitions, the
 * account-wide stream, the plain GET answer, and cross-account 4404.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PHASE_MS, phaseOf } from '../src/resources/metrics/streams.js';
import { STORES } from './helpers/backends.js';
import { account, expectError } from './helpers/common.js';
import { act, createRunning, waitForStatus } from './helpers/instances.js';
import { openStream, refusal, type StreamClient } from './helpers/metrics-stream.js';
import { serverForSuite } from './helpers/server.js';

const MAX_STREAMS = 3;

/** Status messages until one with `status` (the outbox has an event for each settled status). */
async function untilStatus(client: StreamClient, status: string): Promise<Record<string, any>> {
  for (;;) {
    const message = await client.next('status');
    if (message.status === status) return message;
  }
}

describe.each(STORES)('Metric streams (%s)', (store) => {
  const server = serverForSuite({
    store,
    env: { NIMBUS_METRICS_INTERVAL_SECONDS: '1', NIMBUS_METRICS_MAX_STREAMS: String(MAX_STREAMS) },
  });
  let owner = { id: '', key: '' };
  let instance = '';
  const open: StreamClient[] = [];
  const stream = (path: string, options: Parameters<typeof openStream>[2] = {}) => {
    const client = openStream(server, path, options);
    open.push(client);
    return client;
  };
  const endAll = async () => {
    for (const client of open.splice(0)) {
      client.close();
      await client.closed;
    }
  };

  beforeAll(async () => {
    owner = await account(server);
    instance = (await createRunning(server, owner.key)).id;
  });
  afterAll(endAll);

  it('header auth: ready, then a metrics message every interval; subscribe changes interval and metrics', async () => {
    const client = stream(`/v1/instances/${instance}/metrics/stream`, { key: owner.key });
    const ready = await client.next('ready');
    expect(ready).toMatchObject({ interval: 5, instances: [instance], statuses: { [instance]: 'running' } });
    const first = await client.next('metrics', 7_000);
    expect(first.instance_id).toBe(instance);
    // Sent in the instance's slot of the second, on the seconds the interval divides.
    const slot = phaseOf(instance) * PHASE_MS;
    expect(Date.parse(first.timestamp) % 1_000).toBe(slot);
    expect((Date.parse(first.timestamp) - slot) % 5_000).toBe(0);
    for (const metric of [
      'cpu_percent',
      'memory_used_bytes',
      'memory_total_bytes',
      'disk_read_bps',
      'net_tx_bps',
    ]) {
      expect(typeof first[metric]).toBe('number');
    }
    expect(first).not.toHaveProperty('gpu_percent');

    client.send({ type: 'subscribe', interval: 1, metrics: ['cpu_percent', 'net_rx_bps'] });
    expect(await client.next('subscribed')).toMatchObject({
      interval: 1,
      metrics: ['cpu_percent', 'net_rx_bps'],
    });
    const a = await client.next('metrics');
    const b = await client.next('metrics');
    expect(Date.parse(b.timestamp) - Date.parse(a.timestamp)).toBe(1_000);
    expect(Object.keys(b).sort()).toEqual(['cpu_percent', 'instance_id', 'net_rx_bps', 'timestamp', 'type']);

    client.send({ type: 'subscribe', interval: 2 });
    await client.next('subscribed');
    const c = await client.next('metrics');
    const d = await client.next('metrics');
    expect(Date.parse(d.timestamp) - Date.parse(c.timestamp)).toBe(2_000);
    expect((Date.parse(d.timestamp) - slot) % 2_000).toBe(0);
    await endAll();
  });

  it('X-API-Key header and a first auth message (browsers) are both accepted', async () => {
    const byHeader = stream(`/v1/instances/${instance}/metrics/stream`, {
      headers: { 'x-api-key': owner.key },
    });
    await byHeader.next('ready');
    const byMessage = stream(`/v1/instances/${instance}/metrics/stream`);
    byMessage.send({ type: 'auth', api_key: owner.key });
    expect(await byMessage.next('ready')).toMatchObject({ instances: [instance] });
    await endAll();
  });

  it('status messages arrive on transitions, metrics stop once the instance is stopped, a delete ends the stream', async () => {
    const id = (await createRunning(server, owner.key)).id;
    const client = stream(`/v1/instances/${id}/metrics/stream`, { key: owner.key });
    await client.next('ready');
    client.send({ type: 'subscribe', interval: 1 });
    await client.next('subscribed');
    await client.next('metrics');
    expect((await act(server, owner.key, id, 'stop')).status).toBe(202);
    const stopped = await untilStatus(client, 'stopped');
    expect(stopped).toMatchObject({ instance_id: id, event: 'instance.stopped' });
    await waitForStatus(server, owner.key, id, 'stopped');
    await client.next('status', 1_500).catch(() => undefined);
    const afterStop = client.received.filter(
      (m) => m.type === 'metrics' && Date.parse(m.timestamp) > Date.parse(stopped.timestamp) + 1_000,
    );
    expect(afterStop).toEqual([]);
    expect((await act(server, owner.key, id, 'start')).status).toBe(202);
    expect(await untilStatus(client, 'running')).toMatchObject({ event: 'instance.started' });
    expect((await client.next('metrics', 5_000)).instance_id).toBe(id);
    expect((await server.request('DELETE', `/v1/instances/${id}`, { key: owner.key })).status).toBe(202);
    expect(await client.closed).toEqual({ code: 1000, reason: 'The instance was deleted' });
    expect(client.received.filter((m) => m.type === 'status').map((m) => m.status)).toContain('deleted');
    open.splice(0);
  });

  it('the account-wide stream watches the instances a subscribe names', async () => {
    const second = (await createRunning(server, owner.key)).id;
    const client = stream('/v1/metrics/stream', { key: owner.key });
    expect(await client.next('ready')).toMatchObject({ instances: [] });
    client.send({ type: 'subscribe', interval: 1, instances: [instance, second] });
    expect(await client.next('subscribed')).toMatchObject({
      instances: [instance, second],
      statuses: { [instance]: 'running', [second]: 'running' },
    });
    const seen = new Set<string>();
    while (seen.size < 2) seen.add((await client.next('metrics')).instance_id);
    expect(seen).toEqual(new Set([instance, second]));
    await endAll();
  });

  it('a plain GET (no upgrade) goes through the guard and says where to connect', async () => {
    const reply = await server.request('GET', `/v1/instances/${instance}/metrics/stream`, { key: owner.key });
    expect(reply.status, reply.text).toBe(200);
    expect(reply.body.data).toMatchObject({
      protocol: 'websocket',
      instance_id: instance,
      status: 'running',
    });
    expect(reply.body.data.url).toMatch(/^wss:\/\/.+\/v1\/instances\/ins_\w+\/metrics\/stream$/);
    expectError(
      await server.request('GET', `/v1/instances/${instance}/metrics/stream`),
      401,
      'authentication_failed',
    );
  });

  describe('close codes', () => {
    const path = () => `/v1/instances/${instance}/metrics/stream`;

    it('4401: a wrong key in the header or the auth message, a first message that is not auth', async () => {
      const wrong = `nmb_${'x'.repeat(43)}`;
      for (const attempt of [
        { key: wrong },
        { first: { type: 'auth', api_key: wrong } },
        { first: { type: 'subscribe', interval: 1 } },
        { first: { type: 'auth', api_key: 42 } },
      ]) {
        const { code, error } = await refusal(server, path(), attempt);
        expect(code, JSON.stringify(attempt)).toBe(4401);
        expect(error?.code).toBe('authentication_failed');
      }
    });

    it('4401: no key within 5 s', async () => {
      const started = Date.now();
      const { code } = await refusal(server, path());
      expect(code).toBe(4401);
      expect(Date.now() - started).toBeGreaterThanOrEqual(4_900);
    });

    it('4403: a key without monitoring:read', async () => {
      const created = await server.request('POST', '/v1/account/api-keys', {
        key: owner.key,
        body: { name: 'no-monitoring', permissions: ['instances:read'] },
      });
      const { code, error } = await refusal(server, path(), { key: created.body.data.key });
      expect(code).toBe(4403);
      expect(error?.details).toEqual({ required_permission: 'monitoring:read' });
    });

    it("4404: another account's instance or a made-up one, on either stream", async () => {
      const stranger = await account(server);
      for (const id of [instance, 'ins_madeup']) {
        const { code, error } = await refusal(server, `/v1/instances/${id}/metrics/stream`, {
          key: stranger.key,
        });
        expect(code).toBe(4404);
        expect(error?.details).toEqual({ resource: 'instance', id });
      }
      const accountWide = openStream(server, '/v1/metrics/stream', { key: stranger.key });
      await accountWide.next('ready');
      accountWide.send({ type: 'subscribe', instances: [instance] });
      expect((await accountWide.closed).code).toBe(4404);
    });

    it('4429: more streams than the account may hold; a closed one makes room', async () => {
      const clients = Array.from({ length: MAX_STREAMS }, () => stream(path(), { key: owner.key }));
      for (const client of clients) await client.next('ready');
      const refused = await refusal(server, path(), { key: owner.key });
      expect(refused.code).toBe(4429);
      expect(refused.error?.details).toEqual({ max_streams: MAX_STREAMS });
      clients[0]?.close();
      await clients[0]?.closed;
      const again = stream(path(), { key: owner.key });
      await again.next('ready');
      await endAll();
    });

    it('4429: a stream is a request, and the rate limit refuses it like one', async () => {
      const limited = await server.createAccount({ perHour: 1_000, burst: 3 });
      const codes: number[] = [];
      for (let i = 0; i < 4; i++)
        codes.push(
          (await refusal(server, '/v1/instances/ins_madeup/metrics/stream', { key: limited.key })).code,
        );
      expect(codes).toEqual([4404, 4404, 4404, 4429]);
    });

    it.each([
      ['text that is not JSON', 'hello'],
      ['a JSON array', [1, 2]],
      ['an unknown type', { type: 'unsubscribe' }],
      ['interval 0', { type: 'subscribe', interval: 0 }],
      ['interval 61', { type: 'subscribe', interval: 61 }],
      ['a fractional interval', { type: 'subscribe', interval: 1.5 }],
      ['an unknown metric', { type: 'subscribe', metrics: ['load'] }],
      ['gpu_percent on a type without GPUs', { type: 'subscribe', metrics: ['gpu_percent'] }],
      ['an unknown field', { type: 'subscribe', interval: 5, colour: 'red' }],
      ['instances on a one-instance stream', { type: 'subscribe', instances: [] }],
      ['a second auth', { type: 'auth', api_key: 'x' }],
    ])('4400: %s', async (_, message) => {
      const client = stream(path(), { key: owner.key });
      await client.next('ready');
      client.send(message);
      const { code } = await client.closed;
      expect(code).toBe(4400);
      expect(client.received.find((m) => m.type === 'error')?.code).toBe('invalid_request');
      open.splice(0);
    });

    it('4400: more than 100 instances on the account-wide stream', async () => {
      const client = stream('/v1/metrics/stream', { key: owner.key });
      await client.next('ready');
      client.send({ type: 'subscribe', instances: Array.from({ length: 101 }, (_, i) => `ins_${i}`) });
      expect((await client.closed).code).toBe(4400);
      expect(client.received.find((m) => m.type === 'error')?.details).toMatchObject({ field: 'instances' });
      open.splice(0);
    });
  });
});
