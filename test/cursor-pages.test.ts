/**
 * Cursor pagination on /v2 (docs/design.md, "Versions and cursors"), over HTTPS on both stores: walking a list by
 * next_cursor gives exactly the pages /v1 gives by number, in every sort and order (ties, a nullable sort
 * column, filters, the in-memory catalogue, the event log), and walking back by prev_cursor gives them
 * again in reverse; the Link header names the same pages; every bad cursor — garbage, altered, made for
 * another sort, order, filter or list, or sent with `page` — is 400 invalid_request naming the field.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { INSTANCE_SORTS } from '../src/resources/instances/rules.js';
import { STORES } from './helpers/backends.js';
import { account, expectError, expectInvalid, sleep } from './helpers/common.js';
import { createInstance, waitForStatus } from './helpers/instances.js';
import { type Reply, serverForSuite } from './helpers/server.js';

type Json = Record<string, any>;

const ORDERS = ['asc', 'desc'] as const;
const both = <S extends string>(sorts: readonly S[]) =>
  sorts.flatMap((sort) => ORDERS.map((order) => [sort, order] as const));

/** Names with repeats, so sort=name has ties for the id to break; types repeat too. */
const INSTANCES = [
  ['web', 'compute-1x', 'us-east-1', 'prod'],
  ['db', 'memory-2x', 'us-west-2', 'prod'],
  ['web', 'compute-2x', 'us-east-1', 'dev'],
  ['cache', 'compute-1x', 'us-west-2', 'prod'],
  ['web', 'compute-1x', 'us-east-1', 'prod'],
  ['batch', 'compute-2x', 'us-east-1', 'dev'],
  ['db', 'memory-2x', 'us-east-1', 'prod'],
  ['api', 'compute-1x', 'us-west-2', 'dev'],
  ['api', 'compute-1x', 'us-east-1', 'prod'],
] as const;

describe.each(STORES)('cursor pages on /v2 (%s)', (store) => {
  const server = serverForSuite({ store });
  let key = '';

  const get = async (path: string): Promise<Reply> => {
    const reply = await server.request('GET', path, { key });
    expect(reply.status, `${path}: ${reply.text}`).toBe(200);
    return reply;
  };
  const idsOf = (reply: Reply) => (reply.body.data as Json[]).map((item) => String(item.id ?? item.name));
  const join = (...parts: string[]) => parts.filter((part) => part !== '').join('&');

  /** Every page of a /v1 list by number. */
  async function numberedPages(path: string, query: string, limit: number): Promise<string[][]> {
    const pages: string[][] = [];
    for (let page = 1; ; page++) {
      const reply = await get(`/v1${path}?${join(query, `limit=${limit}`, `page=${page}`)}`);
      pages.push(idsOf(reply));
      if (!reply.body.pagination.has_next) return pages;
    }
  }

  /**
   * Every page of a /v2 list by next_cursor from the first; then back by prev_cursor from the last, which
   * must give the same pages again. Checks the cursors are null exactly at the ends.
   */
  async function cursorPages(path: string, query: string, limit: number): Promise<string[][]> {
    const forward: string[][] = [];
    let reply = await get(`/v2${path}?${join(query, `limit=${limit}`)}`);
    expect(reply.body.pagination.prev_cursor).toBeNull();
    expect(reply.body.pagination).not.toHaveProperty('page');
    for (;;) {
      expect(reply.body.pagination.limit).toBe(limit);
      forward.push(idsOf(reply));
      const next = reply.body.pagination.next_cursor as string | null;
      if (next === null) break;
      expect(forward.length, 'a walk that does not end').toBeLessThan(100);
      reply = await get(`/v2${path}?${join(query, `limit=${limit}`, `cursor=${encodeURIComponent(next)}`)}`);
    }
    const backward: string[][] = [idsOf(reply)];
    for (let prev = reply.body.pagination.prev_cursor as string | null; prev !== null; ) {
      reply = await get(`/v2${path}?${join(query, `limit=${limit}`, `cursor=${encodeURIComponent(prev)}`)}`);
      backward.unshift(idsOf(reply));
      prev = reply.body.pagination.prev_cursor;
      expect(backward.length, 'a walk back that does not end').toBeLessThanOrEqual(forward.length);
    }
    expect(backward, 'walking back by prev_cursor').toEqual(forward);
    expect(reply.body.pagination.next_cursor === null).toBe(forward.length === 1);
    return forward;
  }

  async function expectSamePages(path: string, query: string, limits: number[] = [2, 3]) {
    for (const limit of limits) {
      const numbered = await numberedPages(path, query, limit);
      const cursored = await cursorPages(path, query, limit);
      // An empty list is one empty numbered page and one empty cursor page.
      expect(cursored, `${path}?${query} limit ${limit}`).toEqual(numbered);
    }
  }

  beforeAll(async () => {
    key = (await account(server)).key;
    const ids: string[] = [];
    for (const [name, instance_type, region, env] of INSTANCES) {
      ids.push((await createInstance(server, key, { name, instance_type, region, tags: { env } })).id);
    }
    // Settled, so that no status changes between the numbered and the cursor walks.
    for (const id of ids) await waitForStatus(server, key, id, 'running');
    const stop = await server.request('POST', `/v1/instances/${ids[1]}/stop`, { key });
    expect(stop.status, stop.text).toBe(202);
    await waitForStatus(server, key, ids[1] as string, 'stopped');

    // API keys: some used (last_used_at set), some never (null), to place the nulls.
    const made: string[] = [];
    for (let i = 0; i < 7; i++) {
      const reply = await server.request('POST', '/v1/account/api-keys', {
        key,
        body: { name: `key-${(i * 3) % 7}` },
      });
      expect(reply.status, reply.text).toBe(201);
      made.push(reply.body.data.key);
      await sleep(2);
    }
    for (const used of [made[1], made[4], made[5]]) {
      expect((await server.request('GET', '/v1/account', { key: used })).status).toBe(200);
    }
    await server.running.backends.services.apiKeys.flushLastUsed();
    const keys = (await get('/v1/account/api-keys?limit=100')).body.data as Json[];
    expect(keys.filter((k) => k.last_used_at !== null).length).toBeGreaterThanOrEqual(4);
  });

  it.each(both(INSTANCE_SORTS))(
    'instances sort=%s order=%s: cursor pages are the numbered pages',
    async (sort, order) => {
      await expectSamePages('/instances', `sort=${sort}&order=${order}`);
    },
  );

  it.each([
    'status=running',
    'region=us-east-1&sort=name&order=asc',
    'tag=env:prod&sort=instance_type',
    'name=web&tag=env:prod',
    'status=error',
  ])('instances filtered by %s: cursor pages are the numbered pages', async (query) => {
    await expectSamePages('/instances', query);
  });

  it.each(both(['created_at', 'name', 'size_gb'] as const))(
    'volumes sort=%s order=%s (sizes tie): cursor pages are the numbered pages',
    async (sort, order) => {
      await expectSamePages('/volumes', `sort=${sort}&order=${order}`, [3]);
    },
  );

  it.each(both(['created_at', 'name', 'last_used_at'] as const))(
    'API keys sort=%s order=%s (never-used keys have no last_used_at): cursor pages are the numbered pages',
    async (sort, order) => {
      await expectSamePages('/account/api-keys', `sort=${sort}&order=${order}`);
    },
  );

  it('places never-used keys as the oldest use: first ascending, last descending, on both stores', async () => {
    const asc = (await get('/v2/account/api-keys?sort=last_used_at&order=asc&limit=100')).body.data as Json[];
    const firstUsed = asc.findIndex((k) => k.last_used_at !== null);
    expect(firstUsed).toBeGreaterThan(0);
    expect(asc.slice(firstUsed).every((k) => k.last_used_at !== null)).toBe(true);
    const desc = (await get('/v2/account/api-keys?sort=last_used_at&order=desc&limit=100')).body
      .data as Json[];
    expect(desc.map((k) => k.id)).toEqual(asc.map((k) => k.id).reverse());
  });

  it.each(both(['name', 'price_per_hour', 'vcpus', 'memory_gb'] as const))(
    'instance types (in memory, prices tie) sort=%s order=%s: cursor pages are the numbered pages',
    async (sort, order) => {
      await expectSamePages('/instance-types', `sort=${sort}&order=${order}`, [4]);
      await expectSamePages('/instance-types', `sort=${sort}&order=${order}&region=eu-central-1`, [3]);
    },
  );

  it('the event log (ordered by its sequence) and a nested list (deliveries of a webhook-less id: 404)', async () => {
    await expectSamePages('/events', '', [4]);
    await expectSamePages('/events', 'type=instance.*', [5]);
    const missing = await server.request('GET', '/v2/webhooks/whk_missing/deliveries', { key });
    expectError(missing, 404, 'not_found');
  });

  it('sends a Link header naming the next and previous pages, and following it gives them', async () => {
    const first = await get('/v2/instances?limit=2&sort=name&order=asc');
    const next = first.body.pagination.next_cursor as string;
    expect(first.headers.link).toBe(
      `</v2/instances?limit=2&sort=name&order=asc&cursor=${encodeURIComponent(next)}>; rel="next"`,
    );
    const target = /<([^>]+)>; rel="next"/.exec(String(first.headers.link))?.[1] as string;
    const second = await get(target);
    expect(idsOf(second)).toEqual(idsOf(await get('/v1/instances?limit=2&sort=name&order=asc&page=2')));
    const links = String(second.headers.link);
    expect(links).toContain('rel="next"');
    const prev = /<([^>]+)>; rel="prev"/.exec(links)?.[1] as string;
    expect(idsOf(await get(prev))).toEqual(idsOf(first));
    const all = await get('/v2/instances?limit=100');
    expect(all.headers.link).toBeUndefined();
  });

  it('refuses a cursor made for other filters, sort, order or list: 400 naming cursor', async () => {
    const first = await get('/v2/instances?limit=2&status=running');
    const cursor = encodeURIComponent(first.body.pagination.next_cursor);
    // The same cursor with the list it was made for is fine, with a different limit too.
    await get(`/v2/instances?limit=5&status=running&cursor=${cursor}`);
    for (const query of [
      `limit=2&cursor=${cursor}`,
      `limit=2&status=stopped&cursor=${cursor}`,
      `limit=2&status=running&region=us-east-1&cursor=${cursor}`,
      `limit=2&status=running&sort=name&cursor=${cursor}`,
      `limit=2&status=running&order=asc&cursor=${cursor}`,
    ]) {
      const reply = await server.request('GET', `/v2/instances?${query}`, { key });
      expectInvalid(reply, 'cursor');
      expect(reply.body.error.message).toMatch(/another/);
    }
    const volumes = await server.request('GET', `/v2/volumes?limit=2&status=running&cursor=${cursor}`, {
      key,
    });
    expect(volumes.status).toBe(400);
    const elsewhere = await server.request('GET', `/v2/account/api-keys?limit=2&cursor=${cursor}`, { key });
    expectInvalid(elsewhere, 'cursor');
  });

  it('refuses garbage, altered and foreign cursors, cursor with page, and cursor on /v1: 400 naming the field', async () => {
    const first = await get('/v2/instances?limit=2');
    const cursor = first.body.pagination.next_cursor as string;
    const [body, mac] = cursor.split('.') as [string, string];
    const flip = (text: string, at: number) =>
      text.slice(0, at) + (text[at] === 'A' ? 'B' : 'A') + text.slice(at + 1);
    // Another sort value or id in the body, re-encoded, keeps the old MAC: refused.
    const content = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
    content[5] = 'ins_00000000000000000000000000';
    const forgedBody = Buffer.from(JSON.stringify(content)).toString('base64url');
    for (const bad of [
      'garbage',
      'a.b.c',
      `${body}.`,
      `${flip(body, 3)}.${mac}`,
      `${body}.${flip(mac, 2)}`,
      `${forgedBody}.${mac}`,
      `${Buffer.from('[1]').toString('base64url')}.${mac}`,
      'x'.repeat(3000),
    ]) {
      const reply = await server.request('GET', `/v2/instances?limit=2&cursor=${encodeURIComponent(bad)}`, {
        key,
      });
      expectInvalid(reply, 'cursor');
    }
    expectInvalid(
      await server.request('GET', `/v2/instances?page=2&cursor=${encodeURIComponent(cursor)}`, { key }),
      'page',
    );
    expectInvalid(await server.request('GET', '/v2/instances?page=2', { key }), 'page');
    expectInvalid(
      await server.request('GET', `/v1/instances?cursor=${encodeURIComponent(cursor)}`, { key }),
      'cursor',
    );
  });

  it('serves the rest of /v1 unchanged under /v2; other versions are 404 naming v1 and v2', async () => {
    const one = (await get('/v2/instances?limit=1')).body.data[0] as Json;
    expect((await get(`/v2/instances/${one.id}`)).body.data.id).toBe(one.id);
    expect((await get('/v1/instances?limit=1')).body.pagination).toHaveProperty('total_items');
    const v3 = await server.request('GET', '/v3/instances', { key });
    const error = expectError(v3, 404, 'not_found');
    expect(error.details?.supported_versions).toEqual(['v1', 'v2']);
    expect(error.message).toContain('v1, v2');
    expectError(await server.request('GET', '/v2/instances', { key: null }), 401, 'authentication_failed');
  });
});
