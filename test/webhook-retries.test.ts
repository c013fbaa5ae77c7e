/**
 * Webhook retries on the manual clock (stepped mode: nothing is sent until the test runs the worker),
 * on both stores: the exact backoff from NIMBUS_WEBHOOK_RETRY_BASE_SECONDS doubling, 12 attempts with
 * one delivery id then `failed`, a success after failures, and a subscription whose deliveries have
 * all failed for 3 days disabled with its event.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/domain/clock.js';
import { STORES } from './helpers/backends.js';
import { account } from './helpers/common.js';
import { serverForSuite, type TestServer } from './helpers/server.js';
import { type Answer, type Receiver, startReceiver } from './helpers/webhook-receiver.js';

let receiver: Receiver;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver?.close();
});

const SECOND = 1000;
let pathCounter = 0;

describe.each(STORES)('webhook retries (%s)', (store) => {
  const clock = new ManualClock(new Date('2026-03-01T00:00:00Z'));
  const server = serverForSuite({
    store,
    clock,
    steppedJobs: true,
    env: {
      NIMBUS_WEBHOOK_ALLOW_PRIVATE: '1',
      get NIMBUS_WEBHOOK_CA_FILE() {
        return receiver.caFile;
      },
    },
  });
  const sendDue = () => server.running.backends.services.deliveries.runDue();

  async function hookWithEvent(s: TestServer, answer: Answer | (() => Answer)) {
    const { key } = await account(s);
    const at = `/retry-${store}-${++pathCounter}`;
    receiver.answer(at, answer);
    const hook = await s.request('POST', '/v1/webhooks', {
      key,
      body: { url: `${receiver.origin}${at}`, events: ['api_key.*'] },
    });
    expect(hook.status, hook.text).toBe(201);
    const made = await s.request('POST', '/v1/account/api-keys', {
      key,
      body: { name: 'makes an event', permissions: ['account:read'] },
    });
    expect(made.status, made.text).toBe(201);
    const deliveries = async () =>
      (await s.request('GET', `/v1/webhooks/${hook.body.data.id}/deliveries`, { key })).body.data;
    return { key, at, hookId: hook.body.data.id as string, deliveries };
  }

  it('retries after the base, doubling, 12 attempts with one delivery id, then fails', async () => {
    const { at, deliveries } = await hookWithEvent(server, { status: 500 });
    const start = clock.now().getTime();
    let expectedAt = start;
    for (let attempt = 1; attempt <= 12; attempt++) {
      // Just before it is due, nothing is sent.
      clock.set(new Date(expectedAt - 1));
      expect(await sendDue()).toBe(0);
      clock.set(new Date(expectedAt));
      expect(await sendDue()).toBe(1);
      const [delivery] = await deliveries();
      expect(delivery.attempts).toBe(attempt);
      expect(delivery.last_status_code).toBe(500);
      if (attempt < 12) {
        expectedAt += 60 * SECOND * 2 ** (attempt - 1);
        expect(delivery).toMatchObject({
          status: 'pending',
          next_attempt_at: new Date(expectedAt).toISOString(),
        });
      } else {
        expect(delivery).toMatchObject({ status: 'failed', next_attempt_at: null });
      }
    }
    // 60 s × (2^11 − 1) after the first attempt: about 34 hours.
    expect(expectedAt - start).toBe(60 * SECOND * (2 ** 11 - 1));
    const got = receiver.receivedAt(at);
    expect(got).toHaveLength(12);
    expect(new Set(got.map((r) => r.headers['x-nimbus-delivery'])).size).toBe(1);
    expect(new Set(got.map((r) => JSON.parse(r.body).id)).size).toBe(1);
    clock.advance(7 * 24 * 3600 * SECOND);
    expect(await sendDue()).toBe(0);
  });

  it('a success after failures settles the delivery', async () => {
    let calls = 0;
    const { deliveries } = await hookWithEvent(server, () => ({ status: ++calls < 3 ? 503 : 204 }));
    await sendDue();
    for (const wait of [60, 120]) {
      clock.advance(wait * SECOND);
      await sendDue();
    }
    expect((await deliveries())[0]).toMatchObject({
      status: 'succeeded',
      attempts: 3,
      last_status_code: 204,
    });
    expect(calls).toBe(3);
  });

  it('a subscription whose deliveries have all failed for 3 days is disabled, with webhook.disabled', async () => {
    const { key, hookId } = await hookWithEvent(server, { status: 500 });
    await sendDue();
    clock.advance(3 * 24 * 3600 * SECOND);
    // A later event whose delivery fails too, three days after the first failure.
    await server.request('POST', '/v1/account/api-keys', {
      key,
      body: { name: 'later', permissions: ['account:read'] },
    });
    await sendDue();
    const hook = await server.request('GET', `/v1/webhooks/${hookId}`, { key });
    expect(hook.body.data).toMatchObject({
      status: 'disabled',
      disabled_reason: 'Every delivery failed for 3 days',
    });
    const log = await server.request('GET', `/v1/webhooks/${hookId}/deliveries?status=pending`, { key });
    expect(log.body.data).toEqual([]);
    const events = await server.request('GET', `/v1/events?type=webhook.disabled&resource_id=${hookId}`, {
      key,
    });
    expect(events.body.data).toHaveLength(1);
    expect(events.body.data[0].data).toMatchObject({
      webhook_id: hookId,
      reason: 'Every delivery failed for 3 days',
    });
  });
});
