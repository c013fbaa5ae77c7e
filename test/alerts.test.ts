/**
 * Alert evaluation and notification (issue 21, items 2–4) over HTTPS on both stores, with a manual clock
 * driving the samples: every 10 s of simulated time the collector samples the running instances and the
 * evaluator judges them. The simulator's `nimbus.sim/metrics` tag pins an instance's CPU, so each sample
 * is the value the test set. Notifications go to real receivers: an SMTP relay (smtp-server, each message
 * parsed with mailparser) and an HTTPS receiver for chat posts and webhook deliveries.
 *
 * Each scenario has an account of its own, so policies that watch every instance see only its instances.
 */
import { createHmac } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/domain/clock.js';
import { STORES } from './helpers/backends.js';
import { account, expectInvalid } from './helpers/common.js';
import { createInstance, fault } from './helpers/instances.js';
import { serverForSuite, type TestServer } from './helpers/server.js';
import { startSmtpRelay } from './helpers/smtp-relay.js';
import { startReceiver } from './helpers/webhook-receiver.js';

const relay = await startSmtpRelay();
const tlsRelay = await startSmtpRelay({ tls: { user: 'nimbus', password: 'p@ss word' } });
const receiver = await startReceiver();
afterAll(async () => {
  await relay.close();
  await tlsRelay.close();
  await receiver.close();
});

const PIN = 'nimbus.sim/metrics';
const CONSOLE = 'https://console.example.test/console';
const TICK = 10_000;
const RETRY_BASE_SECONDS = 20;

type Json = Record<string, any>;

describe.each(STORES)('alerts (%s)', (store) => {
  const clock = new ManualClock(new Date('2026-04-06T12:00:00Z'));
  const server = serverForSuite({
    store,
    clock,
    steppedJobs: true,
    env: {
      NIMBUS_SIM_SPEEDUP: '1',
      NIMBUS_METRICS_INTERVAL_SECONDS: '10',
      NIMBUS_SMTP_URL: relay.url,
      NIMBUS_SMTP_FROM: 'Nimbus Alerts <alerts@nimbus.test>',
      NIMBUS_CONSOLE_URL: CONSOLE,
      NIMBUS_WEBHOOK_ALLOW_PRIVATE: '1',
      NIMBUS_WEBHOOK_CA_FILE: receiver.caFile,
      NIMBUS_WEBHOOK_RETRY_BASE_SECONDS: String(RETRY_BASE_SECONDS),
    },
  });
  /** A path of the receiver of this store's suite. */
  const at = (path: string) => `/${store}${path}`;
  /** An address of this store's suite (the relay is shared). */
  const mailbox = (name: string) => `${name}-${store}@example.com`;
  const url = (path: string) => `${receiver.origin}${at(path)}`;

  /** Runs every due job and webhook delivery until nothing is due. */
  async function settle(s: TestServer = server): Promise<void> {
    for (let round = 0; round < 100; round++) {
      const jobs = await s.running.backends.jobs.runDue();
      const deliveries = await s.running.backends.services.deliveries.runDue();
      if (jobs === 0 && deliveries === 0) return;
    }
    throw new Error('jobs kept coming due');
  }
  /** Moves time on by `n` collections, running what is due after each. */
  async function tick(n = 1): Promise<void> {
    for (let i = 0; i < n; i++) {
      clock.advance(TICK);
      await settle();
    }
  }
  async function policy(key: string, body: Json): Promise<Json> {
    const reply = await server.request('POST', '/v1/alerts', { key, body });
    expect(reply.status, reply.text).toBe(201);
    return reply.body.data;
  }
  async function incidents(key: string, policyId: string, query = ''): Promise<Json[]> {
    const reply = await server.request('GET', `/v1/alerts/${policyId}/incidents?limit=100${query}`, { key });
    expect(reply.status, reply.text).toBe(200);
    return reply.body.data;
  }
  async function setTags(key: string, id: string, tags: Record<string, string>): Promise<void> {
    const reply = await server.request('PATCH', `/v1/instances/${id}`, { key, body: { tags } });
    expect(reply.status, reply.text).toBe(200);
  }
  /** An instance that is running and pinned to `cpu` percent, plus `tags`. */
  async function pinned(key: string, name: string, cpu: number, tags: Record<string, string> = {}) {
    const instance = await createInstance(server, key, {
      name,
      tags: { ...tags, [PIN]: `cpu_percent=${cpu}` },
    });
    // The create's job starts the boot now; it takes 8 s of simulated time.
    await settle();
    await tick();
    const read = await server.request('GET', `/v1/instances/${instance.id}`, { key });
    expect(read.body.data.status).toBe('running');
    return instance.id as string;
  }
  async function cpuPoints(key: string, id: string): Promise<[string, number][]> {
    const reply = await server.request('GET', `/v1/instances/${id}/metrics?metrics=cpu_percent`, { key });
    expect(reply.status, reply.text).toBe(200);
    return reply.body.data.series[0].points;
  }
  const bodies = (path: string) => receiver.receivedAt(at(path)).map((r) => JSON.parse(r.body) as Json);

  it('fires once the window is covered and not before, stays one incident, resolves after a whole good window, one message per channel each way', async () => {
    const owner = await account(server);
    const hook = await server.request('POST', '/v1/webhooks', {
      key: owner.key,
      body: { url: url('/hook'), events: ['instance.created'], secret: 'alert-test-secret-0123456789' },
    });
    expect(hook.status, hook.text).toBe(201);
    const watched = await policy(owner.key, {
      name: 'High CPU',
      metric: 'cpu_percent',
      compare: 'above',
      threshold: 80,
      window: '1m',
      targets: { tags: { env: 'prod' } },
      channels: {
        email: [mailbox('oncall')],
        webhook_ids: [hook.body.data.id],
        chat: [
          { url: url('/slack'), format: 'slack' },
          { url: url('/discord'), format: 'discord' },
          { url: url('/generic'), format: 'generic' },
        ],
      },
    });
    const id = await pinned(owner.key, 'web-1', 95, { env: 'prod' });

    // 1 m at 10 s is six samples: nothing before the sixth, an incident at the tick that takes it.
    let fired: Json | undefined;
    for (let i = 0; i < 10 && !fired; i++) {
      await tick();
      const points = await cpuPoints(owner.key, id);
      const found = await incidents(owner.key, watched.id);
      if (points.length < 6) {
        expect(found, `${points.length} samples`).toEqual([]);
        continue;
      }
      expect(points.length).toBe(6);
      expect(found).toHaveLength(1);
      fired = found[0];
      expect(fired).toMatchObject({
        policy_id: watched.id,
        instance_id: id,
        instance_name: 'web-1',
        status: 'firing',
        value: 95,
        threshold: 80,
        resolved_at: null,
        resolution: null,
        started_at: (points.at(-1) as [string, number])[0],
      });
      expect(points.every(([, value]) => value === 95)).toBe(true);
    }
    expect(fired, 'an incident within ten collections').toBeDefined();
    const incident = fired as Json;

    // Still over the threshold: the same incident, no second one and no second message.
    await tick(5);
    expect(await incidents(owner.key, watched.id)).toHaveLength(1);
    const firing = (await incidents(owner.key, watched.id))[0] as Json;
    expect(firing.notifications).toHaveLength(5);
    for (const n of firing.notifications) {
      expect(n, JSON.stringify(n)).toMatchObject({
        transition: 'firing',
        status: 'succeeded',
        attempts: 1,
        last_error: null,
      });
    }
    expect(firing.notifications.map((n: Json) => n.channel).sort()).toEqual([
      'chat',
      'chat',
      'chat',
      'email',
      'webhook',
    ]);

    // The e-mail: text and HTML parts with the policy, instance, value, threshold, time and a console link.
    const mails = relay.to(mailbox('oncall')).filter((m) => m.mail.text?.includes(incident.id));
    expect(mails).toHaveLength(1);
    const mail = (mails[0] as (typeof mails)[number]).mail;
    const emailNote = firing.notifications.find((n: Json) => n.channel === 'email');
    expect(mail.subject).toBe('[FIRING] High CPU — web-1');
    expect(mail.from?.value).toEqual([{ address: 'alerts@nimbus.test', name: 'Nimbus Alerts' }]);
    expect(mail.messageId).toBe(`<${emailNote.id}@nimbus>`);
    expect(mail.headers.get('x-nimbus-delivery')).toBe(emailNote.id);
    const link = `${CONSOLE}/instances/${id}`;
    for (const part of [mail.text ?? '', String(mail.html)]) {
      for (const fact of ['High CPU', watched.id, 'web-1', id, '95 %', '80 %', incident.started_at, link]) {
        expect(part, fact).toContain(fact);
      }
    }
    expect(String(mail.html)).toContain(`<a href="${link}">`);

    // Chat: Slack's text + blocks, Discord's content + embeds, the generic event.
    const [slack] = bodies('/slack');
    expect(bodies('/slack')).toHaveLength(1);
    expect(slack?.text).toContain('FIRING: High CPU on web-1');
    expect(slack?.blocks[0]).toEqual({
      type: 'header',
      text: { type: 'plain_text', text: 'FIRING: High CPU' },
    });
    expect(JSON.stringify(slack?.blocks)).toContain(`<${link}|Open the instance in the console>`);
    const [discord] = bodies('/discord');
    expect(bodies('/discord')).toHaveLength(1);
    expect(discord?.content).toContain('95 %');
    expect(discord?.embeds[0]).toMatchObject({ title: 'FIRING: High CPU', url: link });
    expect(discord?.embeds[0].fields).toContainEqual({ name: 'Value', value: '95 %', inline: true });
    const [generic] = bodies('/generic');
    expect(bodies('/generic')).toHaveLength(1);
    expect(generic).toMatchObject({
      type: 'alert.firing',
      data: { alert_id: watched.id, incident_id: incident.id, instance_id: id, value: 95, threshold: 80 },
    });
    const chatNote = firing.notifications.find((n: Json) => n.target === url('/generic'));
    expect(receiver.receivedAt(at('/generic'))[0]?.headers['x-nimbus-delivery']).toBe(chatNote.id);

    // The webhook: the alert.firing event, signed like every delivery, though the subscription's own filter
    // takes only instance.created.
    const alertDeliveries = () =>
      receiver.receivedAt(at('/hook')).filter((d) => JSON.parse(d.body).type.startsWith('alert.'));
    const deliveries = alertDeliveries();
    expect(deliveries.map((d) => JSON.parse(d.body).type)).toEqual(['alert.firing']);
    const delivered = deliveries[0] as (typeof deliveries)[number];
    const expected = `sha256=${createHmac('sha256', 'alert-test-secret-0123456789').update(delivered.body).digest('hex')}`;
    expect(delivered.headers['x-nimbus-signature']).toBe(expected);
    expect(JSON.parse(delivered.body).data).toMatchObject({ incident_id: incident.id, value: 95 });

    // The event is in the outbox, and the incident lists by status.
    const events = await server.request('GET', '/v1/events?type=alert.firing', { key: owner.key });
    expect(events.body.data).toHaveLength(1);
    expect(events.body.data[0].data).toMatchObject({
      alert_id: watched.id,
      incident_id: incident.id,
      instance_id: id,
    });
    const listFiring = await server.request('GET', '/v1/alerts/incidents?status=firing', { key: owner.key });
    expect(listFiring.body.data.map((i: Json) => i.id)).toEqual([incident.id]);
    const listResolved = await server.request('GET', '/v1/alerts/incidents?status=resolved', {
      key: owner.key,
    });
    expect(listResolved.body.data).toEqual([]);
    expectInvalid(
      await server.request('GET', '/v1/alerts/incidents?status=open', { key: owner.key }),
      'status',
    );

    // Back under the threshold: still firing until a whole window of good samples.
    await setTags(owner.key, id, { env: 'prod', [PIN]: 'cpu_percent=10' });
    await tick(5);
    expect((await incidents(owner.key, watched.id))[0]?.status).toBe('firing');
    await tick();
    const [resolved] = await incidents(owner.key, watched.id);
    expect(resolved).toMatchObject({
      id: incident.id,
      status: 'resolved',
      resolution: 'recovered',
      resolved_value: 10,
      resolved_at: clock.now().toISOString(),
    });
    expect(resolved?.notifications.filter((n: Json) => n.transition === 'resolved')).toHaveLength(5);
    for (const n of resolved?.notifications ?? []) expect(n.status).toBe('succeeded');

    // Exactly one message per channel each way.
    const both = relay.to(mailbox('oncall')).filter((m) => m.mail.text?.includes(incident.id));
    expect(both.map((m) => m.mail.subject)).toEqual([
      '[FIRING] High CPU — web-1',
      '[RESOLVED] High CPU — web-1',
    ]);
    expect(both[1]?.mail.text).toContain('back on the good side for a whole window');
    for (const path of ['/slack', '/discord', '/generic']) expect(bodies(path), path).toHaveLength(2);
    expect(alertDeliveries()).toHaveLength(2);
    expect(bodies('/generic')[1]).toMatchObject({
      type: 'alert.resolved',
      data: { resolution: 'recovered' },
    });
    expect(JSON.parse(alertDeliveries()[1]?.body ?? '{}').type).toBe('alert.resolved');
    const after = await server.request('GET', '/v1/alerts/incidents?status=resolved', { key: owner.key });
    expect(after.body.data.map((i: Json) => i.id)).toEqual([incident.id]);
  });

  it('a value wobbling around the threshold gives one incident', async () => {
    const owner = await account(server);
    const id = await pinned(owner.key, 'wobbly', 90);
    const watched = await policy(owner.key, {
      name: 'Wobble',
      metric: 'cpu_percent',
      compare: 'above',
      threshold: 80,
      window: '1m',
      targets: { instance_ids: [id] },
      channels: { chat: [{ url: url('/wobble'), format: 'generic' }] },
    });
    // The average of the last six samples is over 80, then under it with samples over it, then over again:
    // one incident throughout, until six samples in a row are under it.
    const values = [75, 90, 75, 90, 75, 85, 70, 85, 70, 85, 70, 90, 75, 90, 75, 70, 70, 70, 70, 70];
    let resolvedAfter = -1;
    for (const [i, value] of values.entries()) {
      await setTags(owner.key, id, { [PIN]: `cpu_percent=${value}` });
      await tick();
      const found = await incidents(owner.key, watched.id);
      expect(found.length, `after sample ${i + 2}`).toBeLessThanOrEqual(1);
      if (found[0]?.status === 'resolved' && resolvedAfter < 0) resolvedAfter = i;
    }
    const found = await incidents(owner.key, watched.id);
    expect(found).toHaveLength(1);
    expect(found[0]).toMatchObject({ status: 'resolved', resolution: 'recovered' });
    // The last sample over the threshold is the 90 at index 13; index 14 (75) starts the first run of six
    // good samples, which ends at index 19.
    expect(resolvedAfter).toBe(19);
    expect(bodies('/wobble').map((b) => b.type)).toEqual(['alert.firing', 'alert.resolved']);
  });

  it('a stopped instance resolves its incidents, and so does a deleted one', async () => {
    const owner = await account(server);
    const stopped = await pinned(owner.key, 'to-stop', 97);
    const deleted = await pinned(owner.key, 'to-delete', 97);
    const watched = await policy(owner.key, {
      name: 'Hot',
      metric: 'cpu_percent',
      compare: 'above',
      threshold: 90,
      window: '1m',
      channels: { email: [mailbox('stops')] },
    });
    await tick(6);
    expect((await incidents(owner.key, watched.id)).map((i) => i.status)).toEqual(['firing', 'firing']);
    expect((await server.request('POST', `/v1/instances/${stopped}/stop`, { key: owner.key })).status).toBe(
      202,
    );
    expect((await server.request('DELETE', `/v1/instances/${deleted}`, { key: owner.key })).status).toBe(202);
    await tick();
    const found = await incidents(owner.key, watched.id);
    const byInstance = new Map(found.map((i) => [i.instance_id, i]));
    expect(byInstance.get(stopped)).toMatchObject({ status: 'resolved', resolution: 'instance_stopped' });
    expect(byInstance.get(deleted)).toMatchObject({ status: 'resolved', resolution: 'instance_deleted' });
    expect(relay.to(mailbox('stops')).map((m) => m.mail.subject?.slice(0, 10))).toEqual([
      '[FIRING] H',
      '[FIRING] H',
      '[RESOLVED]',
      '[RESOLVED]',
    ]);
    // Started again, it is judged afresh: a new window must fill before a new incident.
    await tick(2);
    expect((await server.request('POST', `/v1/instances/${stopped}/start`, { key: owner.key })).status).toBe(
      202,
    );
    await tick(3);
    expect((await incidents(owner.key, watched.id, '&status=firing')).length).toBe(0);
    await tick(5);
    expect((await incidents(owner.key, watched.id, '&status=firing')).map((i) => i.instance_id)).toEqual([
      stopped,
    ]);
  });

  it('tag targets follow tag changes', async () => {
    const owner = await account(server);
    const id = await pinned(owner.key, 'db-1', 88);
    const watched = await policy(owner.key, {
      name: 'DB hot',
      metric: 'cpu_percent',
      compare: 'above',
      threshold: 50,
      window: '1m',
      targets: { tags: { team: 'db' } },
      channels: { chat: [{ url: url('/tags'), format: 'generic' }] },
    });
    await tick(7);
    expect(await incidents(owner.key, watched.id)).toEqual([]);
    // Tagged: its samples already cover the window, so it fires at the next collection.
    await setTags(owner.key, id, { team: 'db', [PIN]: 'cpu_percent=88' });
    await tick();
    expect((await incidents(owner.key, watched.id)).map((i) => i.status)).toEqual(['firing']);
    // Untagged: the policy no longer watches it.
    await setTags(owner.key, id, { team: 'web', [PIN]: 'cpu_percent=88' });
    await tick();
    expect(await incidents(owner.key, watched.id)).toMatchObject([
      { status: 'resolved', resolution: 'no_longer_targeted' },
    ]);
    expect(bodies('/tags').map((b) => b.type)).toEqual(['alert.firing', 'alert.resolved']);
  });

  it('state policies: error fires at the next collection; stuck fires after its window; both resolve', async () => {
    const owner = await account(server);
    const broken = await policy(owner.key, {
      name: 'Broken',
      state: 'error',
      channels: { chat: [{ url: url('/state'), format: 'slack' }] },
    });
    const stuck = await policy(owner.key, {
      name: 'Stuck',
      state: 'stuck',
      window: '1m',
      channels: { chat: [{ url: url('/state'), format: 'generic' }] },
    });
    const failing = await createInstance(server, owner.key, { name: 'fails', ...fault('boot-error') });
    const hanging = await createInstance(server, owner.key, { name: 'hangs', ...fault('stuck-starting') });
    await settle();
    await tick();
    expect(
      (await server.request('GET', `/v1/instances/${failing.id}`, { key: owner.key })).body.data.status,
    ).toBe('error');
    await tick();
    expect(await incidents(owner.key, broken.id)).toMatchObject([
      { instance_id: failing.id, status: 'firing', value: null, threshold: null },
    ]);
    expect(await incidents(owner.key, stuck.id)).toEqual([]);
    await tick(5);
    const [hung] = await incidents(owner.key, stuck.id);
    expect(hung).toMatchObject({ instance_id: hanging.id, status: 'firing', threshold: 60 });
    expect(hung?.value).toBeGreaterThan(60);
    expect(hung?.value).toBeLessThanOrEqual(70);

    expect((await server.request('DELETE', `/v1/instances/${failing.id}`, { key: owner.key })).status).toBe(
      202,
    );
    expect(
      (
        await server.request('POST', `/v1/instances/${hanging.id}/stop`, {
          key: owner.key,
          body: { force: true },
        })
      ).status,
    ).toBe(202);
    await tick();
    expect(await incidents(owner.key, broken.id)).toMatchObject([
      { status: 'resolved', resolution: 'instance_deleted' },
    ]);
    expect(await incidents(owner.key, stuck.id)).toMatchObject([
      { status: 'resolved', resolution: 'instance_stopped' },
    ]);
    const posted = bodies('/state');
    expect(posted.filter((b) => 'blocks' in b).map((b) => b.text.slice(0, 9))).toEqual([
      'FIRING: B',
      'RESOLVED:',
    ]);
    expect(posted.filter((b) => 'type' in b).map((b) => b.type)).toEqual(['alert.firing', 'alert.resolved']);
  });

  it('failed notifications are retried like webhook deliveries, with the same delivery id', async () => {
    const owner = await account(server);
    receiver.answer(at('/flaky'), { status: 503 });
    relay.refuse(mailbox('flaky'), true);
    const id = await pinned(owner.key, 'flaky', 99);
    const watched = await policy(owner.key, {
      name: 'Flaky channels',
      metric: 'cpu_percent',
      compare: 'above',
      threshold: 90,
      window: '1m',
      targets: { instance_ids: [id] },
      channels: { email: [mailbox('flaky')], chat: [{ url: url('/flaky'), format: 'discord' }] },
    });
    let first: Json | undefined;
    for (let i = 0; i < 10 && !first; i++) {
      await tick();
      first = (await incidents(owner.key, watched.id))[0];
    }
    expect(first?.status).toBe('firing');
    const note = (channel: string, incident = first) =>
      incident?.notifications.find((n: Json) => n.channel === channel);
    expect(note('chat')).toMatchObject({
      status: 'pending',
      attempts: 1,
      last_error: 'The receiver answered 503',
    });
    expect(note('email')).toMatchObject({ status: 'pending', attempts: 1 });
    expect(note('email').last_error).toMatch(/550|mailbox unavailable/);

    receiver.answer(at('/flaky'), { status: 204 });
    relay.refuse(mailbox('flaky'), false);
    // Not before the retry delay, then once.
    await tick(1);
    expect(receiver.receivedAt(at('/flaky'))).toHaveLength(1);
    await tick(1);
    const [second] = await incidents(owner.key, watched.id);
    expect(note('chat', second)).toMatchObject({ status: 'succeeded', attempts: 2, last_error: null });
    expect(note('email', second)).toMatchObject({ status: 'succeeded', attempts: 2, last_error: null });
    const tries = receiver.receivedAt(at('/flaky'));
    expect(tries).toHaveLength(2);
    expect(new Set(tries.map((t) => t.headers['x-nimbus-delivery']))).toEqual(new Set([note('chat').id]));
    expect(relay.to(mailbox('flaky'))).toHaveLength(1);
    expect(relay.to(mailbox('flaky'))[0]?.mail.messageId).toBe(`<${note('email').id}@nimbus>`);
  });

  it('POST /v1/alerts/{id}/test sends to every channel now and answers with each outcome', async () => {
    const owner = await account(server);
    const hook = await server.request('POST', '/v1/webhooks', {
      key: owner.key,
      body: { url: url('/test-hook'), events: ['*'] },
    });
    receiver.answer(at('/test-broken'), { status: 500 });
    const watched = await policy(owner.key, {
      name: 'Channels check',
      metric: 'memory_percent',
      compare: 'above',
      threshold: 90,
      window: '5m',
      channels: {
        email: [mailbox('test')],
        webhook_ids: [hook.body.data.id],
        chat: [
          { url: url('/test-ok'), format: 'slack' },
          { url: url('/test-broken'), format: 'generic' },
        ],
      },
    });
    const reply = await server.request('POST', `/v1/alerts/${watched.id}/test`, { key: owner.key });
    expect(reply.status, reply.text).toBe(200);
    const results = reply.body.data.results as Json[];
    expect(reply.body.data.alert_id).toBe(watched.id);
    const byTarget = new Map(results.map((r) => [r.target, r]));
    expect(byTarget.get(hook.body.data.id)).toMatchObject({
      channel: 'webhook',
      status: 'succeeded',
      error: null,
    });
    expect(byTarget.get(mailbox('test'))).toMatchObject({
      channel: 'email',
      status: 'succeeded',
      error: null,
    });
    expect(byTarget.get(url('/test-ok'))).toMatchObject({ channel: 'chat', status: 'succeeded' });
    expect(byTarget.get(url('/test-broken'))).toMatchObject({
      channel: 'chat',
      status: 'failed',
      error: 'The receiver answered 500',
    });
    expect(relay.to(mailbox('test')).map((m) => m.mail.subject)).toEqual([
      '[TEST] Channels check — test notification',
    ]);
    expect(bodies('/test-ok')[0]?.text).toContain('TEST: Channels check');
    expect(bodies('/test-hook')[0]).toMatchObject({
      type: 'alert.firing',
      data: { alert_id: watched.id, test: true },
    });
    // A test opens no incident.
    expect(await incidents(owner.key, watched.id)).toEqual([]);
  });

  it('disabling a policy resolves its incidents (with their messages); deleting one resolves them too, then removes them', async () => {
    const owner = await account(server);
    const id = await pinned(owner.key, 'switch', 99);
    const watched = await policy(owner.key, {
      name: 'Switch',
      metric: 'cpu_percent',
      compare: 'above',
      threshold: 10,
      window: '1m',
      targets: { instance_ids: [id] },
      channels: { chat: [{ url: url('/switch'), format: 'generic' }] },
    });
    for (let i = 0; i < 10 && (await incidents(owner.key, watched.id)).length === 0; i++) await tick();
    expect((await incidents(owner.key, watched.id)).map((i) => i.status)).toEqual(['firing']);
    const off = await server.request('PATCH', `/v1/alerts/${watched.id}`, {
      key: owner.key,
      body: { enabled: false },
    });
    expect(off.status, off.text).toBe(200);
    await settle();
    expect(await incidents(owner.key, watched.id)).toMatchObject([
      { status: 'resolved', resolution: 'policy_disabled' },
    ]);
    await tick(3);
    expect(await incidents(owner.key, watched.id)).toHaveLength(1);
    // Switched on again: the window is already covered, so it fires at the next collection.
    await server.request('PATCH', `/v1/alerts/${watched.id}`, { key: owner.key, body: { enabled: true } });
    await tick();
    expect((await incidents(owner.key, watched.id)).map((i) => i.status)).toEqual(['firing', 'resolved']);
    expect(bodies('/switch').map((b) => b.type)).toEqual(['alert.firing', 'alert.resolved', 'alert.firing']);
    // Deleted while firing: the page is over, and the channels hear so (as a user of any cloud's alerts
    // expects), instead of the incident vanishing unresolved.
    expect((await server.request('DELETE', `/v1/alerts/${watched.id}`, { key: owner.key })).status).toBe(200);
    // Gone for the API at once, though its last message may still be on its way.
    expect((await server.request('GET', `/v1/alerts/${watched.id}`, { key: owner.key })).status).toBe(404);
    const listed = await server.request('GET', '/v1/alerts', { key: owner.key });
    expect(listed.body.data.map((p: Json) => p.id)).not.toContain(watched.id);
    expect((await server.request('GET', '/v1/alerts/incidents', { key: owner.key })).body.data).toEqual([]);
    await settle();
    expect(bodies('/switch').map((b) => b.type)).toEqual([
      'alert.firing',
      'alert.resolved',
      'alert.firing',
      'alert.resolved',
    ]);
    expect(bodies('/switch').at(-1)?.data).toMatchObject({
      alert_id: watched.id,
      instance_id: id,
      resolution: 'policy_deleted',
    });
    // Its message sent, the policy went with its incidents and notifications.
    const db = server.running.backends.store.db;
    expect(await db.selectFrom('alert_policies').select('id').where('id', '=', watched.id).execute()).toEqual(
      [],
    );
    expect(
      await db.selectFrom('alert_incidents').select('id').where('policy_id', '=', watched.id).execute(),
    ).toEqual([]);
    await tick(2);
    expect(bodies('/switch')).toHaveLength(4);
  });

  it('deleting a policy whose e-mail is refused keeps it, hidden, until the resolved message is settled', async () => {
    const owner = await account(server);
    const id = await pinned(owner.key, 'refused', 99);
    relay.refuse(mailbox('deleted'), true);
    const watched = await policy(owner.key, {
      name: 'Deleted while firing',
      metric: 'cpu_percent',
      compare: 'above',
      threshold: 10,
      window: '1m',
      targets: { instance_ids: [id] },
      channels: { email: [mailbox('deleted')] },
    });
    for (let i = 0; i < 10 && (await incidents(owner.key, watched.id)).length === 0; i++) await tick();
    expect((await server.request('DELETE', `/v1/alerts/${watched.id}`, { key: owner.key })).status).toBe(200);
    await settle();
    const db = server.running.backends.store.db;
    const kept = await db
      .selectFrom('alert_policies')
      .select(['id', 'deleted_at', 'enabled'])
      .where('id', '=', watched.id)
      .execute();
    expect(kept).toMatchObject([{ id: watched.id, enabled: 0 }]);
    expect(kept[0]?.deleted_at).not.toBeNull();
    expect((await server.request('GET', `/v1/alerts/${watched.id}`, { key: owner.key })).status).toBe(404);
    expect((await server.request('GET', '/v1/alerts/incidents', { key: owner.key })).body.data).toEqual([]);
    // The relay takes mail again: the retry delivers the resolved message, and the policy goes.
    relay.refuse(mailbox('deleted'), false);
    clock.advance(2 * RETRY_BASE_SECONDS * 1_000);
    await settle();
    const subjects = relay.to(mailbox('deleted')).map((m) => m.mail.subject);
    expect(subjects.filter((s) => s?.startsWith('[RESOLVED]'))).toHaveLength(1);
    expect(await db.selectFrom('alert_policies').select('id').where('id', '=', watched.id).execute()).toEqual(
      [],
    );
  });
});

describe('alert e-mail over smtps:// with a user and password', () => {
  const server = serverForSuite({
    store: 'sqlite',
    env: { NIMBUS_SMTP_URL: tlsRelay.url, NIMBUS_SMTP_CA_FILE: tlsRelay.caFile as string },
  });

  it('sends through the relay over TLS, authenticated', async () => {
    const owner = await account(server);
    const created = await server.request('POST', '/v1/alerts', {
      key: owner.key,
      body: { name: 'TLS', state: 'error', channels: { email: ['tls@example.com'] } },
    });
    expect(created.status, created.text).toBe(201);
    const reply = await server.request('POST', `/v1/alerts/${created.body.data.id}/test`, { key: owner.key });
    expect(reply.body.data.results).toMatchObject([{ channel: 'email', status: 'succeeded', error: null }]);
    expect(tlsRelay.to('tls@example.com')).toHaveLength(1);
    const mail = tlsRelay.to('tls@example.com')[0]?.mail;
    expect(mail?.text).toContain('instance in error');
    expect(String(mail?.html)).toContain('<table');
  });
});
