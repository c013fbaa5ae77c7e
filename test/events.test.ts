/**
 * The account's event log over HTTPS (GET /v1/events, GET /v1/events/{id}) on both stores: the webhook
 * payload's shape, newest first in insertion order (even when timestamps tie), pages, the type, family
 * (`api_key.*`), resource_id and since filters alone and combined, validation, and account isolation.
 * Events are produced by creating and deleting API keys; the clock is manual so timestamps are exact.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/domain/clock.js';
import { newId } from '../src/platform/domain/ids.js';
import { insertEvent } from '../src/platform/events/store.js';
import type { CreatedApiKey } from '../src/resources/account/api-key-service.js';
import type { EventView } from '../src/resources/events/service.js';
import { STORES } from './helpers/backends.js';
import { expectInvalid } from './helpers/common.js';
import { serverForSuite, type TestServer } from './helpers/server.js';

const SECOND = 1000;

async function createKey(server: TestServer, key: string, name: string): Promise<CreatedApiKey> {
  const reply = await server.request('POST', '/v1/account/api-keys', {
    key,
    body: { name, permissions: ['account:read'] },
  });
  expect(reply.status, reply.text).toBe(201);
  return reply.body.data as CreatedApiKey;
}

async function deleteKey(server: TestServer, key: string, id: string): Promise<void> {
  const reply = await server.request('DELETE', `/v1/account/api-keys/${id}`, { key });
  expect(reply.status, reply.text).toBe(200);
}

async function listEvents(server: TestServer, key: string, query = ''): Promise<EventView[]> {
  const reply = await server.request('GET', `/v1/events${query}`, { key });
  expect(reply.status, reply.text).toBe(200);
  return reply.body.data as EventView[];
}

/** What an event reports, in a form that reads well in a failed expectation. */
const summary = (events: EventView[]) => events.map((e) => `${e.type} ${e.resource_id}`);

describe.each(STORES)('events (%s)', (store) => {
  const clock = new ManualClock(new Date());
  const server = serverForSuite({ store, clock });

  /** A fresh account (its "admin" key makes the first event) and the id of that key. */
  async function freshAccount() {
    const account = await server.createAccount();
    const keys = await server.request('GET', '/v1/account/api-keys', { key: account.key });
    const adminKeyId = (keys.body.data as CreatedApiKey[]).find((k) => k.name === 'admin')?.id;
    expect(adminKeyId).toBeDefined();
    return { ...account, adminKeyId: adminKeyId as string };
  }

  it('lists the events newest first, in insertion order even within one millisecond, page by page', async () => {
    const account = await freshAccount();
    // The clock stands still: all four events share one timestamp, and only insertion order is left.
    const first = await createKey(server, account.key, 'first');
    const second = await createKey(server, account.key, 'second');
    await deleteKey(server, account.key, first.id);

    const reply = await server.request('GET', '/v1/events', { key: account.key });
    expect(reply.status).toBe(200);
    expect(reply.body.success).toBe(true);
    expect(reply.body.pagination).toEqual({
      page: 1,
      limit: 20,
      total_items: 4,
      total_pages: 1,
      has_next: false,
      has_prev: false,
    });
    const events = reply.body.data as EventView[];
    expect(summary(events)).toEqual([
      `api_key.deleted ${first.id}`,
      `api_key.created ${second.id}`,
      `api_key.created ${first.id}`,
      `api_key.created ${account.adminKeyId}`,
    ]);
    const at = clock.now().toISOString();
    expect(events[1]).toEqual({
      id: expect.stringMatching(/^evt_[0-9a-z]{26}$/),
      type: 'api_key.created',
      timestamp: at,
      resource_id: second.id,
      data: { api_key_id: second.id, name: 'second', permissions: ['account:read'] },
      actor: { type: 'api_key', id: account.adminKeyId, ip: '127.0.0.1' },
    });
    expect(events[0]?.data).toEqual({ api_key_id: first.id, name: 'first' });
    expect(new Set(events.map((e) => e.id)).size).toBe(4);
    for (const event of events) expect(event.timestamp).toBe(at);

    const pageOne = await server.request('GET', '/v1/events?limit=3', { key: account.key });
    expect(pageOne.body.pagination).toEqual({
      page: 1,
      limit: 3,
      total_items: 4,
      total_pages: 2,
      has_next: true,
      has_prev: false,
    });
    expect(pageOne.body.data).toEqual(events.slice(0, 3));
    const pageTwo = await server.request('GET', '/v1/events?limit=3&page=2', { key: account.key });
    expect(pageTwo.body.pagination).toMatchObject({ page: 2, has_next: false, has_prev: true });
    expect(pageTwo.body.data).toEqual(events.slice(3));

    expect(await listEvents(server, account.key, '?sort=created_at&order=asc')).toEqual(
      [...events].reverse(),
    );
  });

  it('gets one event by id, the same as listed; an unknown id is 404 not_found', async () => {
    const account = await freshAccount();
    await createKey(server, account.key, 'one');
    const [newest] = await listEvents(server, account.key);
    if (!newest) throw new Error('no event listed');

    const one = await server.request('GET', `/v1/events/${newest.id}`, { key: account.key });
    expect(one.status).toBe(200);
    expect(one.body.success).toBe(true);
    expect(one.body.data).toEqual(newest);

    const missing = await server.request('GET', '/v1/events/evt_doesnotexist', { key: account.key });
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('not_found');
  });

  it('filters by exact type, by family (api_key.*), by resource_id, and by all of them together', async () => {
    const account = await freshAccount();
    const kept = await createKey(server, account.key, 'kept');
    const gone = await createKey(server, account.key, 'gone');
    await deleteKey(server, account.key, gone.id);
    const q = (query: string) => listEvents(server, account.key, query).then(summary);

    expect(await q('?type=api_key.created')).toEqual([
      `api_key.created ${gone.id}`,
      `api_key.created ${kept.id}`,
      `api_key.created ${account.adminKeyId}`,
    ]);
    expect(await q('?type=api_key.deleted')).toEqual([`api_key.deleted ${gone.id}`]);
    expect(await q('?type=api_key.*')).toEqual(await q(''));
    expect(await q('?type=api_key.*')).toHaveLength(4);
    expect(await q('?type=instance.*')).toEqual([]);
    expect(await q('?type=instance.created')).toEqual([]);

    expect(await q(`?resource_id=${gone.id}`)).toEqual([
      `api_key.deleted ${gone.id}`,
      `api_key.created ${gone.id}`,
    ]);
    expect(await q(`?resource_id=${kept.id}`)).toEqual([`api_key.created ${kept.id}`]);
    expect(await q('?resource_id=key_nosuchkey')).toEqual([]);

    expect(await q(`?type=api_key.deleted&resource_id=${gone.id}`)).toEqual([`api_key.deleted ${gone.id}`]);
    expect(await q(`?type=api_key.deleted&resource_id=${kept.id}`)).toEqual([]);
    expect(await q(`?type=api_key.*&resource_id=${gone.id}&order=asc`)).toEqual([
      `api_key.created ${gone.id}`,
      `api_key.deleted ${gone.id}`,
    ]);

    // A filtered list pages over the filtered rows.
    const paged = await server.request('GET', '/v1/events?type=api_key.created&limit=2&page=2', {
      key: account.key,
    });
    expect(paged.body.pagination).toMatchObject({ page: 2, limit: 2, total_items: 3, total_pages: 2 });
    expect(summary(paged.body.data)).toEqual([`api_key.created ${account.adminKeyId}`]);
  });

  it('a family filter matches its prefix literally (the _ of api_key is no wildcard)', async () => {
    const account = await freshAccount();
    // Types no producer writes yet, inserted directly: the filter, not the producers, is under test.
    const db = server.running.backends.store.db;
    const now = clock.now();
    for (const type of ['apiXkey.created', 'api_keys.created', 'instance.created', 'instance_x.created']) {
      await insertEvent(db, {
        id: newId('event', now),
        account_id: account.id,
        type,
        resource_id: `res_${type}`,
        data: {},
        created_at: now.toISOString(),
      });
    }
    const types = async (query: string) => (await listEvents(server, account.key, query)).map((e) => e.type);
    expect(await types('?type=api_key.*')).toEqual(['api_key.created']);
    expect(await types('?type=instance.*')).toEqual(['instance.created']);
    // A family the catalogue does not have is refused, with the catalogue's types and families.
    const unknown = await server.request('GET', '/v1/events?type=api_keys.*', { key: account.key });
    expectInvalid(unknown, 'type');
    expect(unknown.body.error.details.allowed_values).toEqual(
      expect.arrayContaining(['api_key.created', 'instance.*', 'api_key.*']),
    );
  });

  it('since returns the events created at or after it (inclusive), alone and with other filters', async () => {
    const account = await freshAccount();
    const early = await createKey(server, account.key, 'early');
    clock.advance(SECOND);
    const middle = await createKey(server, account.key, 'middle');
    await deleteKey(server, account.key, early.id);
    clock.advance(SECOND);
    const late = await createKey(server, account.key, 'late');
    const q = (query: string) => listEvents(server, account.key, query).then(summary);

    const all = await listEvents(server, account.key);
    expect(all).toHaveLength(5);
    const middleCreated = all.find((e) => e.resource_id === middle.id);
    const earlyCreated = all.find((e) => e.resource_id === early.id && e.type === 'api_key.created');
    if (!middleCreated || !earlyCreated) throw new Error('events missing');
    const t1 = middleCreated.timestamp;
    expect(new Date(t1).getTime() - new Date(earlyCreated.timestamp).getTime()).toBe(SECOND);

    const sinceT1 = [
      `api_key.created ${late.id}`,
      `api_key.deleted ${early.id}`,
      `api_key.created ${middle.id}`,
    ];
    expect(await q(`?since=${encodeURIComponent(t1)}`)).toEqual(sinceT1);
    // The same instant written with an offset.
    const sameInstant = new Date(t1);
    const withOffset = `${new Date(sameInstant.getTime() + 2 * 3600 * SECOND).toISOString().slice(0, 23)}+02:00`;
    expect(await q(`?since=${encodeURIComponent(withOffset)}`)).toEqual(sinceT1);
    const justAfter = new Date(sameInstant.getTime() + 1).toISOString();
    expect(await q(`?since=${encodeURIComponent(justAfter)}`)).toEqual([`api_key.created ${late.id}`]);
    const justBefore = new Date(sameInstant.getTime() - 1).toISOString();
    expect(await q(`?since=${encodeURIComponent(justBefore)}`)).toEqual(sinceT1);
    expect(await q(`?since=${encodeURIComponent(earlyCreated.timestamp)}`)).toHaveLength(5);
    expect(await q(`?since=${encodeURIComponent(clock.now().toISOString())}`)).toEqual([
      `api_key.created ${late.id}`,
    ]);
    expect(
      await q(`?since=${encodeURIComponent(new Date(clock.now().getTime() + 1).toISOString())}`),
    ).toEqual([]);

    expect(await q(`?since=${encodeURIComponent(t1)}&type=api_key.created`)).toEqual([
      `api_key.created ${late.id}`,
      `api_key.created ${middle.id}`,
    ]);
    expect(await q(`?since=${encodeURIComponent(t1)}&resource_id=${early.id}`)).toEqual([
      `api_key.deleted ${early.id}`,
    ]);
    expect(
      await q(`?since=${encodeURIComponent(t1)}&type=api_key.*&resource_id=${early.id}&order=asc`),
    ).toEqual([`api_key.deleted ${early.id}`]);
  });

  it('rejects a malformed type, a malformed since and unknown parameters with 400 naming the field', async () => {
    const account = await freshAccount();
    const get = (query: string) => server.request('GET', `/v1/events${query}`, { key: account.key });
    for (const type of [
      'api_key',
      'API_KEY.created',
      'api_key.*.x',
      'api_key.created.x',
      '*',
      'api_key.cre*',
      'a-b.c',
    ]) {
      const reply = await get(`?type=${encodeURIComponent(type)}`);
      expectInvalid(reply, 'type');
      expect(reply.body.error.details.value).toBe(type);
    }
    expectInvalid(await get('?type=api_key.created&type=api_key.deleted'), 'type');
    for (const since of [
      'yesterday',
      '2026-01-01',
      '2026-01-01T00:00:00',
      '2026-13-01T00:00:00Z',
      '2026-06-30T23:59:60Z',
      '9999-12-31T23:00:00-02:00',
    ]) {
      expectInvalid(await get(`?since=${encodeURIComponent(since)}`), 'since');
    }
    expectInvalid(await get('?types=api_key.created'), 'types');
    expectInvalid(await get('?resource=key_x'), 'resource');
    expectInvalid(await get('?sort=type'), 'sort');
    expectInvalid(await get('?resource_id='), 'resource_id');
  });

  it('another account never sees these events, by list, by filter or by id', async () => {
    const owner = await freshAccount();
    const secret = await createKey(server, owner.key, 'secret');
    await deleteKey(server, owner.key, secret.id);
    const ownerEvents = await listEvents(server, owner.key, `?resource_id=${secret.id}`);
    expect(ownerEvents).toHaveLength(2);

    const other = await freshAccount();
    const empty = await server.request('GET', `/v1/events?resource_id=${secret.id}`, { key: other.key });
    expect(empty.status).toBe(200);
    expect(empty.body.data).toEqual([]);
    expect(empty.body.pagination).toMatchObject({ total_items: 0, total_pages: 0, has_next: false });
    expect(summary(await listEvents(server, other.key, '?limit=100'))).toEqual([
      `api_key.created ${other.adminKeyId}`,
    ]);
    expect(await listEvents(server, other.key, '?type=api_key.deleted')).toEqual([]);
    for (const event of ownerEvents) {
      const reply = await server.request('GET', `/v1/events/${event.id}`, { key: other.key });
      expect(reply.status).toBe(404);
      expect(reply.body.error.code).toBe('not_found');
      expect(reply.text).not.toContain(secret.id);
    }
    // The owner still reads them.
    const own = await server.request('GET', `/v1/events/${ownerEvents[0]?.id}`, { key: owner.key });
    expect(own.status).toBe(200);
  });

  it('needs account:read: a key holding it may read, one without it gets 403 forbidden', async () => {
    const account = await freshAccount();
    const reader = await createKey(server, account.key, 'reader');
    expect((await server.request('GET', '/v1/events', { key: reader.key })).status).toBe(200);
    const [newest] = await listEvents(server, account.key);
    const noAccount = await server.request('POST', '/v1/account/api-keys', {
      key: account.key,
      body: { name: `instances-${randomBytes(2).toString('hex')}`, permissions: ['instances:read'] },
    });
    expect(noAccount.status).toBe(201);
    for (const url of ['/v1/events', `/v1/events/${newest?.id}`]) {
      const reply = await server.request('GET', url, { key: noAccount.body.data.key });
      expect(reply.status, url).toBe(403);
      expect(reply.body.error.code).toBe('forbidden');
    }
    expect((await server.request('GET', '/v1/events')).status).toBe(401);
  });
});
