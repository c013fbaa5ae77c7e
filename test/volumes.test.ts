/**
 * Volumes over HTTPS, on both stores: create (with every field), get, PATCH, delete, the 400s of create,
 * quotas (count and storage) and the quota view, lists with every filter and sort, root volumes (listed,
 * never detached, deleted or resized alone; resized by their instance's resize) and cross-account 404s
 * for instances named in a body.
 */
import { describe, expect, it } from 'vitest';
import { STORES } from './helpers/backends.js';
import { account, expectError, expectInvalid, waitFor } from './helpers/common.js';
import { act, createInstance, createRunning, createStopped, waitForStatus } from './helpers/instances.js';
import { serverForSuite } from './helpers/server.js';
import {
  createAvailable,
  createVolume,
  volumeAct,
  volumeEventTypes,
  waitForVolume,
} from './helpers/volumes.js';

const FIELDS = [
  'attached_at',
  'backup_schedule',
  'created_at',
  'device_name',
  'filesystem',
  'id',
  'instance_id',
  'kind',
  'name',
  'protection',
  'region',
  'size_gb',
  'status',
  'tags',
  'updated_at',
];

describe.each(STORES)('Volumes (%s)', (store) => {
  const server = serverForSuite({ store });

  it('creates a volume (202 creating) with every field, formatted, then it is available', async () => {
    const { key } = await account(server);
    const created = await createVolume(server, key, {
      name: 'data-1',
      size_gb: 50,
      filesystem: 'xfs',
      tags: { env: 'prod' },
    });
    expect(Object.keys(created).sort()).toEqual(FIELDS);
    expect(created).toMatchObject({
      name: 'data-1',
      size_gb: 50,
      region: 'us-east-1',
      status: 'creating',
      kind: 'data',
      instance_id: null,
      attached_at: null,
      device_name: null,
      filesystem: 'xfs',
      tags: { env: 'prod' },
    });
    expect(created.id).toMatch(/^vol_/);
    const available = await waitForVolume(server, key, created.id, 'available');
    expect(available.filesystem).toBe('xfs');
    expect(await volumeEventTypes(server, key, created.id)).toEqual(['volume.created']);
  });

  it('refuses sizes outside 1–16384, unknown regions and filesystems, and extra fields (400 naming the field)', async () => {
    const { key } = await account(server);
    const post = (body: Record<string, unknown>) =>
      server.request('POST', '/v1/volumes', {
        key,
        body: { name: 'x', size_gb: 10, region: 'us-east-1', ...body },
      });
    expectInvalid(await post({ size_gb: 0 }), 'size_gb');
    expectInvalid(await post({ size_gb: 16_385 }), 'size_gb');
    expectInvalid(await post({ size_gb: 1.5 }), 'size_gb');
    expectInvalid(await post({ region: 'mars-1' }), 'region');
    expectInvalid(await post({ filesystem: 'ntfs' }), 'filesystem');
    expectInvalid(await post({ kind: 'root' }), 'kind');
    expect((await post({ size_gb: 16_384 })).status).toBe(202);
  });

  it('PATCH changes name and tags; anything else is 400; a missing volume is 404', async () => {
    const { key } = await account(server);
    const volume = await createAvailable(server, key);
    const patched = await server.request('PATCH', `/v1/volumes/${volume.id}`, {
      key,
      body: { name: 'renamed', tags: { team: 'db' } },
    });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body.data).toMatchObject({ name: 'renamed', tags: { team: 'db' }, status: 'available' });
    expectInvalid(
      await server.request('PATCH', `/v1/volumes/${volume.id}`, { key, body: { size_gb: 99 } }),
      'size_gb',
    );
    const missing = await server.request('GET', '/v1/volumes/vol_missing', { key });
    expect(expectError(missing, 404, 'not_found').details).toEqual({ resource: 'volume', id: 'vol_missing' });
  });

  it('deletes an available volume (202 deleting, then 404) with volume.deleted; deleting again is 404', async () => {
    const { key } = await account(server);
    const volume = await createAvailable(server, key);
    const reply = await server.request('DELETE', `/v1/volumes/${volume.id}`, { key });
    expect(reply.status, reply.text).toBe(202);
    expect(reply.body.data.status).toBe('deleting');
    await waitForVolume(server, key, volume.id, 'gone');
    expect(await volumeEventTypes(server, key, volume.id)).toEqual(['volume.created', 'volume.deleted']);
    expectError(await server.request('DELETE', `/v1/volumes/${volume.id}`, { key }), 404, 'not_found');
  });

  it('grows an available volume (202 resizing, then available, volume.resized); smaller or equal is 400', async () => {
    const { key } = await account(server);
    const volume = await createAvailable(server, key, { size_gb: 20 });
    expectInvalid(await volumeAct(server, key, volume.id, 'resize', { size_gb: 10 }), 'size_gb');
    expectInvalid(await volumeAct(server, key, volume.id, 'resize', { size_gb: 20 }), 'size_gb');
    const reply = await volumeAct(server, key, volume.id, 'resize', { size_gb: 40 });
    expect(reply.status, reply.text).toBe(202);
    expect(reply.body.data).toMatchObject({ status: 'resizing', size_gb: 40 });
    const grown = await waitForVolume(server, key, volume.id, 'available');
    expect(grown.size_gb).toBe(40);
    expect(await volumeEventTypes(server, key, volume.id)).toEqual(['volume.created', 'volume.resized']);
  });

  it('an action from a status that does not allow it is 409 with current and allowed statuses', async () => {
    const { key } = await account(server);
    const volume = await createVolume(server, key);
    const error = expectError(await volumeAct(server, key, volume.id, 'detach'), 409, 'conflict');
    expect(error.details).toMatchObject({
      current_status: expect.any(String),
      allowed_statuses: ['in-use', 'error'],
    });
    await waitForVolume(server, key, volume.id, 'available');
    expectError(await volumeAct(server, key, volume.id, 'detach'), 409, 'conflict');
  });

  describe('quotas', () => {
    it('counts data volumes and their GB, atomically with create, and shows them in the quota view', async () => {
      const { id, key } = await account(server);
      await server.admin('set-quota', '--account', id, '--name', 'volumes', '--limit', '3');
      await server.admin('set-quota', '--account', id, '--name', 'volume_storage_gb', '--limit', '100');
      // The instance's root volume counts against neither.
      await createInstance(server, key);
      const a = await createVolume(server, key, { size_gb: 60 });
      const tooBig = await server.request('POST', '/v1/volumes', {
        key,
        body: { name: 'big', size_gb: 41, region: 'us-east-1' },
      });
      expect(expectError(tooBig, 403, 'quota_exceeded').details).toEqual({
        quota: 'volume_storage_gb',
        limit: 100,
        used: 60,
        requested: 41,
      });
      await createVolume(server, key, { size_gb: 20 });
      // Growing counts too.
      await waitForVolume(server, key, a.id, 'available');
      const grow = await volumeAct(server, key, a.id, 'resize', { size_gb: 81 });
      expect(expectError(grow, 403, 'quota_exceeded').details).toMatchObject({ quota: 'volume_storage_gb' });
      // Concurrent creates cannot both take the last slot.
      const racing = await Promise.all(
        [1, 2, 3].map((n) =>
          server.request('POST', '/v1/volumes', {
            key,
            body: { name: `r-${n}`, size_gb: 1, region: 'us-east-1' },
          }),
        ),
      );
      expect(racing.map((r) => r.status).sort()).toEqual([202, 403, 403]);
      const quota = await server.request('GET', '/v1/account/quota', { key });
      const byName = Object.fromEntries(quota.body.data.map((q: any) => [q.name, q]));
      expect(byName.volumes).toMatchObject({ limit: 3, used: 3 });
      expect(byName.volume_storage_gb).toMatchObject({ limit: 100, used: 81 });
    });
  });

  it('a past-due account cannot create volumes (402) but reads, detaches and deletes them', async () => {
    const { id, key } = await account(server);
    const instance = await createInstance(server, key);
    const volume = await createVolume(server, key, { instance_id: instance.id });
    await waitForVolume(server, key, volume.id, 'in-use');
    await server.admin('set-account-status', '--account', id, '--status', 'past_due');
    const refused = await server.request('POST', '/v1/volumes', {
      key,
      body: { name: 'x', size_gb: 1, region: 'us-east-1' },
    });
    expectError(refused, 402, 'payment_required');
    expect((await server.request('GET', '/v1/volumes', { key })).status).toBe(200);
    expect((await volumeAct(server, key, volume.id, 'detach')).status).toBe(202);
    await waitForVolume(server, key, volume.id, 'available');
    expect((await server.request('DELETE', `/v1/volumes/${volume.id}`, { key })).status).toBe(202);
  });

  describe('lists', () => {
    it('filters by status, region, kind, instance_id, tag and name; sorts by created_at, name and size_gb', async () => {
      const { key } = await account(server);
      const instance = await createInstance(server, key);
      const a = await createAvailable(server, key, { name: 'b-vol', size_gb: 30, tags: { tier: 'gold' } });
      const b = await createAvailable(server, key, { name: 'a-vol', size_gb: 5, region: 'eu-central-1' });
      const c = await createAvailable(server, key, {
        name: 'c-vol',
        size_gb: 300,
        tags: { tier: 'gold', x: 'y' },
      });
      const list = async (query: string) => {
        const reply = await server.request('GET', `/v1/volumes?${query}`, { key });
        expect(reply.status, reply.text).toBe(200);
        return reply.body;
      };
      const ids = async (query: string) => (await list(query)).data.map((v: any) => v.id);
      expect(await ids('kind=data')).toEqual([c.id, b.id, a.id]);
      expect(await ids('kind=root')).toEqual([instance.root_volume_id]);
      expect((await list('kind=root')).data[0]).toMatchObject({
        kind: 'root',
        instance_id: instance.id,
        device_name: '/dev/vda',
        status: 'in-use',
        size_gb: 25,
      });
      expect(await ids(`instance_id=${instance.id}`)).toEqual([instance.root_volume_id]);
      expect(await ids('region=eu-central-1')).toEqual([b.id]);
      expect(await ids('status=available')).toEqual([c.id, b.id, a.id]);
      expect(await ids('status=in-use&kind=data')).toEqual([]);
      expect(await ids('tag=tier:gold')).toEqual([c.id, a.id]);
      expect(await ids('tag=tier:gold&tag=x:y')).toEqual([c.id]);
      expect(await ids('name=a-vol')).toEqual([b.id]);
      expect(await ids('kind=data&sort=name&order=asc')).toEqual([b.id, a.id, c.id]);
      expect(await ids('kind=data&sort=size_gb&order=desc')).toEqual([c.id, a.id, b.id]);
      expect(await ids('kind=data&sort=created_at&order=asc')).toEqual([a.id, b.id, c.id]);
      const paged = await list('kind=data&limit=2&page=2');
      expect(paged.data.map((v: any) => v.id)).toEqual([a.id]);
      expect(paged.pagination).toMatchObject({
        page: 2,
        limit: 2,
        total_items: 3,
        total_pages: 2,
        has_prev: true,
      });
      expectInvalid(await server.request('GET', '/v1/volumes?sort=status', { key }), 'sort');
      expectInvalid(await server.request('GET', '/v1/volumes?kind=swap', { key }), 'kind');
      expectInvalid(await server.request('GET', '/v1/volumes?status=gone', { key }), 'status');
    });
  });

  describe('root volumes', () => {
    it('cannot be detached, deleted, attached or resized directly (409 saying why); PATCH works', async () => {
      const { key } = await account(server);
      const instance = await createRunning(server, key);
      const root = instance.root_volume_id;
      for (const [action, body] of [
        ['detach', undefined],
        ['resize', { size_gb: 500 }],
        ['attach', { instance_id: instance.id }],
      ] as const) {
        const error = expectError(await volumeAct(server, key, root, action, body), 409, 'conflict');
        expect(error.message).toContain('root volume');
        expect(error.details).toMatchObject({ instance_id: instance.id, kind: 'root' });
      }
      const deleted = expectError(
        await server.request('DELETE', `/v1/volumes/${root}`, { key }),
        409,
        'conflict',
      );
      expect(deleted.message).toContain('root volume');
      const patched = await server.request('PATCH', `/v1/volumes/${root}`, {
        key,
        body: { name: 'os-disk' },
      });
      expect(patched.status, patched.text).toBe(200);
    });

    it('grows when its instance is resized, with volume.resized; goes when its instance is deleted', async () => {
      const { key } = await account(server);
      const instance = await createStopped(server, key);
      const root = instance.root_volume_id;
      expect((await act(server, key, instance.id, 'resize', { instance_type: 'compute-4x' })).status).toBe(
        202,
      );
      await waitFor('root volume at 100 GB', async () => {
        const reply = await server.request('GET', `/v1/volumes/${root}`, { key });
        return reply.body.data.size_gb === 100 ? true : undefined;
      });
      const events = await server.request('GET', `/v1/events?resource_id=${root}`, { key });
      expect(events.body.data[0]).toMatchObject({
        type: 'volume.resized',
        data: { volume_id: root, size_gb: 100, kind: 'root', instance_id: instance.id },
      });
      await waitForStatus(server, key, instance.id, 'stopped');
      expect((await server.request('DELETE', `/v1/instances/${instance.id}`, { key })).status).toBe(202);
      await waitForStatus(server, key, instance.id, 'gone');
      expectError(await server.request('GET', `/v1/volumes/${root}`, { key }), 404, 'not_found');
    });
  });

  it("another account's volume is 404 on every endpoint; its instance named in a body is 404 naming the field", async () => {
    const mine = await account(server);
    const theirs = await account(server);
    const theirVolume = await createAvailable(server, theirs.key);
    const theirInstance = await createInstance(server, theirs.key);
    const myVolume = await createAvailable(server, mine.key);
    for (const [method, path, body] of [
      ['GET', `/v1/volumes/${theirVolume.id}`, undefined],
      ['PATCH', `/v1/volumes/${theirVolume.id}`, { name: 'x' }],
      ['DELETE', `/v1/volumes/${theirVolume.id}`, undefined],
      ['POST', `/v1/volumes/${theirVolume.id}/detach`, undefined],
      ['POST', `/v1/volumes/${theirVolume.id}/resize`, { size_gb: 99 }],
    ] as const) {
      const reply = await server.request(method, path, { key: mine.key, ...(body ? { body } : {}) });
      expect(expectError(reply, 404, 'not_found').details).toEqual({
        resource: 'volume',
        id: theirVolume.id,
      });
    }
    const attach = await volumeAct(server, mine.key, myVolume.id, 'attach', {
      instance_id: theirInstance.id,
    });
    expect(expectError(attach, 404, 'not_found').details).toEqual({
      resource: 'instance',
      id: theirInstance.id,
      field: 'instance_id',
    });
    const create = await server.request('POST', '/v1/volumes', {
      key: mine.key,
      body: { name: 'x', size_gb: 1, region: 'us-east-1', instance_id: theirInstance.id },
    });
    expect(expectError(create, 404, 'not_found').details).toMatchObject({ field: 'instance_id' });
    // Nothing of theirs changed.
    expect(
      (await server.request('GET', `/v1/volumes/${theirVolume.id}`, { key: theirs.key })).body.data.status,
    ).toBe('available');
  });
});
