/**
 * Deletion protection (issue 35 item 5) over HTTPS on both stores: `protection.delete` on instances,
 * volumes and public IPs, set at create and toggled by PATCH; a DELETE while it is on is a 409 `conflict`
 * naming the flag and changes nothing; the delete works once it is off; another account's resource stays
 * 404; and an instance's delete is refused while its root volume or the public IP that would go with it
 * (`auto_delete`) is protected (docs/api.md, Deletion protection).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { STORES } from './helpers/backends.js';
import { account, expectError } from './helpers/common.js';
import { createInstance, createRunning, getInstance, waitForStatus } from './helpers/instances.js';
import { serverForSuite } from './helpers/server.js';
import { createAvailable, waitForVolume } from './helpers/volumes.js';

type Json = Record<string, any>;

const PROTECTED = { protection: { delete: true } };
const UNPROTECTED = { protection: { delete: false } };

describe.each(STORES)('Deletion protection (%s)', (store) => {
  const server = serverForSuite({ store });
  let key = '';
  let otherKey = '';

  beforeAll(async () => {
    key = (await account(server)).key;
    otherKey = (await account(server)).key;
  });

  const patch = async (path: string, body: Json, as = key) => {
    const reply = await server.request('PATCH', path, { key: as, body });
    expect(reply.status, reply.text).toBe(200);
    return reply.body.data as Json;
  };
  const get = async (path: string) => {
    const reply = await server.request('GET', path, { key });
    expect(reply.status, reply.text).toBe(200);
    return reply.body.data as Json;
  };
  /** The refused delete: 409 `conflict` naming the flag and the resource that holds it. */
  const expectProtected = async (path: string, guarded: { resource: string; id: string }) => {
    const error = expectError(await server.request('DELETE', path, { key }), 409, 'conflict');
    expect(error.message).toContain('protection.delete is on');
    expect(error.message).toContain('PATCH');
    expect(error.details).toMatchObject({
      reason: 'delete_protected',
      field: 'protection.delete',
      ...guarded,
    });
    return error;
  };

  it('a new resource is unprotected unless the create says so', async () => {
    const plain = await createInstance(server, key);
    expect(plain.protection).toEqual({ delete: false });
    const volume = await createAvailable(server, key);
    expect(volume.protection).toEqual({ delete: false });
    const reply = await server.request('POST', '/v1/public-ips', { key, body: { region: 'us-east-1' } });
    expect(reply.status, reply.text).toBe(201);
    expect(reply.body.data.protection).toEqual({ delete: false });
  });

  it('a protection body with an unknown flag is a 400', async () => {
    const reply = await server.request('POST', '/v1/public-ips', {
      key,
      body: { region: 'us-east-1', protection: { delete: true, rebuild: true } },
    });
    expectError(reply, 400, 'invalid_request');
  });

  it('instance: protected at create, 409 on delete until a PATCH turns it off', async () => {
    const instance = await createRunning(server, key, PROTECTED);
    expect(instance.protection).toEqual({ delete: true });
    await expectProtected(`/v1/instances/${instance.id}`, { resource: 'instance', id: instance.id });
    // Nothing changed: still running, still protected.
    const after = await getInstance(server, key, instance.id);
    expect(after).toMatchObject({ status: 'running', protection: { delete: true } });
    // Another account cannot see it, let alone lift the flag.
    expect((await server.request('DELETE', `/v1/instances/${instance.id}`, { key: otherKey })).status).toBe(
      404,
    );
    expect(
      (await server.request('PATCH', `/v1/instances/${instance.id}`, { key: otherKey, body: UNPROTECTED }))
        .status,
    ).toBe(404);

    expect((await patch(`/v1/instances/${instance.id}`, UNPROTECTED)).protection).toEqual({ delete: false });
    const deleted = await server.request('DELETE', `/v1/instances/${instance.id}`, { key });
    expect(deleted.status, deleted.text).toBe(202);
    await waitForStatus(server, key, instance.id, 'gone');
  });

  it('volume: protected by PATCH, 409 on delete, deleted once off', async () => {
    const volume = await createAvailable(server, key);
    expect((await patch(`/v1/volumes/${volume.id}`, PROTECTED)).protection).toEqual({ delete: true });
    await expectProtected(`/v1/volumes/${volume.id}`, { resource: 'volume', id: volume.id });
    expect(await get(`/v1/volumes/${volume.id}`)).toMatchObject({
      status: 'available',
      protection: { delete: true },
    });
    expect((await server.request('DELETE', `/v1/volumes/${volume.id}`, { key: otherKey })).status).toBe(404);

    await patch(`/v1/volumes/${volume.id}`, UNPROTECTED);
    expect((await server.request('DELETE', `/v1/volumes/${volume.id}`, { key })).status).toBe(202);
    await waitForVolume(server, key, volume.id, 'gone');
  });

  it('volume: protected at create', async () => {
    const volume = await createAvailable(server, key, PROTECTED);
    expect(volume.protection).toEqual({ delete: true });
    await expectProtected(`/v1/volumes/${volume.id}`, { resource: 'volume', id: volume.id });
  });

  it('public IP: protected at create, 409 on release, released once off', async () => {
    const made = await server.request('POST', '/v1/public-ips', {
      key,
      body: { region: 'us-east-1', ...PROTECTED },
    });
    expect(made.status, made.text).toBe(201);
    const ip = made.body.data as Json;
    expect(ip.protection).toEqual({ delete: true });
    await expectProtected(`/v1/public-ips/${ip.id}`, { resource: 'public_ip', id: ip.id });
    expect((await get(`/v1/public-ips/${ip.id}`)).protection).toEqual({ delete: true });
    expect((await server.request('DELETE', `/v1/public-ips/${ip.id}`, { key: otherKey })).status).toBe(404);

    await patch(`/v1/public-ips/${ip.id}`, UNPROTECTED);
    expect((await server.request('DELETE', `/v1/public-ips/${ip.id}`, { key })).status).toBe(200);
    expect((await server.request('GET', `/v1/public-ips/${ip.id}`, { key })).status).toBe(404);
  });

  it("an instance's delete is refused while the public IP it would release is protected", async () => {
    const instance = await createRunning(server, key);
    const list = await server.request('GET', `/v1/public-ips?instance_id=${instance.id}`, { key });
    expect(list.status, list.text).toBe(200);
    const address = (list.body.data as Json[]).find((ip) => ip.instance_id === instance.id);
    expect(address?.auto_delete).toBe(true);
    await patch(`/v1/public-ips/${address?.id}`, PROTECTED);

    const error = await expectProtected(`/v1/instances/${instance.id}`, {
      resource: 'public_ip',
      id: address?.id,
    });
    expect(error.message).toContain(`Instance ${instance.id} cannot be deleted`);
    expect((await getInstance(server, key, instance.id)).status).toBe('running');

    // A kept address (auto_delete off) does not go with the instance, so it does not hold the delete.
    await patch(`/v1/public-ips/${address?.id}`, { auto_delete: false });
    expect((await server.request('DELETE', `/v1/instances/${instance.id}`, { key })).status).toBe(202);
    await waitForStatus(server, key, instance.id, 'gone');
    expect(await get(`/v1/public-ips/${address?.id}`)).toMatchObject({
      instance_id: null,
      protection: { delete: true },
    });
  });

  it("an instance's delete is refused while its root volume is protected", async () => {
    const instance = await createRunning(server, key);
    await patch(`/v1/volumes/${instance.root_volume_id}`, PROTECTED);
    await expectProtected(`/v1/instances/${instance.id}`, {
      resource: 'volume',
      id: instance.root_volume_id,
    });
    await patch(`/v1/volumes/${instance.root_volume_id}`, UNPROTECTED);
    expect((await server.request('DELETE', `/v1/instances/${instance.id}`, { key })).status).toBe(202);
    await waitForStatus(server, key, instance.id, 'gone');
  });
});
