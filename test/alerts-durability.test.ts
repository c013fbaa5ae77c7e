/**
 * Alert notifications survive kill -9 (issue 21, item 4), on both stores: an incident opens and its
 * e-mail and chat notifications are on their way — the SMTP relay holds the message, the chat receiver
 * holds its answer — when the server is killed. A new process on the same data dir and database sends
 * each notification again (once the dead process's lease runs out), with the same delivery id, and opens
 * no second incident: after dropping repeats by that id, exactly one message per channel arrives.
 *
 * The real server runs as a child process (bin/nimbus serve, so `npm run build` first) with 1 s
 * collections; an `error` state policy fires at the first collection after a boot fails.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { STORES, storeForSuite } from './helpers/backends.js';
import { restartableServer } from './helpers/child-server.js';
import { waitFor } from './helpers/common.js';
import { COMPUTE, fault } from './helpers/instances.js';
import { startSmtpRelay } from './helpers/smtp-relay.js';
import { startReceiver } from './helpers/webhook-receiver.js';

const relay = await startSmtpRelay();
const receiver = await startReceiver();
afterAll(async () => {
  await relay.close();
  await receiver.close();
});

describe.each(STORES)('alert notifications through kill -9 (%s)', (store) => {
  const suite = storeForSuite(store, { dataDirPrefix: 'nimbus-alerts-durability-' });
  const child = restartableServer(suite, {
    env: {
      NIMBUS_SIM_SPEEDUP: '1000',
      NIMBUS_METRICS_INTERVAL_SECONDS: '1',
      NIMBUS_SMTP_URL: relay.url,
      NIMBUS_WEBHOOK_ALLOW_PRIVATE: '1',
      NIMBUS_WEBHOOK_CA_FILE: receiver.caFile,
    },
    atEnd: 'stop',
  });

  it('an incident whose notifications were under way when the server was killed notifies exactly once', async () => {
    const chatPath = `/durable-${store}`;
    const address = `durable-${store}@example.com`;
    // Both receivers hold what arrives for longer than the test waits before the kill.
    relay.delayData(20_000);
    receiver.answer(chatPath, { status: 200, delayMs: 20_000 });
    const live = await child.start();
    const key = live.rootKey;
    const created = await live.request('POST', '/v1/alerts', {
      key,
      body: {
        name: 'Broken boots',
        state: 'error',
        channels: { email: [address], chat: [{ url: `${receiver.origin}${chatPath}`, format: 'generic' }] },
      },
    });
    expect(created.status, created.text).toBe(201);
    const policyId = created.body.data.id as string;
    const instance = await live.request('POST', '/v1/instances', {
      key,
      body: { name: 'doomed', ...COMPUTE, ...fault('boot-error') },
    });
    expect(instance.status, instance.text).toBe(202);

    await waitFor(
      'the incident open and both notifications on their way',
      async () => {
        const list = await live.request('GET', `/v1/alerts/${policyId}/incidents`, { key });
        const open = list.body.data.length === 1;
        return open && relay.held() >= 1 && receiver.receivedAt(chatPath).length >= 1 ? true : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 50 },
    );
    await child.kill();
    const firstTry = receiver.receivedAt(chatPath)[0]?.headers['x-nimbus-delivery'];

    // From now on both answer at once.
    relay.delayData(0);
    receiver.answer(chatPath, { status: 200 });
    const restarted = await child.start();
    const incident = await waitFor(
      'both notifications delivered after the restart',
      async () => {
        const list = await restarted.request('GET', `/v1/alerts/${policyId}/incidents`, { key });
        const [only] = list.body.data;
        const done = only?.notifications.every((n: { status: string }) => n.status === 'succeeded');
        return list.body.data.length === 1 && done ? only : undefined;
      },
      // A notification leased by the killed process waits for its lease (30 s) to run out.
      { timeoutMs: 90_000, intervalMs: 250 },
    );
    expect(incident.status).toBe('firing');
    const email = incident.notifications.find((n: { channel: string }) => n.channel === 'email');
    const chat = incident.notifications.find((n: { channel: string }) => n.channel === 'chat');

    // Every copy that reached a receiver carries the notification's id; dropping repeats leaves one each.
    const chatIds = receiver.receivedAt(chatPath).map((r) => r.headers['x-nimbus-delivery']);
    expect(firstTry).toBe(chat.id);
    expect(new Set(chatIds)).toEqual(new Set([chat.id]));
    await waitFor('the held message accepted or dropped', () => (relay.held() === 0 ? true : undefined), {
      timeoutMs: 30_000,
    });
    const mails = relay.to(address);
    expect(mails.length).toBeGreaterThanOrEqual(1);
    expect(new Set(mails.map((m) => m.mail.messageId))).toEqual(new Set([`<${email.id}@nimbus>`]));
    // No second incident and no second firing event after the restart.
    const events = await restarted.request('GET', '/v1/events?type=alert.firing', { key });
    expect(events.body.data).toHaveLength(1);
  }, 180_000);
});
