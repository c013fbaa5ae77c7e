/**
 * Instances over HTTPS, on both stores: the network view (addresses, DNS names, private network, the
 * effective firewall rules), and another account's instance, which is 404 everywhere and left untouched.
 */
import { describe, expect, it } from 'vitest';
import { STORES } from './helpers/backends.js';
import { account, expectError, sleep } from './helpers/common.js';
import { storesFor, UNDER_QEMU } from './helpers/driver.js';
import {
  act,
  createInstance,
  createRunning,
  eventTypes,
  getInstance,
  SETTLE_MS,
  waitForStatus,
} from './helpers/instances.js';
import { serverForSuite } from './helpers/server.js';

type Json = Record<string, any>;

describe.each(storesFor(STORES))('Instances: network and other accounts (%s)', (store) => {
  const server = serverForSuite({ store });

  describe('network', () => {
    it('GET /v1/instances/{id}/network shows addresses, DNS names and the private network', async () => {
      const { key } = await account(server);
      const instance = await createInstance(server, key, { region: 'us-west-2' });
      // A real VM is reached at the Nimbus host, on its forwarded port, once the VM exists: looked at
      // when it runs (before, it is the public address and port 22, as a simulated one's always is).
      const ssh = UNDER_QEMU
        ? (await waitForStatus(server, key, instance.id, 'running')).ssh
        : { host: instance.public_ip, port: 22, user: 'lambda' };
      if (UNDER_QEMU) expect(ssh).toEqual({ host: '127.0.0.1', port: expect.any(Number), user: 'lambda' });
      const reply = await server.request('GET', `/v1/instances/${instance.id}/network`, { key });
      expect(reply.status, reply.text).toBe(200);
      const network = reply.body.data as Json;
      expect(network).toMatchObject({
        instance_id: instance.id,
        public_ip: instance.public_ip,
        private_ip: '10.20.0.2',
        hostname: `${instance.id}.us-west-2.nimbus.example.net`,
        internal_hostname: `${instance.id}.us-west-2.internal`,
        private_network: { region: 'us-west-2', cidr: '10.20.0.0/16' },
        firewall_preset: 'ssh-only',
        ssh,
        private_traffic_free: true,
      });
      // No rules of its own: the ssh-only preset, then the defaults (test/firewall-rules.test.ts has the rest).
      expect(network.firewall_rules.map((r: Json) => [r.source, r.action, r.protocol, r.ports])).toEqual([
        ['preset', 'allow', 'tcp', '22'],
        ['default', 'allow', 'all', null],
        ['default', 'deny', 'all', null],
        ['default', 'allow', 'all', null],
      ]);
      expect(network.firewall_rules[1].sources).toEqual(['10.20.0.0/16']);
      expect(network.public_ip).toMatch(/^198\.51\.100\.\d+$/);
      expect(network.mac_address).toMatch(/^02(:[0-9a-f]{2}){5}$/);
      expect(typeof network.note).toBe('string');
      expect(network.note.length).toBeGreaterThan(0);
      // Stable: the same MAC on every read, and a different one for another instance.
      const again = await server.request('GET', `/v1/instances/${instance.id}/network`, { key });
      expect(again.body.data.mac_address).toBe(network.mac_address);
      const other = await createInstance(server, key);
      const otherNetwork = await server.request('GET', `/v1/instances/${other.id}/network`, { key });
      expect(otherNetwork.body.data.mac_address).not.toBe(network.mac_address);
      expect(otherNetwork.body.data.private_network).toEqual({ region: 'us-east-1', cidr: '10.10.0.0/16' });
    });
  });

  describe("another account's instance", () => {
    it('is 404 on every instance endpoint and is left untouched', async () => {
      const owner = await account(server);
      const stranger = await account(server);
      const instance = await createRunning(server, owner.key, { name: 'mine' });
      const { id } = instance;
      const attempts: [string, string, unknown?][] = [
        ['GET', `/v1/instances/${id}`],
        ['PATCH', `/v1/instances/${id}`, { name: 'stolen' }],
        ['DELETE', `/v1/instances/${id}`],
        ['POST', `/v1/instances/${id}/start`],
        ['POST', `/v1/instances/${id}/stop`],
        ['POST', `/v1/instances/${id}/stop`, { force: true }],
        ['POST', `/v1/instances/${id}/restart`],
        ['POST', `/v1/instances/${id}/resize`, { instance_type: 'compute-2x' }],
        ['POST', `/v1/instances/${id}/resize`, { instance_type: 'compute-1x' }],
        ['GET', `/v1/instances/${id}/network`],
      ];
      for (const [method, path, body] of attempts) {
        const reply = await server.request(method, path, {
          key: stranger.key,
          ...(body === undefined ? {} : { body }),
        });
        const error = expectError(reply, 404, 'not_found');
        expect(error.message, `${method} ${path}`).toContain(id);
      }
      const list = await server.request('GET', '/v1/instances', { key: stranger.key });
      expect(list.body.data).toEqual([]);
      const events = await server.request('GET', `/v1/events?resource_id=${id}`, { key: stranger.key });
      expect(events.body.data).toEqual([]);
      await sleep(SETTLE_MS);
      expect(await getInstance(server, owner.key, id)).toEqual(instance);
      expect(await eventTypes(server, owner.key, id)).toEqual(['instance.created', 'instance.started']);
    });

    it('an unknown id is 404 too', async () => {
      const { key } = await account(server);
      expectError(
        await server.request('GET', '/v1/instances/ins_00000000000000000000000000', { key }),
        404,
        'not_found',
      );
      expectError(await act(server, key, 'ins_00000000000000000000000000', 'start'), 404, 'not_found');
    });
  });
});
