/**
 * Public IPs over HTTPS on both stores (issue 32 item 1), with a manual clock: allocate, list, get, patch,
 * release (409 while assigned), assign and unassign with the instance's `public_ip` following in the same
 * answer, another account's addresses and instances as 404, the `public_ips` quota, the address made with
 * an instance (`auto_delete`) released with it and a kept one left unassigned, `public_ip: false`, a
 * released address kept out of the pool for 24 h, the pool's gateway never handed out, concurrent
 * allocations never handing one address out twice, the events, and the idle time billed.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/domain/clock.js';
import { createPostgresDatabase, STORES } from './helpers/backends.js';
import { account, expectError } from './helpers/common.js';
import { startTestServer, type TestServer } from './helpers/server.js';

const HOUR = 3_600_000;
const T0 = new Date('2026-05-01T00:00:00Z');
/** Small pools, so exhaustion and reuse are reached in a few requests: .2–.6 handed out (.1 the gateway). */
const POOLS = 'us-west-2=198.51.100.0/29,eu-central-1=192.0.2.0/29,ap-northeast-1=192.0.2.128/29';

describe.each(STORES)('Public IPs (%s)', (store) => {
  const clock = new ManualClock(T0);
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-public-ips-'));
  let databaseUrl: string | undefined;
  let drop: (() => Promise<void>) | undefined;
  let server: TestServer;
  let key = '';
  let otherKey = '';

  const runDue = () => server.running.backends.jobs.runDue();
  /** Lets simulated work finish (a boot is 8 ms at 1000×, a delete less). */
  const settle = async () => {
    for (let step = 0; step < 20; step++) {
      clock.advance(5);
      await runDue();
    }
  };
  const call = async (method: string, url: string, body?: unknown, expected = 200, as = key) => {
    const reply = await server.request(method, url, { key: as, ...(body === undefined ? {} : { body }) });
    expect(reply.status, reply.text).toBe(expected);
    return reply.body?.data;
  };
  const allocate = (region: string, as = key, extra: Record<string, unknown> = {}) =>
    call('POST', '/v1/public-ips', { region, ...extra }, 201, as);
  const instance = async (region: string, extra: Record<string, unknown> = {}, as = key) => {
    const made = await call(
      'POST',
      '/v1/instances',
      {
        name: `web-${Math.random().toString(36).slice(2, 8)}`,
        instance_type: 'compute-1x',
        region,
        image: 'ubuntu-24.04',
        ...extra,
      },
      202,
      as,
    );
    await settle();
    return made;
  };
  const eventTypes = async (id: string) =>
    ((await call('GET', `/v1/events?resource_id=${id}&limit=100`)) as { type: string }[])
      .map((e) => e.type)
      .reverse();

  beforeAll(async () => {
    if (store === 'postgres') ({ url: databaseUrl, drop } = await createPostgresDatabase());
    server = await startTestServer({
      store,
      dataDir,
      ...(databaseUrl ? { databaseUrl } : {}),
      clock,
      steppedJobs: true,
      env: { NIMBUS_SIM_SPEEDUP: '1000', NIMBUS_PUBLIC_IP_POOLS: POOLS },
    });
    ({ key } = await account(server));
    ({ key: otherKey } = await account(server));
  });
  afterAll(async () => {
    await server?.close();
    await drop?.();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('allocates, lists, gets, patches and releases; another account sees 404', async () => {
    const ip = await allocate('us-west-2', key, { name: 'frontend', tags: { env: 'prod' } });
    expect(ip).toMatchObject({
      name: 'frontend',
      region: 'us-west-2',
      instance_id: null,
      auto_delete: false,
      tags: { env: 'prod' },
      assigned_at: null,
    });
    expect(ip.id).toMatch(/^ip_/);
    expect(ip.address).toMatch(/^198\.51\.100\.[2-6]$/);
    expect(await call('GET', `/v1/public-ips/${ip.id}`)).toEqual(ip);
    const listed = await call('GET', '/v1/public-ips?region=us-west-2&assigned=false');
    expect(listed.map((i: { id: string }) => i.id)).toContain(ip.id);
    const patched = await call('PATCH', `/v1/public-ips/${ip.id}`, { name: 'frontend-2', tags: {} });
    expect(patched).toMatchObject({ name: 'frontend-2', tags: {} });

    for (const [method, url, body] of [
      ['GET', `/v1/public-ips/${ip.id}`, undefined],
      ['PATCH', `/v1/public-ips/${ip.id}`, { name: 'stolen' }],
      ['DELETE', `/v1/public-ips/${ip.id}`, undefined],
      ['POST', `/v1/public-ips/${ip.id}/unassign`, undefined],
    ] as const) {
      const reply = await server.request(method, url, { key: otherKey, ...(body ? { body } : {}) });
      expectError(reply, 404, 'not_found');
    }
    const theirs = await call('GET', '/v1/public-ips', undefined, 200, otherKey);
    expect(theirs).toEqual([]);

    expect(await call('DELETE', `/v1/public-ips/${ip.id}`)).toMatchObject({ id: ip.id });
    expectError(await server.request('GET', `/v1/public-ips/${ip.id}`, { key }), 404, 'not_found');
    expect(await eventTypes(ip.id)).toEqual(['public_ip.created', 'public_ip.deleted']);
  });

  it('the quota counts kept addresses: free 2', async () => {
    const free = await account(server, 'free');
    await allocate('us-east-1', free.key);
    await allocate('us-east-1', free.key);
    const refused = await server.request('POST', '/v1/public-ips', {
      key: free.key,
      body: { region: 'us-east-1' },
    });
    expectError(refused, 403, 'quota_exceeded');
    expect(refused.body.error.details).toMatchObject({ quota: 'public_ips', limit: 2, used: 2 });
    // An instance's own address does not count…
    const vm = await instance('us-east-1', {}, free.key);
    expect(vm.public_ip).toMatch(/^203\.0\.113\./);
    // …until it is kept.
    const [own] = await call('GET', `/v1/public-ips?instance_id=${vm.id}`, undefined, 200, free.key);
    const keep = await server.request('PATCH', `/v1/public-ips/${own.id}`, {
      key: free.key,
      body: { auto_delete: false },
    });
    expectError(keep, 403, 'quota_exceeded');
  });

  it('assigns and unassigns, with the instance’s public_ip following; 409s and 404s as documented', async () => {
    const vm = await instance('us-west-2');
    const [own] = await call('GET', `/v1/public-ips?instance_id=${vm.id}`);
    expect(own).toMatchObject({ address: vm.public_ip, instance_id: vm.id, auto_delete: true });

    const spare = await allocate('us-west-2');
    // The instance holds one already.
    const twice = await server.request('POST', `/v1/public-ips/${spare.id}/assign`, {
      key,
      body: { instance_id: vm.id },
    });
    expectError(twice, 409, 'conflict');
    expect(twice.body.error.details).toMatchObject({
      instance_id: vm.id,
      public_ip: vm.public_ip,
      public_ip_id: own.id,
    });
    // Released while assigned: 409.
    expectError(await server.request('DELETE', `/v1/public-ips/${own.id}`, { key }), 409, 'conflict');

    expect(await call('POST', `/v1/public-ips/${own.id}/unassign`)).toMatchObject({ instance_id: null });
    expect((await call('GET', `/v1/instances/${vm.id}`)).public_ip).toBeNull();
    expect(await call('POST', `/v1/public-ips/${spare.id}/assign`, { instance_id: vm.id })).toMatchObject({
      instance_id: vm.id,
    });
    expect((await call('GET', `/v1/instances/${vm.id}`)).public_ip).toBe(spare.address);
    expect((await call('GET', `/v1/instances/${vm.id}/network`)).public_ip).toBe(spare.address);
    // Assigned elsewhere: 409 until unassigned.
    const vm2 = await instance('us-west-2', { public_ip: false });
    expectError(
      await server.request('POST', `/v1/public-ips/${spare.id}/assign`, {
        key,
        body: { instance_id: vm2.id },
      }),
      409,
      'conflict',
    );

    // Another account's instance is 404, naming the field; another region's is 400.
    const theirs = await instance('us-west-2', { public_ip: false }, otherKey);
    const foreign = await server.request('POST', `/v1/public-ips/${own.id}/assign`, {
      key,
      body: { instance_id: theirs.id },
    });
    expectError(foreign, 404, 'not_found');
    expect(foreign.body.error.details).toMatchObject({ field: 'instance_id' });
    const east = await instance('us-east-1', { public_ip: false });
    expectError(
      await server.request('POST', `/v1/public-ips/${own.id}/assign`, {
        key,
        body: { instance_id: east.id },
      }),
      400,
      'invalid_request',
    );
    expect(await eventTypes(spare.id)).toEqual(['public_ip.created', 'public_ip.assigned']);
    expect(await eventTypes(own.id)).toEqual(['public_ip.created', 'public_ip.unassigned']);
  });

  it('public_ip: false makes an instance with none; the address made with one goes with it, a kept one stays', async () => {
    const bare = await instance('us-east-1', { public_ip: false });
    expect(bare.public_ip).toBeNull();
    expect(await call('GET', `/v1/public-ips?instance_id=${bare.id}`)).toEqual([]);
    expect((await call('GET', `/v1/instances/${bare.id}`)).ssh.host).toBe(bare.private_ip);

    const a = await instance('us-east-1');
    const [auto] = await call('GET', `/v1/public-ips?instance_id=${a.id}`);
    const b = await instance('us-east-1');
    const [kept] = await call('GET', `/v1/public-ips?instance_id=${b.id}`);
    await call('PATCH', `/v1/public-ips/${kept.id}`, { auto_delete: false });

    await call('DELETE', `/v1/instances/${a.id}`, undefined, 202);
    await call('DELETE', `/v1/instances/${b.id}`, undefined, 202);
    await settle();
    expectError(await server.request('GET', `/v1/instances/${a.id}`, { key }), 404, 'not_found');
    expectError(await server.request('GET', `/v1/public-ips/${auto.id}`, { key }), 404, 'not_found');
    expect(await call('GET', `/v1/public-ips/${kept.id}`)).toMatchObject({
      address: b.public_ip,
      instance_id: null,
      auto_delete: false,
    });
    expect(await eventTypes(auto.id)).toEqual(['public_ip.created', 'public_ip.deleted']);
    expect(await eventTypes(kept.id)).toEqual(['public_ip.created', 'public_ip.unassigned']);
    // The kept address moves on to a replacement instance.
    const c = await instance('us-east-1', { public_ip: false });
    await call('POST', `/v1/public-ips/${kept.id}/assign`, { instance_id: c.id });
    expect((await call('GET', `/v1/instances/${c.id}`)).public_ip).toBe(b.public_ip);
  });

  it('never hands out the gateway nor one address twice, and keeps a released one out for 24 h', async () => {
    const region = 'eu-central-1';
    const made = await Promise.all([
      allocate(region),
      allocate(region),
      instance(region),
      allocate(region, otherKey),
      allocate(region, otherKey),
    ]);
    const addresses = made.map((m) => m.address ?? m.public_ip);
    expect(new Set(addresses).size).toBe(5);
    expect([...addresses].sort()).toEqual(['192.0.2.2', '192.0.2.3', '192.0.2.4', '192.0.2.5', '192.0.2.6']);
    expectError(
      await server.request('POST', '/v1/public-ips', { key, body: { region } }),
      503,
      'service_unavailable',
    );

    const released = made[0];
    await call('DELETE', `/v1/public-ips/${released.id}`);
    clock.advance(23 * HOUR);
    expectError(
      await server.request('POST', '/v1/public-ips', { key, body: { region } }),
      503,
      'service_unavailable',
    );
    expectError(
      await server.request('POST', '/v1/instances', {
        key,
        body: { name: 'late', instance_type: 'compute-1x', region, image: 'ubuntu-24.04' },
      }),
      503,
      'service_unavailable',
    );
    clock.advance(HOUR);
    expect((await allocate(region)).address).toBe(released.address);
  });

  it('concurrent allocations and creates in one region never share an address', async () => {
    const region = 'ap-northeast-1';
    const accounts = await Promise.all([account(server), account(server), account(server)]);
    const replies = await Promise.all(
      accounts.flatMap(({ key: k }) => [
        server.request('POST', '/v1/public-ips', { key: k, body: { region } }),
        server.request('POST', '/v1/public-ips', { key: k, body: { region } }),
        server.request('POST', '/v1/instances', {
          key: k,
          body: { name: 'race', instance_type: 'compute-1x', region, image: 'ubuntu-24.04' },
        }),
      ]),
    );
    const made = replies.filter((r) => r.status === 201 || r.status === 202).map((r) => r.body.data);
    const refused = replies.filter((r) => r.status === 503);
    expect(made.length + refused.length, replies.map((r) => r.text).join('\n')).toBe(replies.length);
    expect(made).toHaveLength(5);
    const addresses = made.map((m) => m.address ?? m.public_ip);
    expect(new Set(addresses).size).toBe(5);
    await settle();
  });

  it('bills an address held unassigned at 0.005 USD per hour, not while assigned', async () => {
    const billed = await account(server);
    clock.set(new Date('2026-06-01T00:00:00Z'));
    await runDue();
    const ip = await allocate('us-east-1', billed.key);
    clock.set(new Date('2026-06-01T10:00:00Z'));
    // Traffic pinned to none: the account's figures here are of time (data transfer: billing-transfer.test.ts).
    const vm = await instance(
      'us-east-1',
      { public_ip: false, tags: { 'nimbus.sim/metrics': 'net_tx_bps=0,net_rx_bps=0' } },
      billed.key,
    );
    await call('POST', `/v1/public-ips/${ip.id}/assign`, { instance_id: vm.id }, 200, billed.key);
    clock.set(new Date('2026-06-01T15:00:00Z'));
    await call('POST', `/v1/public-ips/${ip.id}/unassign`, undefined, 200, billed.key);
    clock.set(new Date('2026-06-01T17:00:00Z'));
    await call('DELETE', `/v1/public-ips/${ip.id}`, undefined, 200, billed.key);
    clock.set(new Date('2026-06-02T00:00:00Z'));

    const usage = await call('GET', '/v1/billing/usage', undefined, 200, billed.key);
    const line = usage.line_items.find((l: { meter: string }) => l.meter === 'public_ip_idle');
    expect(line).toMatchObject({
      resource_id: ip.id,
      resource_type: 'public_ip',
      quantity: 12,
      unit: 'hour',
      unit_price: 0.005,
      amount: 0.06,
    });
    const csv = await server.request('GET', '/v1/billing/usage.csv', { key: billed.key });
    expect(csv.status, csv.text).toBe(200);
    expect(csv.text).toContain('public_ip_idle');
    const estimate = await call('GET', '/v1/billing/estimate?public_ip_count=2&hours=730');
    expect(estimate.breakdown).toEqual([expect.objectContaining({ item: 'public_ip_idle', amount: 7.3 })]);
  });
});
