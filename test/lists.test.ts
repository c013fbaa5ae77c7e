/**
 * The one list helper (docs/design.md, "Lists and pages"), seen through HTTPS on both stores via
 * GET /v1/account/api-keys, and the catalogue endpoints (docs/design.md, "Catalogue") that page the same way.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STORES } from './helpers/backends.js';
import { expectInvalid } from './helpers/common.js';
import { serverForSuite, startTestServer, type TestServer } from './helpers/server.js';

interface ApiKeyItem {
  id: string;
  name: string;
  created_at: string;
}

/** Created keys beyond the account's first ("admin"); more than the professional quota of 50. */
const CREATED = 54;
const TOTAL = CREATED + 1;

/** Names in an order unrelated to creation order (37 and 54 are coprime: a permutation). */
function nameOf(i: number): string {
  return `key-${String(((i * 37) % CREATED) + 1).padStart(2, '0')}`;
}

describe.each(STORES)('lists (%s)', (store) => {
  let server: TestServer;
  let key: string;
  const list = (query = '') => server.request('GET', `/v1/account/api-keys${query}`, { key });

  beforeAll(async () => {
    server = await startTestServer({ store });
    const account = await server.createAccount({ plan: 'professional' });
    key = account.key;
    const quota = await server.admin(
      'set-quota',
      '--account',
      account.id,
      '--name',
      'api_keys',
      '--limit',
      '100',
    );
    expect(quota).toMatchObject({ name: 'api_keys', limit: 100 });
    for (let i = 0; i < CREATED; i += 1) {
      const reply = await server.request('POST', '/v1/account/api-keys', { key, body: { name: nameOf(i) } });
      expect(reply.status, `creating key ${i}`).toBe(201);
    }
  });
  afterAll(async () => {
    await server?.close();
  });

  it('defaults to page 1 of 20 and describes the whole list in the pagination object', async () => {
    const reply = await list();
    expect(reply.status).toBe(200);
    expect(reply.body.success).toBe(true);
    expect(reply.body.data).toHaveLength(20);
    expect(reply.body.pagination).toEqual({
      page: 1,
      limit: 20,
      total_items: TOTAL,
      total_pages: 3,
      has_next: true,
      has_prev: false,
    });
  });

  it('gives exact pagination on the middle page, the last page and past the end', async () => {
    const middle = await list('?page=2');
    expect(middle.body.data).toHaveLength(20);
    expect(middle.body.pagination).toEqual({
      page: 2,
      limit: 20,
      total_items: TOTAL,
      total_pages: 3,
      has_next: true,
      has_prev: true,
    });

    const last = await list('?page=3');
    expect(last.body.data).toHaveLength(TOTAL - 40);
    expect(last.body.pagination).toMatchObject({ page: 3, has_next: false, has_prev: true });

    const beyond = await list('?page=4');
    expect(beyond.status).toBe(200);
    expect(beyond.body.data).toEqual([]);
    expect(beyond.body.pagination).toEqual({
      page: 4,
      limit: 20,
      total_items: TOTAL,
      total_pages: 3,
      has_next: false,
      has_prev: true,
    });

    const far = await list('?page=1000&limit=100');
    expect(far.body.data).toEqual([]);
    expect(far.body.pagination).toMatchObject({ page: 1000, total_items: TOTAL, total_pages: 1 });
  });

  it('honours limit: 1 to 100', async () => {
    const all = await list('?limit=100');
    expect(all.body.data).toHaveLength(TOTAL);
    expect(all.body.pagination).toEqual({
      page: 1,
      limit: 100,
      total_items: TOTAL,
      total_pages: 1,
      has_next: false,
      has_prev: false,
    });
    const one = await list(`?limit=1&page=${TOTAL}`);
    expect(one.body.data).toHaveLength(1);
    expect(one.body.pagination).toMatchObject({
      limit: 1,
      total_pages: TOTAL,
      has_next: false,
      has_prev: true,
    });
    // 55 items in pages of 7: seven full pages and a last one of 6.
    const seventh = await list('?limit=7&page=8');
    expect(seventh.body.data).toHaveLength(TOTAL - 49);
    expect(seventh.body.pagination).toMatchObject({ total_pages: 8, has_next: false });
  });

  it('orders by created_at descending by default, and pages never overlap or skip', async () => {
    const pages: ApiKeyItem[][] = [];
    for (let page = 1; page <= 3; page += 1) pages.push((await list(`?page=${page}`)).body.data);
    const walked = pages.flat();
    expect(walked).toHaveLength(TOTAL);
    expect(new Set(walked.map((k) => k.id)).size).toBe(TOTAL);

    const all: ApiKeyItem[] = (await list('?limit=100')).body.data;
    expect(walked.map((k) => k.id)).toEqual(all.map((k) => k.id));
    // created_at descending; the id breaks ties, in the same direction.
    const expected = [...all].sort(
      (a, b) => b.created_at.localeCompare(a.created_at) || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0),
    );
    expect(all.map((k) => k.id)).toEqual(expected.map((k) => k.id));
    // The account's first key ("admin") is the oldest: last.
    expect(all.at(-1)?.name).toBe('admin');

    const explicit = await list('?sort=created_at&order=desc&limit=100');
    expect(explicit.body.data.map((k: ApiKeyItem) => k.id)).toEqual(all.map((k) => k.id));
    const ascending = await list('?sort=created_at&order=asc&limit=100');
    expect(ascending.body.data.map((k: ApiKeyItem) => k.id)).toEqual(all.map((k) => k.id).reverse());
  });

  it('sorts by name in either order, across pages', async () => {
    const names = ['admin', ...Array.from({ length: CREATED }, (_, i) => nameOf(i))].sort();
    const asc = await list('?sort=name&order=asc&limit=100');
    expect(asc.body.data.map((k: ApiKeyItem) => k.name)).toEqual(names);
    const desc = await list('?sort=name&order=desc&limit=100');
    expect(desc.body.data.map((k: ApiKeyItem) => k.name)).toEqual([...names].reverse());

    const paged: string[] = [];
    for (let page = 1; page <= 6; page += 1) {
      const reply = await list(`?sort=name&order=asc&limit=10&page=${page}`);
      paged.push(...reply.body.data.map((k: ApiKeyItem) => k.name));
    }
    expect(paged).toEqual(names);
  });

  it('rejects out-of-range and malformed page and limit, naming the parameter', async () => {
    for (const [query, field, value] of [
      ['?limit=0', 'limit', 0],
      ['?limit=101', 'limit', 101],
      ['?limit=abc', 'limit', 'abc'],
      ['?limit=-5', 'limit', -5],
      ['?page=0', 'page', 0],
      ['?page=-1', 'page', -1],
      ['?page=1.5', 'page', 1.5],
      ['?page=abc', 'page', 'abc'],
    ] as const) {
      const reply = await list(query);
      expectInvalid(reply, field);
      // The value as sent (a number where it parsed as one).
      expect(String(reply.body.error.details.value), query).toBe(String(value));
      expect(reply.body.error.message, query).toContain(field);
    }
  });

  it('rejects an unknown sort or order with allowed_values', async () => {
    const sort = await list('?sort=colour');
    expectInvalid(sort, 'sort');
    expect(sort.body.error.details.value).toBe('colour');
    expect([...sort.body.error.details.allowed_values].sort()).toEqual([
      'created_at',
      'last_used_at',
      'name',
    ]);

    const order = await list('?order=sideways');
    expectInvalid(order, 'order');
    expect(order.body.error.details.allowed_values).toEqual(['asc', 'desc']);
  });

  it('rejects an unknown query parameter by name', async () => {
    const reply = await list('?colour=red');
    expectInvalid(reply, 'colour');
    expect(reply.body.error.message).toContain('colour');
  });

  it('lists only the caller’s own items', async () => {
    const other = await server.createAccount();
    const reply = await server.request('GET', '/v1/account/api-keys', { key: other.key });
    expect(reply.body.data.map((k: ApiKeyItem) => k.name)).toEqual(['admin']);
    expect(reply.body.pagination).toEqual({
      page: 1,
      limit: 20,
      total_items: 1,
      total_pages: 1,
      has_next: false,
      has_prev: false,
    });
  });
});

/** The instance types of docs/design.md, "Catalogue", transcribed: name, vCPU, RAM GB, storage GB, USD/h, extra. */
const SPEC_TYPES: [
  string,
  number,
  number,
  number,
  number,
  { iops?: number; gpu?: [number, string, number] }?,
][] = [
  ['compute-1x', 1, 2, 25, 0.05],
  ['compute-2x', 2, 4, 50, 0.1],
  ['compute-4x', 4, 8, 100, 0.2],
  ['compute-8x', 8, 16, 200, 0.4],
  ['compute-16x', 16, 32, 400, 0.8],
  ['compute-32x', 32, 64, 800, 1.6],
  ['memory-2x', 2, 16, 50, 0.15],
  ['memory-4x', 4, 32, 100, 0.3],
  ['memory-8x', 8, 64, 200, 0.6],
  ['memory-16x', 16, 128, 400, 1.2],
  ['memory-32x', 32, 256, 800, 2.4],
  ['storage-2x', 2, 8, 500, 0.2, { iops: 10_000 }],
  ['storage-4x', 4, 16, 1000, 0.4, { iops: 20_000 }],
  ['storage-8x', 8, 32, 2000, 0.8, { iops: 40_000 }],
  ['storage-16x', 16, 64, 4000, 1.6, { iops: 80_000 }],
  ['gpu-1x', 8, 64, 500, 2.5, { gpu: [1, 'A100', 40] }],
  ['gpu-2x', 16, 128, 1000, 5, { gpu: [2, 'A100', 40] }],
  ['gpu-4x', 32, 256, 2000, 10, { gpu: [4, 'A100', 40] }],
  ['gpu-h100-1x', 8, 128, 1000, 4, { gpu: [1, 'H100', 80] }],
  ['gpu-h100-2x', 16, 256, 2000, 8, { gpu: [2, 'H100', 80] }],
];

const ALL_REGIONS = ['us-east-1', 'us-west-2', 'eu-central-1', 'ap-northeast-1'];
const GPU_REGIONS = ['us-east-1', 'us-west-2'];

interface InstanceTypeItem {
  name: string;
  family: string;
  vcpus: number;
  price_per_hour: number;
  regions: string[];
  gpu: unknown;
}

describe('catalog', () => {
  const server = serverForSuite();
  const get = (path: string) => server.request('GET', path, { key: server.rootKey });

  it('lists the twenty instance types of the catalogue with their exact specifications and prices', async () => {
    const reply = await get('/v1/instance-types?limit=100');
    expect(reply.status).toBe(200);
    expect(reply.body.pagination).toMatchObject({ total_items: 20, total_pages: 1 });
    const byName = new Map<string, Record<string, unknown>>(
      reply.body.data.map((t: InstanceTypeItem) => [t.name, t]),
    );
    expect([...byName.keys()].sort()).toEqual(SPEC_TYPES.map(([name]) => name).sort());
    for (const [name, vcpus, memory, storage, price, extra] of SPEC_TYPES) {
      const isGpu = extra?.gpu !== undefined;
      expect(byName.get(name), name).toEqual({
        name,
        family: name.split('-')[0],
        vcpus,
        memory_gb: memory,
        storage_gb: storage,
        iops: extra?.iops ?? null,
        gpu: extra?.gpu ? { count: extra.gpu[0], model: extra.gpu[1], memory_gb: extra.gpu[2] } : null,
        price_per_hour: price,
        regions: isGpu ? GPU_REGIONS : ALL_REGIONS,
      });
    }
    // The spot checks, spelled out.
    expect(byName.get('compute-1x')).toMatchObject({
      vcpus: 1,
      memory_gb: 2,
      storage_gb: 25,
      price_per_hour: 0.05,
    });
    expect(byName.get('memory-32x')).toMatchObject({
      vcpus: 32,
      memory_gb: 256,
      storage_gb: 800,
      price_per_hour: 2.4,
    });
    expect(byName.get('storage-4x')).toMatchObject({ iops: 20_000 });
    expect(byName.get('gpu-h100-2x')).toMatchObject({ gpu: { count: 2, model: 'H100' }, price_per_hour: 8 });
  });

  it('pages the catalogue like any list: 20 by default, cheapest first', async () => {
    const reply = await get('/v1/instance-types');
    expect(reply.body.data).toHaveLength(20);
    expect(reply.body.pagination).toEqual({
      page: 1,
      limit: 20,
      total_items: 20,
      total_pages: 1,
      has_next: false,
      has_prev: false,
    });
    const prices = reply.body.data.map((t: InstanceTypeItem) => t.price_per_hour);
    expect(prices).toEqual([...prices].sort((a, b) => a - b));

    const page = await get('/v1/instance-types?limit=6&page=4');
    expect(page.body.data).toHaveLength(2);
    expect(page.body.pagination).toMatchObject({ total_pages: 4, has_next: false, has_prev: true });

    const byCpu = await get('/v1/instance-types?sort=vcpus&order=desc&limit=100');
    const vcpus = byCpu.body.data.map((t: InstanceTypeItem) => t.vcpus);
    expect(vcpus).toEqual([...vcpus].sort((a, b) => b - a));

    const badSort = await get('/v1/instance-types?sort=created_at');
    expectInvalid(badSort, 'sort');
    expect([...badSort.body.error.details.allowed_values].sort()).toEqual([
      'memory_gb',
      'name',
      'price_per_hour',
      'vcpus',
    ]);
  });

  it('filters by family and by region, and the filters combine', async () => {
    const gpu = await get('/v1/instance-types?family=gpu&limit=100');
    expect(gpu.body.data.map((t: InstanceTypeItem) => t.name).sort()).toEqual([
      'gpu-1x',
      'gpu-2x',
      'gpu-4x',
      'gpu-h100-1x',
      'gpu-h100-2x',
    ]);
    expect(gpu.body.pagination.total_items).toBe(5);

    const storage = await get('/v1/instance-types?family=storage');
    expect(storage.body.data).toHaveLength(4);
    expect(storage.body.data.every((t: { iops: number | null }) => (t.iops ?? 0) >= 10_000)).toBe(true);

    const europe = await get('/v1/instance-types?region=eu-central-1&limit=100');
    expect(europe.body.pagination.total_items).toBe(15);
    expect(europe.body.data.some((t: InstanceTypeItem) => t.family === 'gpu' || t.gpu !== null)).toBe(false);

    const virginia = await get('/v1/instance-types?region=us-east-1&limit=100');
    expect(virginia.body.pagination.total_items).toBe(20);

    const none = await get('/v1/instance-types?family=gpu&region=ap-northeast-1');
    expect(none.status).toBe(200);
    expect(none.body.data).toEqual([]);
    expect(none.body.pagination).toMatchObject({ total_items: 0, has_next: false });

    const gpuWest = await get('/v1/instance-types?family=gpu&region=us-west-2');
    expect(gpuWest.body.pagination.total_items).toBe(5);
  });

  it('rejects an unknown family or region with allowed_values', async () => {
    const family = await get('/v1/instance-types?family=quantum');
    expectInvalid(family, 'family');
    expect([...family.body.error.details.allowed_values].sort()).toEqual([
      'compute',
      'gpu',
      'memory',
      'storage',
    ]);
    const region = await get('/v1/instance-types?region=mars-1');
    expectInvalid(region, 'region');
    expect([...region.body.error.details.allowed_values].sort()).toEqual([...ALL_REGIONS].sort());
  });

  it('lists the four regions of the catalogue, GPUs only in the US ones', async () => {
    const reply = await get('/v1/regions');
    expect(reply.status).toBe(200);
    expect(reply.body.pagination).toMatchObject({ total_items: 4, total_pages: 1 });
    const regions = reply.body.data as { name: string; gpu_available: boolean; description: string }[];
    expect(regions.map((r) => r.name)).toEqual([...ALL_REGIONS].sort());
    for (const region of regions) {
      expect(region.gpu_available, region.name).toBe(GPU_REGIONS.includes(region.name));
      expect(region.description.length).toBeGreaterThan(0);
    }
  });

  it('lists the five images of the catalogue', async () => {
    const reply = await get('/v1/images');
    expect(reply.status).toBe(200);
    expect(reply.body.pagination).toMatchObject({ total_items: 5, total_pages: 1 });
    const images = reply.body.data as { name: string; gpu_compatible: boolean }[];
    expect(images.map((i) => i.name).sort()).toEqual(
      ['debian-12', 'rocky-9', 'ubuntu-22.04', 'ubuntu-22.04-cuda', 'ubuntu-24.04'].sort(),
    );
    const gpuImages = images.filter((i) => i.gpu_compatible).map((i) => i.name);
    expect(gpuImages.sort()).toEqual(['ubuntu-22.04', 'ubuntu-22.04-cuda', 'ubuntu-24.04']);

    const unknown = await get('/v1/images?distribution=ubuntu');
    expectInvalid(unknown, 'distribution');
  });
});
