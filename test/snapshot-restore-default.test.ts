/**
 * A restore without a body, as a client written from the specification alone sends it (issue 29 item 12),
 * over HTTPS on both stores: what docs/design.md, "Snapshot states" says restore does. A data volume's
 * snapshot becomes a new volume named after it, of its size and region; a root snapshot is written over its
 * source instance's disk when that instance is stopped, and is the 400 listing the choices when it is running
 * or gone.
 */
import { describe, expect, it } from 'vitest';
import { STORES } from './helpers/backends.js';
import { account, expectError, waitFor } from './helpers/common.js';
import { act, createRunning, eventsOf, waitForStatus } from './helpers/instances.js';
import { serverForSuite } from './helpers/server.js';
import { availableSnapshot, restore } from './helpers/snapshots.js';
import { createAvailable, waitForVolume } from './helpers/volumes.js';

const CHOICES = ['name', 'target_volume_id', 'instance_id', 'instance'];

describe.each(STORES)('Snapshot restore without a body (%s)', (store) => {
  const server = serverForSuite({ store });

  async function restoredEvent(key: string, snapshotId: string, volumeId: string) {
    return waitFor(`snapshot.restored into ${volumeId}`, async () =>
      (await eventsOf(server, key, snapshotId)).find(
        (e) => e.type === 'snapshot.restored' && e.data.volume_id === volumeId,
      ),
    );
  }

  it("a data volume's snapshot becomes a new volume of its name, size and region", async () => {
    const { key } = await account(server);
    const source = await createAvailable(server, key, { size_gb: 20, region: 'eu-central-1' });
    const snap = await availableSnapshot(server, key, { volume_id: source.id, tags: { kept: 'no' } });
    // No body at all: no Content-Type, no Content-Length.
    const reply = await restore(server, key, snap.id, undefined);
    expect(reply.status, reply.text).toBe(202);
    const { volume, instance_id } = reply.body.data;
    expect(instance_id).toBeNull();
    expect(volume).toMatchObject({
      name: snap.name,
      size_gb: 20,
      region: 'eu-central-1',
      kind: 'data',
      status: 'creating',
      instance_id: null,
      tags: {},
    });
    expect(volume.id).not.toBe(source.id);
    await waitForVolume(server, key, volume.id, 'available');
    await restoredEvent(key, snap.id, volume.id);

    // A body naming nothing is the same request: another new volume, of the same name.
    const empty = await restore(server, key, snap.id, {});
    expect(empty.status, empty.text).toBe(202);
    expect(empty.body.data.volume).toMatchObject({ name: snap.name, size_gb: 20, region: 'eu-central-1' });
    expect(empty.body.data.volume.id).not.toBe(volume.id);
  });

  it('a root snapshot restores its source instance once it is stopped; running is the 400 of the choices', async () => {
    const { key } = await account(server);
    const instance = await createRunning(server, key);
    const snap = await availableSnapshot(server, key, { instance_id: instance.id });

    const running = await restore(server, key, snap.id, undefined);
    const error = expectError(running, 400, 'invalid_request');
    expect(error.details).toEqual({
      field: 'instance_id',
      allowed_values: CHOICES,
      source_instance_id: instance.id,
      source_instance_status: 'running',
    });
    expect(error.message).toContain('stop it');
    // Nothing was written.
    expect(
      (await server.request('GET', `/v1/volumes/${instance.root_volume_id}`, { key })).body.data.status,
    ).toBe('in-use');

    expect((await act(server, key, instance.id, 'stop')).status).toBe(202);
    await waitForStatus(server, key, instance.id, 'stopped');
    const reply = await restore(server, key, snap.id, undefined);
    expect(reply.status, reply.text).toBe(202);
    expect(reply.body.data).toMatchObject({
      instance_id: instance.id,
      volume: { id: instance.root_volume_id, kind: 'root', status: 'restoring' },
    });
    await waitForVolume(server, key, instance.root_volume_id, 'in-use');
    await restoredEvent(key, snap.id, instance.root_volume_id);
    expect((await act(server, key, instance.id, 'start')).status).toBe(202);
    await waitForStatus(server, key, instance.id, 'running');
  });

  it('a root snapshot whose source instance is gone is the 400 listing the choices', async () => {
    const { key } = await account(server);
    const instance = await createRunning(server, key);
    const snap = await availableSnapshot(server, key, { instance_id: instance.id });
    expect((await server.request('DELETE', `/v1/instances/${instance.id}`, { key })).status).toBe(202);
    await waitForStatus(server, key, instance.id, 'gone');

    const reply = await restore(server, key, snap.id, undefined);
    const error = expectError(reply, 400, 'invalid_request');
    expect(error.details).toEqual({
      field: 'instance_id',
      allowed_values: CHOICES,
      source_instance_id: instance.id,
      source_instance_status: null,
    });
    expect(error.message).toContain('gone');
    // A choice it lists works: a new volume, named after the snapshot.
    const volume = await restore(server, key, snap.id, { size_gb: snap.size_gb });
    expect(volume.status, volume.text).toBe(202);
    expect(volume.body.data.volume).toMatchObject({ name: snap.name, kind: 'data' });
  });

  it("another account's snapshot is 404 without a body too", async () => {
    const mine = await account(server);
    const theirs = await account(server);
    const volume = await createAvailable(server, theirs.key);
    const snap = await availableSnapshot(server, theirs.key, { volume_id: volume.id });
    const reply = await restore(server, mine.key, snap.id, undefined);
    expect(expectError(reply, 404, 'not_found').details).toEqual({ resource: 'snapshot', id: snap.id });
  });
});
