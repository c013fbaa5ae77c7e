/**
 * The instance metadata service on NIMBUS_METADATA_PORT: plain HTTP, text answers, the instance named in
 * X-Nimbus-Instance-Id (the simulator's stand-in for the caller's address).
 */
import { describe, expect, it } from 'vitest';
import { STORES } from './helpers/backends.js';
import { waitFor } from './helpers/common.js';
import { createInstance } from './helpers/instances.js';
import { sendRequest, serverForSuite } from './helpers/server.js';

describe.each(STORES)('metadata service (%s)', (store) => {
  const server = serverForSuite({ store });
  const ask = (path: string, instanceId?: string) =>
    sendRequest(`http://127.0.0.1:${server.running.metadataPort}`, null, 'GET', path, {
      headers: instanceId ? { 'x-nimbus-instance-id': instanceId } : {},
      notApi: true,
    });

  it('tells an instance its id, type, addresses, hostname and user data', async () => {
    const instance = await createInstance(server, server.rootKey, {
      instance_type: 'memory-2x',
      user_data: '#cloud-config\npackages: [nginx]\n',
    });
    const expected: Record<string, string> = {
      'instance-id': instance.id,
      'instance-type': 'memory-2x',
      'public-ipv4': instance.public_ip,
      'local-ipv4': instance.private_ip,
      hostname: instance.hostname,
      // The root volume; data volumes are added as they attach (test/volume-attach.test.ts).
      'block-devices': `/dev/vda ${instance.root_volume_id}\n`,
    };
    for (const [item, value] of Object.entries(expected)) {
      const reply = await ask(`/latest/meta-data/${item}`, instance.id);
      expect(reply.status, item).toBe(200);
      expect(reply.headers['content-type']).toMatch(/^text\/plain/);
      expect(reply.text).toBe(value);
    }
    const index = await ask('/latest/meta-data/', instance.id);
    expect(index.text.trim().split('\n')).toEqual(Object.keys(expected));
    const userData = await ask('/latest/user-data', instance.id);
    expect(userData.status).toBe(200);
    expect(userData.text).toBe('#cloud-config\npackages: [nginx]\n');
  });

  it('answers 404 for an unknown instance, an unknown item, and missing user data', async () => {
    expect((await ask('/latest/meta-data/instance-id', 'ins_doesnotexist')).status).toBe(404);
    const instance = await createInstance(server, server.rootKey);
    expect((await ask('/latest/meta-data/ami-id', instance.id)).status).toBe(404);
    expect((await ask('/latest/user-data', instance.id)).status).toBe(404);
    expect((await ask('/nothing-here', instance.id)).status).toBe(404);
  });

  it('answers 400 when the caller does not name its instance', async () => {
    const reply = await ask('/latest/meta-data/instance-id');
    expect(reply.status).toBe(400);
    expect(reply.text).toMatch(/x-nimbus-instance-id/i);
  });

  it('forgets a deleted instance', async () => {
    const instance = await createInstance(server, server.rootKey);
    expect((await ask('/latest/meta-data/instance-id', instance.id)).status).toBe(200);
    const deleted = await server.request('DELETE', `/v1/instances/${instance.id}`, { key: server.rootKey });
    expect(deleted.status).toBe(202);
    await waitFor(
      'the deleted instance to be forgotten',
      async () =>
        (await ask('/latest/meta-data/instance-id', instance.id)).status === 404 ? true : undefined,
      { timeoutMs: 5_000, intervalMs: 20 },
    );
  });
});
