/**
 * Attaching volumes over HTTPS, on both stores: attach and detach with their events and devices, create
 * with instance_id, online resize, the 400s and 409s of attach (region, a deleting instance, a volume
 * held elsewhere, 16 devices), deleting an attached volume, two instances racing for one volume, an
 * instance's deletion detaching its data volumes, and what the instance's answer and its metadata
 * service show.
 */
import { describe, expect, it } from 'vitest';
import { STORES } from './helpers/backends.js';
import { account, expectError, expectInvalid } from './helpers/common.js';
import { createInstance, createRunning, getInstance, waitForStatus } from './helpers/instances.js';
import { sendRequest, serverForSuite } from './helpers/server.js';
import {
  attached,
  createAvailable,
  createVolume,
  volumeAct,
  volumeEventTypes,
  waitForVolume,
} from './helpers/volumes.js';

describe.each(STORES)('Volumes: attach and detach (%s)', (store) => {
  const server = serverForSuite({ store });

  it('attaches (202 attaching, then in-use on /dev/vdb) and detaches (202 detaching, then available)', async () => {
    const { key } = await account(server);
    const instance = await createRunning(server, key);
    const volume = await createAvailable(server, key);
    const inUse = await attached(server, key, volume.id, instance.id);
    expect(inUse).toMatchObject({ instance_id: instance.id, device_name: '/dev/vdb', status: 'in-use' });
    expect(new Date(inUse.attached_at).toISOString()).toBe(inUse.attached_at);

    const detaching = await volumeAct(server, key, volume.id, 'detach');
    expect(detaching.status, detaching.text).toBe(202);
    expect(detaching.body.data).toMatchObject({ status: 'detaching', device_name: '/dev/vdb' });
    const available = await waitForVolume(server, key, volume.id, 'available');
    expect(available).toMatchObject({ instance_id: null, device_name: null, attached_at: null });

    expect(await volumeEventTypes(server, key, volume.id)).toEqual([
      'volume.created',
      'volume.attached',
      'volume.detached',
    ]);
    const events = await server.request('GET', `/v1/events?resource_id=${volume.id}`, { key });
    const [detached, attachedEvent] = events.body.data;
    expect(attachedEvent.data).toMatchObject({
      volume_id: volume.id,
      status: 'in-use',
      instance_id: instance.id,
      device_name: '/dev/vdb',
    });
    // The detached event names the instance it left.
    expect(detached.data).toMatchObject({
      status: 'available',
      instance_id: instance.id,
      device_name: '/dev/vdb',
    });
  });

  it('creates a volume attached from the start with instance_id, formatted', async () => {
    const { key } = await account(server);
    const instance = await createInstance(server, key);
    const created = await createVolume(server, key, { instance_id: instance.id, filesystem: 'ext4' });
    expect(created).toMatchObject({ status: 'creating', instance_id: instance.id, device_name: '/dev/vdb' });
    const inUse = await waitForVolume(server, key, created.id, 'in-use');
    expect(inUse).toMatchObject({ instance_id: instance.id, device_name: '/dev/vdb', filesystem: 'ext4' });
    expect(await volumeEventTypes(server, key, created.id)).toEqual(['volume.created', 'volume.attached']);
  });

  it('devices stay while attached, and a freed one is handed out again', async () => {
    const { key } = await account(server);
    const instance = await createRunning(server, key);
    const [a, b, c] = [
      await createAvailable(server, key),
      await createAvailable(server, key),
      await createAvailable(server, key),
    ];
    expect((await attached(server, key, a!.id, instance.id)).device_name).toBe('/dev/vdb');
    expect((await attached(server, key, b!.id, instance.id)).device_name).toBe('/dev/vdc');
    expect((await volumeAct(server, key, a!.id, 'detach')).status).toBe(202);
    await waitForVolume(server, key, a!.id, 'available');
    expect((await server.request('GET', `/v1/volumes/${b!.id}`, { key })).body.data.device_name).toBe(
      '/dev/vdc',
    );
    expect((await attached(server, key, c!.id, instance.id)).device_name).toBe('/dev/vdb');

    const one = await getInstance(server, key, instance.id);
    expect(one.volumes.map((v: any) => [v.device_name, v.id, v.kind])).toEqual([
      ['/dev/vda', instance.root_volume_id, 'root'],
      ['/dev/vdb', c!.id, 'data'],
      ['/dev/vdc', b!.id, 'data'],
    ]);
    const blockDevices = await sendRequest(
      `http://127.0.0.1:${server.running.metadataPort}`,
      null,
      'GET',
      '/latest/meta-data/block-devices',
      { headers: { 'x-nimbus-instance-id': instance.id }, notApi: true },
    );
    expect(blockDevices.text).toBe(
      `/dev/vda ${instance.root_volume_id}\n/dev/vdb ${c!.id}\n/dev/vdc ${b!.id}\n`,
    );
  });

  it('grows an attached volume online: resizing, then in-use again on the same device', async () => {
    const { key } = await account(server);
    const instance = await createRunning(server, key);
    const volume = await createAvailable(server, key, { size_gb: 10 });
    await attached(server, key, volume.id, instance.id);
    const reply = await volumeAct(server, key, volume.id, 'resize', { size_gb: 15 });
    expect(reply.status, reply.text).toBe(202);
    expect(reply.body.data).toMatchObject({ status: 'resizing', size_gb: 15, instance_id: instance.id });
    const grown = await waitForVolume(server, key, volume.id, 'in-use');
    expect(grown).toMatchObject({ size_gb: 15, device_name: '/dev/vdb', instance_id: instance.id });
    expect((await getInstance(server, key, instance.id)).status).toBe('running');
    expect(await volumeEventTypes(server, key, volume.id)).toEqual([
      'volume.created',
      'volume.attached',
      'volume.resized',
    ]);
  });

  it('attach to an instance in another region is 400 naming both regions', async () => {
    const { key } = await account(server);
    const instance = await createInstance(server, key, { region: 'us-west-2' });
    const volume = await createAvailable(server, key);
    const error = expectError(
      await volumeAct(server, key, volume.id, 'attach', { instance_id: instance.id }),
      400,
      'invalid_request',
    );
    expect(error.details).toMatchObject({
      field: 'instance_id',
      volume_region: 'us-east-1',
      instance_region: 'us-west-2',
    });
    expect(error.message).toContain('us-east-1');
    expect(error.message).toContain('us-west-2');
    expectInvalid(
      await server.request('POST', '/v1/volumes', {
        key,
        body: { name: 'x', size_gb: 1, region: 'eu-central-1', instance_id: instance.id },
      }),
      'instance_id',
    );
    expectInvalid(await volumeAct(server, key, volume.id, 'attach', {}), 'instance_id');
  });

  it('attach to an instance being deleted is 409', async () => {
    const { key } = await account(server);
    const instance = await createInstance(server, key, { tags: { 'nimbus.sim/fault': 'stuck-starting' } });
    const volume = await createAvailable(server, key);
    expect((await server.request('DELETE', `/v1/instances/${instance.id}`, { key })).status).toBe(202);
    const reply = await volumeAct(server, key, volume.id, 'attach', { instance_id: instance.id });
    if (reply.status === 404) {
      // Already gone (a delete takes a few ms at this speed-up): refused all the same.
      expect(expectError(reply, 404, 'not_found').details).toMatchObject({
        resource: 'instance',
        field: 'instance_id',
      });
      return;
    }
    expect(expectError(reply, 409, 'conflict').details).toMatchObject({ instance_status: 'deleting' });
  });

  it('a volume attached or attaching elsewhere is 409 naming the instance that holds it; deleting it is 409', async () => {
    const { key } = await account(server);
    const first = await createInstance(server, key);
    const second = await createInstance(server, key);
    const volume = await createAvailable(server, key);
    expect((await volumeAct(server, key, volume.id, 'attach', { instance_id: first.id })).status).toBe(202);
    for (;;) {
      const reply = await volumeAct(server, key, volume.id, 'attach', { instance_id: second.id });
      const error = expectError(reply, 409, 'conflict');
      expect(error.details).toMatchObject({ instance_id: first.id });
      expect(error.message).toContain(first.id);
      if (error.details?.current_status === 'in-use') break;
    }
    const deleted = expectError(
      await server.request('DELETE', `/v1/volumes/${volume.id}`, { key }),
      409,
      'conflict',
    );
    expect(deleted.details).toMatchObject({ instance_id: first.id, current_status: 'in-use' });
    expect(deleted.message).toMatch(/detach/);
  });

  it('an instance takes at most 16 data volumes (409 for the 17th)', async () => {
    const { id: accountId, key } = await account(server);
    await server.admin('set-quota', '--account', accountId, '--name', 'volumes', '--limit', '100');
    const instance = await createInstance(server, key);
    const devices: string[] = [];
    for (let i = 0; i < 16; i++) {
      devices.push((await createVolume(server, key, { size_gb: 1, instance_id: instance.id })).device_name);
    }
    expect(devices).toEqual(Array.from({ length: 16 }, (_, i) => `/dev/vd${String.fromCharCode(98 + i)}`));
    const extra = await createAvailable(server, key, { size_gb: 1 });
    const error = expectError(
      await volumeAct(server, key, extra.id, 'attach', { instance_id: instance.id }),
      409,
      'conflict',
    );
    expect(error.details).toMatchObject({ instance_id: instance.id, limit: 16 });
    const onCreate = await server.request('POST', '/v1/volumes', {
      key,
      body: { name: 'x', size_gb: 1, region: 'us-east-1', instance_id: instance.id },
    });
    expectError(onCreate, 409, 'conflict');
  });

  it('two instances attaching one volume at once: exactly one wins, the other is 409 naming the winner', async () => {
    const { key } = await account(server);
    const instances = [await createInstance(server, key), await createInstance(server, key)];
    for (let round = 0; round < 5; round++) {
      const volume = await createAvailable(server, key);
      const replies = await Promise.all(
        instances.map((i) => volumeAct(server, key, volume.id, 'attach', { instance_id: i.id })),
      );
      const statuses = replies.map((r) => r.status).sort();
      expect(statuses, replies.map((r) => r.text).join('\n')).toEqual([202, 409]);
      const winner = replies.find((r) => r.status === 202)!.body.data.instance_id;
      const loser = replies.find((r) => r.status === 409)!;
      expect(loser.body.error.details.instance_id).toBe(winner);
      const settled = await waitForVolume(server, key, volume.id, 'in-use');
      expect(settled.instance_id).toBe(winner);
    }
  });

  it('deleting an instance detaches its data volumes (they survive, available) and deletes its root volume', async () => {
    const { key } = await account(server);
    const instance = await createRunning(server, key);
    const a = await createAvailable(server, key);
    await attached(server, key, a.id, instance.id);
    const b = await createVolume(server, key, { instance_id: instance.id });
    await waitForVolume(server, key, b.id, 'in-use');
    const growing = await createAvailable(server, key, { size_gb: 5 });
    await attached(server, key, growing.id, instance.id);
    expect((await volumeAct(server, key, growing.id, 'resize', { size_gb: 6 })).status).toBe(202);

    expect((await server.request('DELETE', `/v1/instances/${instance.id}`, { key })).status).toBe(202);
    await waitForStatus(server, key, instance.id, 'gone');
    for (const volume of [a, b, growing]) {
      const available = await waitForVolume(server, key, volume.id, 'available');
      expect(available).toMatchObject({ instance_id: null, device_name: null, kind: 'data' });
      expect(await volumeEventTypes(server, key, volume.id)).toContain('volume.detached');
    }
    expect((await server.request('GET', `/v1/volumes/${growing.id}`, { key })).body.data.size_gb).toBe(6);
    expectError(
      await server.request('GET', `/v1/volumes/${instance.root_volume_id}`, { key }),
      404,
      'not_found',
    );
    // They can be deleted now.
    expect((await server.request('DELETE', `/v1/volumes/${a.id}`, { key })).status).toBe(202);
  });

  it('a volume being created for an instance that is deleted meanwhile ends up available', async () => {
    const { key } = await account(server);
    const instance = await createInstance(server, key);
    const volume = await createVolume(server, key, { instance_id: instance.id });
    expect((await server.request('DELETE', `/v1/instances/${instance.id}`, { key })).status).toBe(202);
    await waitForStatus(server, key, instance.id, 'gone');
    const settled = await waitForVolume(server, key, volume.id, 'available');
    expect(settled).toMatchObject({ instance_id: null, device_name: null });
  });
});
