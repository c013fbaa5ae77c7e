/**
 * GET /v1/instances over HTTPS, on both stores: the pagination object, the default order (created_at
 * desc), every sort in both orders (whole list and every page, including pages read from the far end),
 * filters by status, region, name and tags alone and combined with total_items that match, pages past
 * the end, counts that follow transitions, account isolation, and 400s with allowed_values.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { FAULT_TAG } from '../src/drivers/simulator/simulator.js';
import { REGION_NAMES } from '../src/resources/catalog/catalog.js';
import { INSTANCE_SORTS } from '../src/resources/instances/rules.js';
import { INSTANCE_STATUSES } from '../src/resources/instances/states.js';
import { STORES } from './helpers/backends.js';
import { account, sleep } from './helpers/common.js';
import { createInstance, waitForStatus } from './helpers/instances.js';
import { type Reply, serverForSuite, type TestServer } from './helpers/server.js';

type Json = Record<string, any>;
type Sort = (typeof INSTANCE_SORTS)[number];

async function list(server: TestServer, key: string, query: string): Promise<Reply> {
  const reply = await server.request('GET', `/v1/instances${query}`, { key });
  expect(reply.status, reply.text).toBe(200);
  expect(reply.body.success).toBe(true);
  return reply;
}

const ids = (reply: Reply) => (reply.body.data as Json[]).map((i) => i.id as string);

function expectedPagination(page: number, limit: number, total: number) {
  const totalPages = Math.ceil(total / limit);
  return {
    page,
    limit,
    total_items: total,
    total_pages: totalPages,
    has_next: page < totalPages,
    has_prev: page > 1,
  };
}

/** The order the API promises: by the sort field, ties broken by id, both in the requested direction. */
function sorted(instances: Json[], sort: Sort, order: 'asc' | 'desc'): string[] {
  const direction = order === 'asc' ? 1 : -1;
  return [...instances]
    .sort((a, b) => {
      if (a[sort] !== b[sort]) return (a[sort] < b[sort] ? -1 : 1) * direction;
      return (a.id < b.id ? -1 : 1) * direction;
    })
    .map((i) => i.id);
}

/**
 * Seven instances in one account, created in this order, settled in these statuses. Names are lowercase
 * letters only (so SQLite's and PostgreSQL's collations agree), with one name used twice.
 */
const SEED = [
  {
    name: 'delta',
    instance_type: 'compute-2x',
    region: 'us-east-1',
    tags: { env: 'prod', team: 'a' },
    status: 'running',
  },
  { name: 'alpha', instance_type: 'memory-2x', region: 'us-west-2', tags: { env: 'dev' }, status: 'stopped' },
  {
    name: 'echo',
    instance_type: 'compute-1x',
    region: 'us-east-1',
    tags: { env: 'prod', team: 'b' },
    status: 'starting',
  },
  {
    name: 'charlie',
    instance_type: 'storage-2x',
    region: 'eu-central-1',
    tags: { env: 'prod', team: 'a' },
    status: 'stopped',
  },
  { name: 'bravo', instance_type: 'compute-1x', region: 'us-east-1', tags: {}, status: 'running' },
  {
    name: 'echo',
    instance_type: 'compute-2x',
    region: 'us-west-2',
    tags: { env: 'dev', team: 'a' },
    status: 'running',
  },
  {
    name: 'foxtrot',
    instance_type: 'memory-2x',
    region: 'us-east-1',
    tags: { env: 'prod' },
    status: 'starting',
  },
] as const;

describe.each(STORES)('Instance lists (%s)', (store) => {
  const server = serverForSuite({ store });
  let key = '';
  /** The seeded instances as the API shows them once settled, in creation order. */
  let all: Json[] = [];

  beforeAll(async () => {
    key = (await account(server)).key;
    const made: Json[] = [];
    for (const seed of SEED) {
      const { status, tags, ...rest } = seed;
      // Held in starting by the simulator's fault tag; the others settle.
      const faultTags = status === 'starting' ? { [FAULT_TAG]: 'stuck-starting' } : {};
      made.push(await createInstance(server, key, { ...rest, tags: { ...tags, ...faultTags } }));
      await sleep(3); // distinct created_at
    }
    for (const [i, seed] of SEED.entries()) {
      const id = (made[i] as Json).id as string;
      if (seed.status === 'starting') continue;
      await waitForStatus(server, key, id, 'running');
      if (seed.status === 'stopped') {
        const stop = await server.request('POST', `/v1/instances/${id}/stop`, { key });
        expect(stop.status, stop.text).toBe(202);
        await waitForStatus(server, key, id, 'stopped');
      }
    }
    // Another account's instance must never show up.
    const other = await account(server);
    await createInstance(server, other.key, { name: 'alpha' });
    await sleep(100);
    const reply = await list(server, key, '?limit=100&sort=created_at&order=asc');
    all = reply.body.data;
    expect(all.map((i) => [i.name, i.status])).toEqual(SEED.map((s) => [s.name, s.status]));
  });

  it('answers the pagination object; default order is created_at desc, 20 per page', async () => {
    const reply = await list(server, key, '');
    expect(reply.body.pagination).toEqual(expectedPagination(1, 20, 7));
    expect(ids(reply)).toEqual(all.map((i) => i.id).reverse());
    expect(reply.body.metadata.request_id).toMatch(/^req_/);
    for (const instance of reply.body.data as Json[]) expect(instance).not.toHaveProperty('user_data');
  });

  const SORTS = INSTANCE_SORTS.flatMap((sort) =>
    (['asc', 'desc'] as const).map((order) => [sort, order] as const),
  );

  it.each(SORTS)('sort=%s order=%s: the whole list, then every page of 2 and of 3', async (sort, order) => {
    const expected = sorted(all, sort, order);
    const whole = await list(server, key, `?limit=100&sort=${sort}&order=${order}`);
    expect(ids(whole)).toEqual(expected);
    expect(whole.body.pagination).toEqual(expectedPagination(1, 100, 7));
    for (const limit of [2, 3]) {
      const pages = Math.ceil(7 / limit);
      for (let page = 1; page <= pages + 1; page++) {
        const reply = await list(server, key, `?limit=${limit}&page=${page}&sort=${sort}&order=${order}`);
        expect(ids(reply), `limit ${limit} page ${page}`).toEqual(
          expected.slice((page - 1) * limit, page * limit),
        );
        expect(reply.body.pagination).toEqual(expectedPagination(page, limit, 7));
      }
    }
  });

  it('sort=name keeps equal names in id order, in both directions', async () => {
    const echoes = all.filter((i) => i.name === 'echo').map((i) => i.id as string);
    const asc = ids(await list(server, key, '?sort=name&order=asc'));
    const desc = ids(await list(server, key, '?sort=name&order=desc'));
    expect(asc.filter((id) => echoes.includes(id))).toEqual([...echoes].sort());
    expect(desc.filter((id) => echoes.includes(id))).toEqual([...echoes].sort().reverse());
    expect(asc.map((id) => all.find((i) => i.id === id)?.name)).toEqual([
      'alpha',
      'bravo',
      'charlie',
      'delta',
      'echo',
      'echo',
      'foxtrot',
    ]);
  });

  const FILTERS: [string, (i: Json) => boolean][] = [
    ['status=running', (i) => i.status === 'running'],
    ['status=stopped', (i) => i.status === 'stopped'],
    ['status=starting', (i) => i.status === 'starting'],
    ['status=error', () => false],
    ['region=us-west-2', (i) => i.region === 'us-west-2'],
    ['region=us-east-1', (i) => i.region === 'us-east-1'],
    ['region=ap-northeast-1', () => false],
    ['name=echo', (i) => i.name === 'echo'],
    ['name=zulu', () => false],
    ['tag=env:prod', (i) => i.tags.env === 'prod'],
    ['tag=team:a', (i) => i.tags.team === 'a'],
    ['tag=env:prod&tag=team:a', (i) => i.tags.env === 'prod' && i.tags.team === 'a'],
    ['tag=env:dev&tag=team:b', () => false],
    [`tag=${encodeURIComponent(`${FAULT_TAG}:stuck-starting`)}`, (i) => i.status === 'starting'],
    ['status=running&region=us-east-1', (i) => i.status === 'running' && i.region === 'us-east-1'],
    ['status=stopped&tag=team:a', (i) => i.status === 'stopped' && i.tags.team === 'a'],
    ['region=us-east-1&tag=env:prod', (i) => i.region === 'us-east-1' && i.tags.env === 'prod'],
    ['name=echo&region=us-west-2', (i) => i.name === 'echo' && i.region === 'us-west-2'],
    [
      'name=echo&status=starting&tag=team:b',
      (i) => i.name === 'echo' && i.status === 'starting' && i.tags.team === 'b',
    ],
  ];

  it.each(FILTERS)('filter %s: the matching instances, total_items and pages', async (query, matches) => {
    const matching = all.filter(matches);
    const expected = sorted(matching, 'created_at', 'desc');
    const whole = await list(server, key, `?${query}&limit=100`);
    expect(ids(whole)).toEqual(expected);
    expect(whole.body.pagination).toEqual(expectedPagination(1, 100, matching.length));
    // One at a time, past the end too.
    for (let page = 1; page <= matching.length + 1; page++) {
      const reply = await list(server, key, `?${query}&limit=1&page=${page}`);
      expect(ids(reply), `page ${page}`).toEqual(expected.slice(page - 1, page));
      expect(reply.body.pagination).toEqual(expectedPagination(page, 1, matching.length));
    }
    // Sorted by name in reverse, the same set.
    const byName = await list(server, key, `?${query}&limit=100&sort=name&order=desc`);
    expect(ids(byName)).toEqual(sorted(matching, 'name', 'desc'));
  });

  it('a page past the end is empty with the right counts', async () => {
    const far = await list(server, key, '?limit=2&page=5');
    expect(far.body.data).toEqual([]);
    expect(far.body.pagination).toEqual({
      page: 5,
      limit: 2,
      total_items: 7,
      total_pages: 4,
      has_next: false,
      has_prev: true,
    });
    const veryFar = await list(server, key, '?limit=100&page=1000&sort=name');
    expect(veryFar.body.data).toEqual([]);
    expect(veryFar.body.pagination).toMatchObject({
      total_items: 7,
      total_pages: 1,
      has_prev: true,
      has_next: false,
    });
    const filtered = await list(server, key, '?status=stopped&limit=1&page=3');
    expect(filtered.body.data).toEqual([]);
    expect(filtered.body.pagination).toEqual(expectedPagination(3, 1, 2));
    const none = await list(server, key, '?status=error&page=2');
    expect(none.body.pagination).toEqual(expectedPagination(2, 20, 0));
  });

  it.each([
    ['sort=price', 'sort', 'price', [...INSTANCE_SORTS]],
    ['order=up', 'order', 'up', ['asc', 'desc']],
    ['status=broken', 'status', 'broken', [...INSTANCE_STATUSES]],
    ['region=mars-1', 'region', 'mars-1', REGION_NAMES],
  ])('%s → 400 with allowed_values', async (query, field, value, allowed) => {
    const reply = await server.request('GET', `/v1/instances?${query}`, { key });
    expect(reply.status, reply.text).toBe(400);
    expect(reply.body.error.code).toBe('invalid_request');
    expect(reply.body.error.details).toMatchObject({ field, value, allowed_values: allowed });
  });

  it.each([
    ['tag=nocolon', /^tag/],
    ['tag=:novalue', /^tag/],
    ['tag=env:prod&tag=bad', /^tag/],
    ['limit=0', /^limit$/],
    ['limit=101', /^limit$/],
    ['page=0', /^page$/],
    ['page=two', /^page$/],
    ['name=', /^name$/],
    [`name=${'a'.repeat(65)}`, /^name$/],
    ['colour=red', /^colour$/],
  ])('%s → 400 naming the parameter', async (query, field) => {
    const reply = await server.request('GET', `/v1/instances?${query}`, { key });
    expect(reply.status, reply.text).toBe(400);
    expect(reply.body.error.code).toBe('invalid_request');
    expect(String(reply.body.error.details?.field)).toMatch(field);
  });

  it('counts follow the instances through stop, start and delete', async () => {
    const own = await account(server);
    const total = async (query: string) => (await list(server, own.key, query)).body.pagination.total_items;
    const a = await createInstance(server, own.key);
    const b = await createInstance(server, own.key, { region: 'us-west-2' });
    await waitForStatus(server, own.key, a.id, 'running');
    await waitForStatus(server, own.key, b.id, 'running');
    expect(await total('?status=running')).toBe(2);
    expect(await total('?status=running&region=us-west-2')).toBe(1);
    expect(await total('?status=starting')).toBe(0);

    expect((await server.request('POST', `/v1/instances/${b.id}/stop`, { key: own.key })).status).toBe(202);
    await waitForStatus(server, own.key, b.id, 'stopped');
    expect(await total('?status=running')).toBe(1);
    expect(await total('?status=stopped')).toBe(1);
    expect(await total('?status=stopped&region=us-west-2')).toBe(1);
    expect(await total('?status=stopping')).toBe(0);

    expect(
      (
        await server.request('PATCH', `/v1/instances/${a.id}`, {
          key: own.key,
          body: { name: 'renamed', tags: { x: 'y' } },
        })
      ).status,
    ).toBe(200);
    expect(await total('?name=renamed')).toBe(1);
    expect(await total('?tag=x:y')).toBe(1);

    expect((await server.request('DELETE', `/v1/instances/${a.id}`, { key: own.key })).status).toBe(202);
    await waitForStatus(server, own.key, a.id, 'gone');
    expect(await total('')).toBe(1);
    expect(await total('?status=running')).toBe(0);
    expect(await total('?status=deleting')).toBe(0);
    expect(await total('?region=us-east-1')).toBe(0);
    expect(await total('?tag=x:y')).toBe(0);
    expect(await total('?name=renamed')).toBe(0);
    const reply = await list(server, own.key, '');
    expect(ids(reply)).toEqual([b.id]);
    expect(reply.body.pagination).toEqual(expectedPagination(1, 20, 1));
  });
});
