/**
 * Snapshots over HTTPS, on both stores: create from a volume, a root volume or an instance, every field;
 * creating → available, failed by the simulator's fault tag (with the reason), deleting → gone; the
 * 400s and 409s; PATCH; the events; the snapshots quota; lists with every filter and sort; a snapshot
 * outliving its source; cross-account 404s for the sources named in a body.
 */
import { describe, expect, it } from 'vitest';
import { FAULT_TAG, SNAPSHOT_FAULT_ERROR } from '../src/drivers/simulator/simulator.js';
import { STORES } from './helpers/backends.js';
import { account, expectError, expectInvalid } from './helpers/common.js';
import { act, createInstance, createRunning, eventsOf, fault, waitForStatus } from './helpers/instances.js';
import { serverForSuite } from './helpers/server.js';
import { availableSnapshot, createSnapshot, waitForSnapshot } from './helpers/snapshots.js';
import { createAvailable, createVolume, volumeAct, waitForVolume } from './helpers/volumes.js';

const FIELDS = [
  'completed_at',
  'created_at',
  'error',
  'id',
  'kind',
  'name',
  'region',
  'size_gb',
  'source_instance_id',
  'source_volume_id',
  'status',
  'tags',
];

describe.each(STORES)('Snapshots (%s)', (store) => {
  const server = serverForSuite({ store });

  it('takes a snapshot of a volume: 202 creating with every field, then available with completed_at', async () => {
    const { key } = await account(server);
    const volume = await createAvailable(server, key, { size_gb: 30 });
    const created = await createSnapshot(server, key, {
      name: 'before-upgrade',
      volume_id: volume.id,
      tags: { env: 'prod' },
    });
    expect(Object.keys(created).sort()).toEqual(FIELDS);
    expect(created).toMatchObject({
      name: 'before-upgrade',
      source_volume_id: volume.id,
      source_instance_id: null,
      size_gb: 30,
      region: 'us-east-1',
      status: 'creating',
      kind: 'manual',
      error: null,
      tags: { env: 'prod' },
      completed_at: null,
    });
    expect(created.id).toMatch(/^snap_/);
    const done = await waitForSnapshot(server, key, created.id, 'available');
    expect(done.completed_at >= done.created_at).toBe(true);
    const events = await eventsOf(server, key, created.id);
    expect(events.map((e) => e.type)).toEqual(['snapshot.created', 'snapshot.completed']);
    expect(events[1]?.data).toMatchObject({
      snapshot_id: created.id,
      name: 'before-upgrade',
      status: 'available',
      kind: 'manual',
      source_volume_id: volume.id,
      source_instance_id: null,
      size_gb: 30,
    });
  });

  it("takes a snapshot of an instance's root volume by instance_id or by the root volume's id", async () => {
    const { key } = await account(server);
    const instance = await createRunning(server, key);
    const byInstance = await availableSnapshot(server, key, { instance_id: instance.id });
    expect(byInstance).toMatchObject({
      source_volume_id: instance.root_volume_id,
      source_instance_id: instance.id,
      size_gb: 25,
    });
    const byVolume = await availableSnapshot(server, key, { volume_id: instance.root_volume_id });
    expect(byVolume.source_instance_id).toBe(instance.id);
    // Stopped instances too.
    expect((await act(server, key, instance.id, 'stop')).status).toBe(202);
    await waitForStatus(server, key, instance.id, 'stopped');
    await availableSnapshot(server, key, { instance_id: instance.id });
  });

  it('fails with a reason when the source carries nimbus.sim/fault: snapshot-fail (volume or instance)', async () => {
    const { key } = await account(server);
    const volume = await createAvailable(server, key, { tags: { [FAULT_TAG]: 'snapshot-fail' } });
    const failing = await createSnapshot(server, key, { volume_id: volume.id });
    const failed = await waitForSnapshot(server, key, failing.id, 'failed');
    expect(failed.error).toBe(SNAPSHOT_FAULT_ERROR);
    expect(failed.completed_at).not.toBeNull();
    const events = await eventsOf(server, key, failing.id);
    expect(events.at(-1)).toMatchObject({
      type: 'snapshot.failed',
      data: { status: 'failed', error: SNAPSHOT_FAULT_ERROR },
    });

    const instance = await createRunning(server, key, { tags: { [FAULT_TAG]: 'snapshot-fail' } });
    expect(instance.status).toBe('running');
    const root = await createSnapshot(server, key, { instance_id: instance.id });
    expect((await waitForSnapshot(server, key, root.id, 'failed')).error).toBe(SNAPSHOT_FAULT_ERROR);

    // A failed snapshot can be deleted.
    const deleted = await server.request('DELETE', `/v1/snapshots/${failing.id}`, { key });
    expect(deleted.status, deleted.text).toBe(202);
    expect(deleted.body.data.status).toBe('deleting');
    await waitForSnapshot(server, key, failing.id, 'gone');
  });

  it('validates the fault tag on volumes: only snapshot faults', async () => {
    const { key } = await account(server);
    const reply = await server.request('POST', '/v1/volumes', {
      key,
      body: { name: 'v', size_gb: 1, region: 'us-east-1', tags: { [FAULT_TAG]: 'boot-error' } },
    });
    const error = expectError(reply, 400, 'invalid_request');
    expect(error.details).toMatchObject({ field: `tags.${FAULT_TAG}`, allowed_values: ['snapshot-fail'] });
  });

  it('refuses bad creates: no source, two sources, a volume not settled, an instance starting', async () => {
    const { key } = await account(server);
    const volume = await createAvailable(server, key);
    expectInvalid(await server.request('POST', '/v1/snapshots', { key, body: { name: 'x' } }), 'volume_id');
    // Held in starting by the simulator's fault, so the 409 does not race the boot.
    const instance = await createInstance(server, key, fault('stuck-starting'));
    const both = await server.request('POST', '/v1/snapshots', {
      key,
      body: { name: 'x', volume_id: volume.id, instance_id: instance.id },
    });
    expectError(both, 400, 'invalid_request');
    const starting = await server.request('POST', '/v1/snapshots', {
      key,
      body: { name: 'x', instance_id: instance.id },
    });
    expect(expectError(starting, 409, 'conflict').details).toMatchObject({
      current_status: 'starting',
      allowed_statuses: ['running', 'stopped'],
    });
    const creating = await createVolume(server, key);
    const notYet = await server.request('POST', '/v1/snapshots', {
      key,
      body: { name: 'x', volume_id: creating.id },
    });
    // The volume may already be available at speed-up 1000; if it is still creating, the answer is 409.
    expect([202, 409]).toContain(notYet.status);
    expectInvalid(
      await server.request('POST', '/v1/snapshots', {
        key,
        body: { name: 'bad name!', volume_id: volume.id },
      }),
      'name',
    );
    expectInvalid(
      await server.request('POST', '/v1/snapshots', {
        key,
        body: { name: 'x', volume_id: volume.id, size_gb: 3 },
      }),
      'size_gb',
    );
  });

  it('renames and retags (PATCH), and refuses other fields; delete → deleting → 404 with snapshot.deleted', async () => {
    const { key } = await account(server);
    const volume = await createAvailable(server, key);
    const snap = await availableSnapshot(server, key, { volume_id: volume.id });
    const patched = await server.request('PATCH', `/v1/snapshots/${snap.id}`, {
      key,
      body: { name: 'renamed', tags: { a: 'b' } },
    });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body.data).toMatchObject({ name: 'renamed', tags: { a: 'b' }, status: 'available' });
    expectInvalid(
      await server.request('PATCH', `/v1/snapshots/${snap.id}`, { key, body: { size_gb: 4 } }),
      'size_gb',
    );
    const deleted = await server.request('DELETE', `/v1/snapshots/${snap.id}`, { key });
    expect(deleted.status).toBe(202);
    expect(deleted.body.data.status).toBe('deleting');
    const again = await server.request('DELETE', `/v1/snapshots/${snap.id}`, { key });
    if (again.status !== 404) {
      expect(expectError(again, 409, 'conflict').details).toMatchObject({ current_status: 'deleting' });
      const renaming = await server.request('PATCH', `/v1/snapshots/${snap.id}`, {
        key,
        body: { name: 'y' },
      });
      expect([404, 409]).toContain(renaming.status);
    }
    await waitForSnapshot(server, key, snap.id, 'gone');
    const events = await eventsOf(server, key, snap.id);
    expect(events.at(-1)).toMatchObject({
      type: 'snapshot.deleted',
      data: { snapshot_id: snap.id, status: 'deleted', name: 'renamed' },
    });
  });

  it('outlives its source: the volume deleted, the snapshot stays available and names it', async () => {
    const { key } = await account(server);
    const volume = await createAvailable(server, key);
    const snap = await availableSnapshot(server, key, { volume_id: volume.id });
    expect((await server.request('DELETE', `/v1/volumes/${volume.id}`, { key })).status).toBe(202);
    await waitForVolume(server, key, volume.id, 'gone');
    const still = await server.request('GET', `/v1/snapshots/${snap.id}`, { key });
    expect(still.body.data).toMatchObject({ status: 'available', source_volume_id: volume.id });
  });

  it('counts against the snapshots quota, atomically, in the quota view', async () => {
    const { id, key } = await account(server);
    await server.admin('set-quota', '--account', id, '--name', 'snapshots', '--limit', '3');
    const volume = await createAvailable(server, key);
    const replies = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        server.request('POST', '/v1/snapshots', { key, body: { name: `q-${i}`, volume_id: volume.id } }),
      ),
    );
    expect(replies.filter((r) => r.status === 202)).toHaveLength(3);
    for (const refused of replies.filter((r) => r.status !== 202)) {
      expect(expectError(refused, 403, 'quota_exceeded').details).toMatchObject({
        quota: 'snapshots',
        limit: 3,
        used: 3,
        requested: 1,
      });
    }
    const quota = await server.request('GET', '/v1/account/quota', { key });
    expect(quota.body.data.find((q: any) => q.name === 'snapshots')).toEqual({
      name: 'snapshots',
      limit: 3,
      used: 3,
    });
  });

  it('lists with every filter and sort', async () => {
    const { key } = await account(server);
    const small = await createAvailable(server, key, { size_gb: 5 });
    const large = await createAvailable(server, key, { size_gb: 50, region: 'eu-central-1' });
    const instance = await createRunning(server, key);
    const a = await availableSnapshot(server, key, { name: 'b-small', volume_id: small.id });
    const b = await availableSnapshot(server, key, { name: 'a-large', volume_id: large.id });
    const c = await availableSnapshot(server, key, { name: 'c-root', instance_id: instance.id });
    const failing = await createAvailable(server, key, { tags: { [FAULT_TAG]: 'snapshot-fail' } });
    const d = await createSnapshot(server, key, { name: 'd-failed', volume_id: failing.id });
    await waitForSnapshot(server, key, d.id, 'failed');

    const ids = async (query: string) => {
      const reply = await server.request('GET', `/v1/snapshots?${query}`, { key });
      expect(reply.status, reply.text).toBe(200);
      return reply.body.data.map((s: any) => s.id);
    };
    expect(await ids('')).toEqual([d.id, c.id, b.id, a.id]);
    expect(await ids('order=asc')).toEqual([a.id, b.id, c.id, d.id]);
    expect(await ids('sort=name&order=asc')).toEqual([b.id, a.id, c.id, d.id]);
    expect(await ids('sort=size_gb&order=desc')).toEqual([b.id, c.id, d.id, a.id]);
    const bySize = await server.request('GET', '/v1/snapshots?sort=size_gb&order=asc', { key });
    expect(bySize.body.data.map((s: any) => s.size_gb)).toEqual([5, 10, 25, 50]);
    expect(await ids('status=failed')).toEqual([d.id]);
    expect(await ids('kind=manual')).toHaveLength(4);
    expect(await ids('kind=scheduled')).toEqual([]);
    expect(await ids(`source_volume_id=${small.id}`)).toEqual([a.id]);
    expect(await ids(`source_instance_id=${instance.id}`)).toEqual([c.id]);
    expect(await ids('region=eu-central-1')).toEqual([b.id]);
    expect(await ids('region=eu-central-1&status=failed')).toEqual([]);
    const paged = await server.request('GET', '/v1/snapshots?limit=3&page=2', { key });
    expect(paged.body.pagination).toMatchObject({
      page: 2,
      limit: 3,
      total_items: 4,
      total_pages: 2,
      has_prev: true,
    });
    expectInvalid(await server.request('GET', '/v1/snapshots?sort=status', { key }), 'sort');
    expectInvalid(await server.request('GET', '/v1/snapshots?status=ready', { key }), 'status');
  });

  it("another account's volume or instance named in the body is 404 naming the field", async () => {
    const mine = await account(server);
    const theirs = await account(server);
    const volume = await createAvailable(server, theirs.key);
    const instance = await createRunning(server, theirs.key);
    const byVolume = await server.request('POST', '/v1/snapshots', {
      key: mine.key,
      body: { name: 'x', volume_id: volume.id },
    });
    expect(expectError(byVolume, 404, 'not_found').details).toEqual({
      resource: 'volume',
      id: volume.id,
      field: 'volume_id',
    });
    const byInstance = await server.request('POST', '/v1/snapshots', {
      key: mine.key,
      body: { name: 'x', instance_id: instance.id },
    });
    expect(expectError(byInstance, 404, 'not_found').details).toEqual({
      resource: 'instance',
      id: instance.id,
      field: 'instance_id',
    });
  });

  it('a volume being restored over or attached can still be copied only when settled', async () => {
    const { key } = await account(server);
    const instance = await createRunning(server, key);
    const volume = await createAvailable(server, key);
    expect((await volumeAct(server, key, volume.id, 'attach', { instance_id: instance.id })).status).toBe(
      202,
    );
    await waitForVolume(server, key, volume.id, 'in-use');
    // Attached volumes are copied live.
    await availableSnapshot(server, key, { volume_id: volume.id });
  });
});
