/**
 * Restoring snapshots over HTTPS, on both stores: into a new volume, over a detached volume, over the
 * root disk of a stopped instance; each a durable job that ends in `snapshot.restored`. The 400s (sizes,
 * regions, what to restore into), the 409s (snapshot not available, target attached, instance not
 * stopped, a snapshot deleted while restored from, an instance started while its root is restored),
 * quotas, and cross-account 404s naming the field. A second suite holds a manual clock to see the
 * restoring states and the simulated timings.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { SIM_SNAPSHOT_TIMINGS_MS } from '../src/drivers/simulator/simulator.js';
import { ManualClock } from '../src/platform/domain/clock.js';
import { STORES } from './helpers/backends.js';
import { account, expectError, expectInvalid, waitFor } from './helpers/common.js';
import { act, createRunning, createStopped, eventsOf, waitForStatus } from './helpers/instances.js';
import { serverForSuite } from './helpers/server.js';
import { availableSnapshot, createSnapshot, restore, waitForSnapshot } from './helpers/snapshots.js';
import { createAvailable, createVolume, volumeAct, waitForVolume } from './helpers/volumes.js';

describe.each(STORES)('Snapshot restore (%s)', (store) => {
  const server = serverForSuite({ store });

  it('restores into a new volume: the snapshot’s size and region by default, then snapshot.restored', async () => {
    const { key } = await account(server);
    const source = await createAvailable(server, key, { size_gb: 20, region: 'us-west-2' });
    const snap = await availableSnapshot(server, key, { volume_id: source.id });
    const reply = await restore(server, key, snap.id, { name: 'restored', tags: { from: 'snap' } });
    expect(reply.status, reply.text).toBe(202);
    const { volume, snapshot, instance_id } = reply.body.data;
    expect(instance_id).toBeNull();
    expect(snapshot).toMatchObject({ id: snap.id, status: 'available' });
    expect(volume).toMatchObject({
      name: 'restored',
      size_gb: 20,
      region: 'us-west-2',
      status: 'creating',
      kind: 'data',
      tags: { from: 'snap' },
    });
    await waitForVolume(server, key, volume.id, 'available');
    const restored = await waitForEvent(key, snap.id, 'snapshot.restored');
    expect(restored.data).toMatchObject({
      snapshot_id: snap.id,
      status: 'available',
      volume_id: volume.id,
      instance_id: null,
    });
    expect((await eventsOf(server, key, volume.id)).map((e) => e.type)).toEqual(['volume.created']);

    // Larger than the snapshot is fine; smaller, or another region, is a 400.
    const larger = await restore(server, key, snap.id, { name: 'larger', size_gb: 40, region: 'us-west-2' });
    expect(larger.status).toBe(202);
    expect(larger.body.data.volume.size_gb).toBe(40);
    expectInvalid(await restore(server, key, snap.id, { name: 'small', size_gb: 19 }), 'size_gb');
    const region = await restore(server, key, snap.id, { name: 'far', region: 'eu-central-1' });
    expect(expectError(region, 400, 'invalid_request').details).toMatchObject({
      field: 'region',
      allowed_values: ['us-west-2'],
    });
  });

  async function waitForEvent(key: string, id: string, type: string) {
    let found: any;
    await waitForSnapshot(server, key, id, 'available');
    await waitFor(`${type} on ${id}`, async () => {
      found = (await eventsOf(server, key, id)).find((e) => e.type === type);
      return found;
    });
    return found;
  }

  it('restores into one thing: two targets is a 400; a new volume without a name takes the snapshot’s', async () => {
    const { key } = await account(server);
    const source = await createAvailable(server, key, { size_gb: 10 });
    const snap = await availableSnapshot(server, key, { volume_id: source.id });
    const unnamed = await restore(server, key, snap.id, { size_gb: 20 });
    expect(unnamed.status, unnamed.text).toBe(202);
    expect(unnamed.body.data.volume).toMatchObject({ name: snap.name, size_gb: 20 });
    expectError(
      await restore(server, key, snap.id, { name: 'x', target_volume_id: source.id }),
      400,
      'invalid_request',
    );
    expectInvalid(await restore(server, key, snap.id, { name: 'x', bogus: 1 }), 'bogus');
  });

  it('overwrites a detached volume (restoring → available); attached, smaller or elsewhere is refused', async () => {
    const { key } = await account(server);
    const source = await createAvailable(server, key, { size_gb: 10 });
    const snap = await availableSnapshot(server, key, { volume_id: source.id });
    const target = await createAvailable(server, key, { size_gb: 15 });
    const reply = await restore(server, key, snap.id, { target_volume_id: target.id });
    expect(reply.status, reply.text).toBe(202);
    expect(reply.body.data.volume).toMatchObject({ id: target.id, status: 'restoring', size_gb: 15 });
    await waitForVolume(server, key, target.id, 'available');
    const restored = await waitForEvent(key, snap.id, 'snapshot.restored');
    expect(restored.data.volume_id).toBe(target.id);

    const small = await createAvailable(server, key, { size_gb: 5 });
    const tooSmall = await restore(server, key, snap.id, { target_volume_id: small.id });
    expect(expectError(tooSmall, 400, 'invalid_request').details).toMatchObject({
      field: 'target_volume_id',
      snapshot_size_gb: 10,
      volume_size_gb: 5,
    });
    const far = await createAvailable(server, key, { size_gb: 10, region: 'eu-central-1' });
    expectInvalid(await restore(server, key, snap.id, { target_volume_id: far.id }), 'target_volume_id');

    const instance = await createRunning(server, key);
    expect((await volumeAct(server, key, target.id, 'attach', { instance_id: instance.id })).status).toBe(
      202,
    );
    await waitForVolume(server, key, target.id, 'in-use');
    const attached = await restore(server, key, snap.id, { target_volume_id: target.id });
    expect(expectError(attached, 409, 'conflict').details).toMatchObject({ instance_id: instance.id });
    // A root volume is not a target: its instance is.
    const root = await restore(server, key, snap.id, { target_volume_id: instance.root_volume_id });
    expect(expectError(root, 409, 'conflict').details).toMatchObject({ kind: 'root' });
  });

  it("restores a stopped instance's root disk from a root snapshot; running is 409; data snapshots are 400", async () => {
    const { key } = await account(server);
    const instance = await createRunning(server, key);
    const snap = await availableSnapshot(server, key, { instance_id: instance.id });
    const running = await restore(server, key, snap.id, { instance_id: instance.id });
    expect(expectError(running, 409, 'conflict').details).toMatchObject({
      current_status: 'running',
      allowed_statuses: ['stopped'],
    });
    expect((await act(server, key, instance.id, 'stop')).status).toBe(202);
    await waitForStatus(server, key, instance.id, 'stopped');
    const reply = await restore(server, key, snap.id, { instance_id: instance.id });
    expect(reply.status, reply.text).toBe(202);
    expect(reply.body.data).toMatchObject({
      instance_id: instance.id,
      volume: { id: instance.root_volume_id, status: 'restoring', kind: 'root' },
    });
    await waitForVolume(server, key, instance.root_volume_id, 'in-use');
    const restored = await waitForEvent(key, snap.id, 'snapshot.restored');
    expect(restored.data).toMatchObject({ volume_id: instance.root_volume_id, instance_id: instance.id });
    // The instance boots from it.
    expect((await act(server, key, instance.id, 'start')).status).toBe(202);
    await waitForStatus(server, key, instance.id, 'running');

    // Onto another stopped instance of the same region; a data volume's snapshot cannot boot one.
    const other = await createStopped(server, key);
    expect((await restore(server, key, snap.id, { instance_id: other.id })).status).toBe(202);
    await waitForVolume(server, key, other.root_volume_id, 'in-use');
    const data = await createAvailable(server, key);
    const dataSnap = await availableSnapshot(server, key, { volume_id: data.id });
    expectInvalid(await restore(server, key, dataSnap.id, { instance_id: other.id }), 'instance_id');
    // But a root snapshot makes a data volume.
    expect((await restore(server, key, snap.id, { name: 'root-copy' })).status).toBe(202);
  });

  it('boots a new instance from a root snapshot: its root disk restored first, then it starts', async () => {
    const { key } = await account(server);
    const source = await createRunning(server, key, { instance_type: 'compute-2x' });
    const snap = await availableSnapshot(server, key, { instance_id: source.id });
    expect(snap.size_gb).toBe(50);
    const reply = await restore(server, key, snap.id, {
      instance: { name: 'clone', instance_type: 'compute-4x', tags: { from: 'snapshot' } },
    });
    expect(reply.status, reply.text).toBe(202);
    const { instance_id, volume } = reply.body.data;
    expect(volume).toMatchObject({ kind: 'root', instance_id, status: 'restoring', size_gb: 100 });
    const clone = await waitForStatus(server, key, instance_id, 'running');
    expect(clone).toMatchObject({
      name: 'clone',
      image: source.image,
      region: source.region,
      tags: { from: 'snapshot' },
    });
    expect((await server.request('GET', `/v1/volumes/${volume.id}`, { key })).body.data.status).toBe(
      'in-use',
    );
    const restored = await waitForEvent(key, snap.id, 'snapshot.restored');
    expect(restored.data).toMatchObject({ volume_id: volume.id, instance_id });
    expect((await eventsOf(server, key, instance_id)).map((e) => e.type)).toEqual([
      'instance.created',
      'instance.started',
    ]);

    // The type's disk must hold the snapshot; the region is the snapshot's; a data snapshot does not boot.
    const small = await restore(server, key, snap.id, {
      instance: { name: 'small', instance_type: 'compute-1x' },
    });
    expect(expectError(small, 400, 'invalid_request').details).toMatchObject({
      field: 'instance.instance_type',
      snapshot_size_gb: 50,
    });
    expectInvalid(
      await restore(server, key, snap.id, {
        instance: { name: 'far', instance_type: 'compute-4x', region: 'eu-central-1' },
      }),
      'instance.region',
    );
    const data = await createAvailable(server, key);
    const dataSnap = await availableSnapshot(server, key, { volume_id: data.id });
    expectInvalid(
      await restore(server, key, dataSnap.id, { instance: { name: 'x', instance_type: 'compute-4x' } }),
      'instance',
    );
    expectInvalid(
      await restore(server, key, snap.id, { instance: { instance_type: 'compute-4x' } }),
      'instance.name',
    );
  });

  it('refuses a snapshot that is not available (creating, failed)', async () => {
    const { key } = await account(server);
    const source = await createAvailable(server, key, { tags: { 'nimbus.sim/fault': 'snapshot-fail' } });
    const failing = await createSnapshot(server, key, { volume_id: source.id });
    await waitForSnapshot(server, key, failing.id, 'failed');
    const refused = await restore(server, key, failing.id, { name: 'x' });
    expect(expectError(refused, 409, 'conflict').details).toMatchObject({
      current_status: 'failed',
      allowed_statuses: ['available'],
    });
  });

  it('counts a new volume against the volume quotas', async () => {
    const { id, key } = await account(server);
    const source = await createAvailable(server, key, { size_gb: 10 });
    const snap = await availableSnapshot(server, key, { volume_id: source.id });
    await server.admin('set-quota', '--account', id, '--name', 'volumes', '--limit', '1');
    const refused = await restore(server, key, snap.id, { name: 'x' });
    expect(expectError(refused, 403, 'quota_exceeded').details).toMatchObject({ quota: 'volumes', limit: 1 });
  });

  it("another account's target volume or instance is 404 naming the field", async () => {
    const mine = await account(server);
    const theirs = await account(server);
    const source = await createAvailable(server, mine.key);
    const snap = await availableSnapshot(server, mine.key, { volume_id: source.id });
    const rootSnap = await availableSnapshot(server, mine.key, {
      instance_id: (await createRunning(server, mine.key)).id,
    });
    const volume = await createAvailable(server, theirs.key);
    const instance = await createStopped(server, theirs.key);
    const byVolume = await restore(server, mine.key, snap.id, { target_volume_id: volume.id });
    expect(expectError(byVolume, 404, 'not_found').details).toEqual({
      resource: 'volume',
      id: volume.id,
      field: 'target_volume_id',
    });
    const byInstance = await restore(server, mine.key, rootSnap.id, { instance_id: instance.id });
    expect(expectError(byInstance, 404, 'not_found').details).toEqual({
      resource: 'instance',
      id: instance.id,
      field: 'instance_id',
    });
    // Their snapshot is theirs.
    const theirSnap = await availableSnapshot(server, theirs.key, { volume_id: volume.id });
    const notMine = await restore(server, mine.key, theirSnap.id, { name: 'x' });
    expect(expectError(notMine, 404, 'not_found').details).toEqual({
      resource: 'snapshot',
      id: theirSnap.id,
    });
  });
});

describe.each(STORES)('Snapshot restore in simulated time (%s)', (store) => {
  const clock = new ManualClock();
  const server = serverForSuite({ store, clock, steppedJobs: true, env: { NIMBUS_SIM_SPEEDUP: '1' } });
  let key = '';
  beforeAll(async () => {
    key = (await account(server)).key;
  });
  const runDue = () => server.running.backends.jobs.runDue();
  /** Moves the clock by `ms` in 250 ms steps, running due jobs at each. */
  async function advance(ms: number): Promise<void> {
    await runDue();
    for (let left = ms; left > 0; left -= 250) {
      clock.advance(Math.min(250, left));
      await runDue();
    }
  }
  const get = async (path: string) => (await server.request('GET', path, { key })).body.data;

  it('copies in 3 s + 50 ms/GB and restores in 4 s + 50 ms/GB; deleting the snapshot meanwhile is 409', async () => {
    const source = await createVolume(server, key, { size_gb: 20 });
    await advance(4_000);
    expect((await get(`/v1/volumes/${source.id}`)).status).toBe('available');
    const snap = await createSnapshot(server, key, { volume_id: source.id });
    const copyMs = SIM_SNAPSHOT_TIMINGS_MS.create + 20 * SIM_SNAPSHOT_TIMINGS_MS.createPerGb;
    await advance(copyMs - 250);
    expect((await get(`/v1/snapshots/${snap.id}`)).status).toBe('creating');
    // Not restorable, nor deletable, while it is being made.
    expect(
      expectError(await restore(server, key, snap.id, { name: 'x' }), 409, 'conflict').details,
    ).toMatchObject({
      current_status: 'creating',
    });
    expectError(await server.request('DELETE', `/v1/snapshots/${snap.id}`, { key }), 409, 'conflict');
    await advance(250);
    expect((await get(`/v1/snapshots/${snap.id}`)).status).toBe('available');

    const target = await createVolume(server, key, { size_gb: 30 });
    await advance(4_000);
    expect((await restore(server, key, snap.id, { target_volume_id: target.id })).status).toBe(202);
    const restoreMs = SIM_SNAPSHOT_TIMINGS_MS.restore + 20 * SIM_SNAPSHOT_TIMINGS_MS.restorePerGb;
    await advance(restoreMs - 250);
    expect((await get(`/v1/volumes/${target.id}`)).status).toBe('restoring');
    const refused = await server.request('DELETE', `/v1/snapshots/${snap.id}`, { key });
    expect(expectError(refused, 409, 'conflict').details).toMatchObject({ restores_in_progress: 1 });
    // The volume is busy too.
    expectError(await volumeAct(server, key, target.id, 'resize', { size_gb: 40 }), 409, 'conflict');
    await advance(250);
    expect((await get(`/v1/volumes/${target.id}`)).status).toBe('available');
    expect((await server.request('DELETE', `/v1/snapshots/${snap.id}`, { key })).status).toBe(202);
    // Deleting (2 s): no rename, no second delete, no restore; then gone.
    const renamed = await server.request('PATCH', `/v1/snapshots/${snap.id}`, {
      key,
      body: { name: 'late' },
    });
    expect(expectError(renamed, 409, 'conflict').details).toMatchObject({ current_status: 'deleting' });
    expectError(await server.request('DELETE', `/v1/snapshots/${snap.id}`, { key }), 409, 'conflict');
    expectError(await restore(server, key, snap.id, { name: 'late' }), 409, 'conflict');
    await advance(SIM_SNAPSHOT_TIMINGS_MS.delete - 250);
    expect((await get(`/v1/snapshots/${snap.id}`)).status).toBe('deleting');
    await advance(250);
    expect((await server.request('GET', `/v1/snapshots/${snap.id}`, { key })).status).toBe(404);
  });

  it('a new instance from a snapshot stays powered off until its root disk is restored, then boots in 8 s', async () => {
    const source = (
      await server.request('POST', '/v1/instances', {
        key,
        body: { name: 's', instance_type: 'compute-1x', region: 'us-east-1', image: 'debian-12' },
      })
    ).body.data;
    await advance(8_000);
    const snap = await createSnapshot(server, key, { instance_id: source.id });
    await advance(SIM_SNAPSHOT_TIMINGS_MS.create + 25 * SIM_SNAPSHOT_TIMINGS_MS.createPerGb);
    const reply = await restore(server, key, snap.id, {
      instance: { name: 'clone', instance_type: 'compute-1x' },
    });
    expect(reply.status, reply.text).toBe(202);
    const id = reply.body.data.instance_id;
    const volumeId = reply.body.data.volume.id;
    const restoreMs = SIM_SNAPSHOT_TIMINGS_MS.restore + 25 * SIM_SNAPSHOT_TIMINGS_MS.restorePerGb;
    await advance(restoreMs - 250);
    expect(await get(`/v1/instances/${id}`)).toMatchObject({ status: 'starting', image: 'debian-12' });
    expect((await get(`/v1/volumes/${volumeId}`)).status).toBe('restoring');
    await advance(250);
    expect((await get(`/v1/volumes/${volumeId}`)).status).toBe('in-use');
    await advance(8_000 - 250);
    expect((await get(`/v1/instances/${id}`)).status).toBe('starting');
    await advance(250);
    expect((await get(`/v1/instances/${id}`)).status).toBe('running');
  });

  it('keeps a stopped instance from starting while its root disk is restored', async () => {
    const instance = (
      await server.request('POST', '/v1/instances', {
        key,
        body: { name: 'r', instance_type: 'compute-1x', region: 'us-east-1', image: 'ubuntu-24.04' },
      })
    ).body.data;
    await advance(8_000);
    const snap = await createSnapshot(server, key, { instance_id: instance.id });
    await advance(SIM_SNAPSHOT_TIMINGS_MS.create + 25 * SIM_SNAPSHOT_TIMINGS_MS.createPerGb);
    expect((await act(server, key, instance.id, 'stop')).status).toBe(202);
    await advance(5_000);
    expect((await get(`/v1/instances/${instance.id}`)).status).toBe('stopped');
    expect((await restore(server, key, snap.id, { instance_id: instance.id })).status).toBe(202);
    const starting = await act(server, key, instance.id, 'start');
    expect(expectError(starting, 409, 'conflict').details).toMatchObject({ root_volume_status: 'restoring' });
    expectError(
      await act(server, key, instance.id, 'resize', { instance_type: 'compute-2x' }),
      409,
      'conflict',
    );
    await advance(SIM_SNAPSHOT_TIMINGS_MS.restore + 25 * SIM_SNAPSHOT_TIMINGS_MS.restorePerGb);
    expect((await get(`/v1/volumes/${instance.root_volume_id}`)).status).toBe('in-use');
    expect((await act(server, key, instance.id, 'start')).status).toBe(202);
  });
});
