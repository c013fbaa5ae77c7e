/**
 * Instances over HTTPS, on both stores: quotas (instances, vCPUs, GPUs), payment (past-due accounts), and
 * the region's GPU and public-IPv4 capacity.
 */
import { describe, expect, it } from 'vitest';
import { STORES } from './helpers/backends.js';
import { account, expectError } from './helpers/common.js';
import {
  act,
  COMPUTE,
  createInstance,
  createRunning,
  createStopped,
  getInstance,
  listTotal,
  waitForStatus,
} from './helpers/instances.js';
import { serverForSuite } from './helpers/server.js';

type Json = Record<string, any>;

describe.each(STORES)('Instances: quotas and payment (%s)', (store) => {
  const server = serverForSuite({ store });

  describe('quotas', () => {
    const quotaOf = async (key: string) => {
      const reply = await server.request('GET', '/v1/account/quota', { key });
      expect(reply.status, reply.text).toBe(200);
      const byName = Object.fromEntries((reply.body.data as Json[]).map((q) => [q.name, q]));
      return { instances: byName.instances, vcpus: byName.vcpus, gpus: byName.gpus };
    };

    it('a free account gets 403 quota_exceeded on its 6th instance; a delete makes room', async () => {
      const { key } = await account(server, 'free');
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) ids.push((await createInstance(server, key)).id);
      const error = expectError(
        await server.request('POST', '/v1/instances', { key, body: { name: 'sixth', ...COMPUTE } }),
        403,
        'quota_exceeded',
      );
      expect(error.details).toEqual({ quota: 'instances', limit: 5, used: 5, requested: 1 });
      expect(await listTotal(server, key)).toBe(5);
      expect(await quotaOf(key)).toEqual({
        instances: { name: 'instances', limit: 5, used: 5 },
        vcpus: { name: 'vcpus', limit: 16, used: 5 },
        gpus: { name: 'gpus', limit: 0, used: 0 },
      });
      expect((await server.request('DELETE', `/v1/instances/${ids[0]}`, { key })).status).toBe(202);
      await waitForStatus(server, key, ids[0] as string, 'gone');
      expect((await quotaOf(key)).instances.used).toBe(4);
      await createInstance(server, key);
    });

    it('a quota lowered below what is in use blocks only what it counts', async () => {
      const { id: accountId, key } = await account(server, 'professional');
      await createInstance(server, key, { instance_type: 'gpu-1x', image: 'ubuntu-22.04-cuda' });
      await server.admin('set-quota', '--account', accountId, '--name', 'gpus', '--limit', '0');
      // Over the GPU quota now: another GPU instance is refused, a CPU-only one still fits.
      const refused = expectError(
        await server.request('POST', '/v1/instances', {
          key,
          body: {
            name: 'more-gpu',
            instance_type: 'gpu-1x',
            region: 'us-east-1',
            image: 'ubuntu-22.04-cuda',
          },
        }),
        403,
        'quota_exceeded',
      );
      expect(refused.details).toMatchObject({ quota: 'gpus', limit: 0, used: 1, requested: 1 });
      await createInstance(server, key);
    });

    it('a free account gets 403 on vCPUs past 16 (compute-16x, then compute-1x)', async () => {
      const { key } = await account(server, 'free');
      await createInstance(server, key, { instance_type: 'compute-16x' });
      const error = expectError(
        await server.request('POST', '/v1/instances', { key, body: { name: 'one-more', ...COMPUTE } }),
        403,
        'quota_exceeded',
      );
      expect(error.details).toEqual({ quota: 'vcpus', limit: 16, used: 16, requested: 1 });
      expect(await quotaOf(key)).toMatchObject({
        instances: { used: 1 },
        vcpus: { used: 16 },
        gpus: { used: 0 },
      });
    });

    it('a resize that would pass the vCPU quota is 403 and changes nothing', async () => {
      const { key } = await account(server, 'free');
      await createInstance(server, key, { instance_type: 'compute-8x' });
      const small = await createRunning(server, key, { instance_type: 'compute-4x' });
      const error = expectError(
        await act(server, key, small.id, 'resize', { instance_type: 'compute-16x' }),
        403,
        'quota_exceeded',
      );
      expect(error.details).toEqual({ quota: 'vcpus', limit: 16, used: 12, requested: 12 });
      expect(await getInstance(server, key, small.id)).toMatchObject({
        status: 'running',
        instance_type: 'compute-4x',
      });
    });

    it('a free account may not have any GPU (403, gpus limit 0)', async () => {
      const { key } = await account(server, 'free');
      for (const instance_type of ['gpu-1x', 'gpu-h100-1x']) {
        const error = expectError(
          await server.request('POST', '/v1/instances', {
            key,
            body: { name: 'gpu', instance_type, region: 'us-east-1', image: 'ubuntu-22.04-cuda' },
          }),
          403,
          'quota_exceeded',
        );
        expect(error.details).toEqual({ quota: 'gpus', limit: 0, used: 0, requested: 1 });
      }
      expect(await listTotal(server, key)).toBe(0);
    });

    it('GET /v1/account/quota counts instances, vCPUs and GPUs', async () => {
      const { key } = await account(server);
      await createInstance(server, key, { instance_type: 'gpu-2x', image: 'ubuntu-22.04-cuda' });
      await createInstance(server, key, { instance_type: 'memory-4x' });
      expect(await quotaOf(key)).toEqual({
        instances: { name: 'instances', limit: 50, used: 2 },
        vcpus: { name: 'vcpus', limit: 256, used: 20 },
        gpus: { name: 'gpus', limit: 8, used: 2 },
      });
    });

    it('an admin quota override applies at once', async () => {
      const { id, key } = await account(server);
      await server.admin('set-quota', '--account', id, '--name', 'instances', '--limit', '2');
      await createInstance(server, key);
      await createInstance(server, key);
      const error = expectError(
        await server.request('POST', '/v1/instances', { key, body: { name: 'third', ...COMPUTE } }),
        403,
        'quota_exceeded',
      );
      expect(error.details).toEqual({ quota: 'instances', limit: 2, used: 2, requested: 1 });
    });
  });

  describe('payment', () => {
    it('a past-due account cannot create or start (402) but can read, list, stop and delete', async () => {
      const { id: accountId, key } = await account(server);
      const running = await createRunning(server, key);
      const stopped = await createStopped(server, key);
      const doomed = await createRunning(server, key);
      // Read once, so the verified key is cached before the status changes.
      await getInstance(server, key, running.id);
      await server.admin('set-account-status', '--account', accountId, '--status', 'past_due');

      expectError(
        await server.request('POST', '/v1/instances', { key, body: { name: 'more', ...COMPUTE } }),
        402,
        'payment_required',
      );
      expectError(await act(server, key, stopped.id, 'start'), 402, 'payment_required');
      expect(await listTotal(server, key)).toBe(3);
      expect((await getInstance(server, key, running.id)).status).toBe('running');
      expect((await server.request('GET', `/v1/instances/${running.id}/network`, { key })).status).toBe(200);
      expect((await act(server, key, running.id, 'stop')).status).toBe(202);
      await waitForStatus(server, key, running.id, 'stopped');
      expect((await server.request('DELETE', `/v1/instances/${doomed.id}`, { key })).status).toBe(202);
      await waitForStatus(server, key, doomed.id, 'gone');
      expect((await getInstance(server, key, stopped.id)).status).toBe('stopped');

      // Settled: creates and starts work again at once.
      await server.admin('set-account-status', '--account', accountId, '--status', 'active');
      expect((await act(server, key, stopped.id, 'start')).status).toBe(202);
      await createInstance(server, key);
    });
  });
});

describe.each(STORES)('Instance capacity (%s)', (store) => {
  const server = serverForSuite({
    store,
    env: { NIMBUS_GPU_CAPACITY: 'us-east-1=2', NIMBUS_PUBLIC_IP_POOLS: 'us-west-2=198.51.100.0/29' },
  });
  const GPU = { region: 'us-east-1', image: 'ubuntu-22.04-cuda' };

  it('GPU capacity: gpu-2x fits, one more GPU is 503 insufficient_capacity (for any account); delete frees it', async () => {
    const { key } = await account(server, 'enterprise');
    const big = await createInstance(server, key, { ...GPU, instance_type: 'gpu-2x' });
    const refused = expectError(
      await server.request('POST', '/v1/instances', {
        key,
        body: { name: 'gpu-b', ...GPU, instance_type: 'gpu-1x' },
      }),
      503,
      'service_unavailable',
    );
    expect(refused.details).toMatchObject({ reason: 'insufficient_capacity', region: 'us-east-1' });
    const other = await account(server, 'enterprise');
    expectError(
      await server.request('POST', '/v1/instances', {
        key: other.key,
        body: { name: 'gpu-c', ...GPU, instance_type: 'gpu-1x' },
      }),
      503,
      'service_unavailable',
    );
    // A region configured without GPUs has none.
    const west = expectError(
      await server.request('POST', '/v1/instances', {
        key,
        body: { name: 'gpu-d', ...GPU, region: 'us-west-2', instance_type: 'gpu-1x' },
      }),
      503,
      'service_unavailable',
    );
    expect(west.details).toMatchObject({ reason: 'insufficient_capacity' });
    expect(await listTotal(server, key)).toBe(1);

    expect((await server.request('DELETE', `/v1/instances/${big.id}`, { key })).status).toBe(202);
    await waitForStatus(server, key, big.id, 'gone');
    const one = await createInstance(server, other.key, { ...GPU, instance_type: 'gpu-1x' });
    // 1 of 2 in use: resizing to gpu-2x needs 1 more, which fits; then the region is full again.
    await waitForStatus(server, other.key, one.id, 'running');
    const resize = await act(server, other.key, one.id, 'resize', { instance_type: 'gpu-2x' });
    expect(resize.status, resize.text).toBe(202);
    expectError(
      await server.request('POST', '/v1/instances', {
        key,
        body: { name: 'gpu-e', ...GPU, instance_type: 'gpu-1x' },
      }),
      503,
      'service_unavailable',
    );
    await waitForStatus(server, other.key, one.id, 'running');
    expect((await server.request('DELETE', `/v1/instances/${one.id}`, { key: other.key })).status).toBe(202);
    await waitForStatus(server, other.key, one.id, 'gone');
    await createInstance(server, key, { ...GPU, instance_type: 'gpu-2x' });
  });

  it('public IPv4 pool: a /29 hands out .2–.6, then 503; a deleted instance’s address stays out of the pool for 24 h', async () => {
    const { key } = await account(server, 'enterprise');
    const west = { region: 'us-west-2' };
    const made: Json[] = [];
    for (let i = 0; i < 5; i++) made.push(await createInstance(server, key, west));
    expect(made.map((i) => i.public_ip)).toEqual([2, 3, 4, 5, 6].map((n) => `198.51.100.${n}`));
    const error = expectError(
      await server.request('POST', '/v1/instances', { key, body: { name: 'no-ip', ...COMPUTE, ...west } }),
      503,
      'service_unavailable',
    );
    expect(error.details).toMatchObject({ reason: 'insufficient_capacity', region: 'us-west-2' });
    expect(await listTotal(server, key)).toBe(5);
    // The pool is the region's, not the account's.
    const other = await account(server);
    expectError(
      await server.request('POST', '/v1/instances', {
        key: other.key,
        body: { name: 'no-ip', ...COMPUTE, ...west },
      }),
      503,
      'service_unavailable',
    );
    // Another region is unaffected.
    await createInstance(server, other.key);

    const middle = made[2] as Json;
    expect((await server.request('DELETE', `/v1/instances/${middle.id}`, { key })).status).toBe(202);
    await waitForStatus(server, key, middle.id, 'gone');
    // Its address was released with it, but waits 24 h before anyone gets it again (test/public-ips.test.ts
    // moves the clock past them): the pool is still empty; an instance without a public IP still fits.
    expectError(
      await server.request('POST', '/v1/instances', {
        key: other.key,
        body: { name: 'no-ip', ...COMPUTE, ...west },
      }),
      503,
      'service_unavailable',
    );
    const privateOnly = await createInstance(server, other.key, { ...west, public_ip: false });
    expect(privateOnly.public_ip).toBeNull();
  });
});
