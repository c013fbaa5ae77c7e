/**
 * Instances over HTTPS, on both stores: the whole lifecycle with every field of the record, addresses
 * that survive stop/start and resize and are released on delete, PATCH, the events of each transition,
 * a request racing the reconciler, and idempotent create.
 */
import { describe, expect, it } from 'vitest';
import { INSTANCE_TYPES } from '../src/resources/catalog/catalog.js';
import { findInstance, updateInstance } from '../src/resources/instances/store.js';
import { STORES } from './helpers/backends.js';
import { account, expectError, sleep } from './helpers/common.js';
import { storesFor, UNDER_QEMU } from './helpers/driver.js';
import {
  act,
  COMPUTE,
  createInstance,
  createRunning,
  createStopped,
  eventsOf,
  eventTypes,
  fault,
  getInstance,
  listTotal,
  SETTLE_MS,
  TEST_IMAGE,
  waitForEvent,
  waitForStatus,
} from './helpers/instances.js';
import { type Reply, serverForSuite } from './helpers/server.js';

type Json = Record<string, any>;

const FIELDS_OF_ONE = [
  'backup_schedule',
  'created_at',
  'encryption_key_id',
  'firewall_preset',
  'gpu',
  'hostname',
  'id',
  'image',
  'instance_type',
  'internal_hostname',
  'login_user',
  'memory_gb',
  'monitoring',
  'name',
  'price_per_hour',
  'private_ip',
  'protection',
  'public_ip',
  'region',
  'root_volume_id',
  'ssh',
  'ssh_keys',
  'status',
  'storage_gb',
  'tags',
  'updated_at',
  'user_data',
  'vcpus',
];

const catalogType = (name: string) => {
  const found = INSTANCE_TYPES.find((t) => t.name === name);
  if (!found) throw new Error(`no type ${name}`);
  return found;
};

describe.each(storesFor(STORES))('Instances: lifecycle (%s)', (store) => {
  const server = serverForSuite({ store });

  describe('lifecycle', () => {
    it('creates an instance (202 starting) with every field of the record, then it runs', async () => {
      const { key } = await account(server);
      const reply = await server.request('POST', '/v1/instances', {
        key,
        body: {
          name: 'web-1',
          instance_type: 'compute-2x',
          region: 'us-east-1',
          image: TEST_IMAGE,
          user_data: '#!/bin/sh\necho hi\n',
        },
      });
      expect(reply.status, reply.text).toBe(202);
      expect(reply.body.success).toBe(true);
      const created = reply.body.data as Json;
      expect(Object.keys(created).sort()).toEqual(FIELDS_OF_ONE);
      // Simulated: the public address and port 22 (a real VM's is the Nimbus host and its forwarded port,
      // once the VM exists: checked below, when it runs).
      expect(created.ssh).toEqual({ host: created.public_ip, port: 22, user: 'lambda' });
      const type = catalogType('compute-2x');
      expect(created).toMatchObject({
        name: 'web-1',
        status: 'starting',
        instance_type: 'compute-2x',
        region: 'us-east-1',
        image: TEST_IMAGE,
        ssh_keys: [],
        login_user: 'lambda',
        tags: {},
        user_data: '#!/bin/sh\necho hi\n',
        encryption_key_id: null,
        firewall_preset: 'ssh-only',
        monitoring: true,
        backup_schedule: null,
        vcpus: type.vcpus,
        memory_gb: type.memory_gb,
        storage_gb: type.storage_gb,
        gpu: null,
        price_per_hour: 0.1,
      });
      expect(created.vcpus).toBe(2);
      expect(created.memory_gb).toBe(4);
      expect(created.storage_gb).toBe(50);
      expect(created.id).toMatch(/^ins_[0-9a-z]{26}$/);
      expect(created.root_volume_id).toMatch(/^vol_[0-9a-z]{26}$/);
      expect(created.public_ip).toMatch(/^203\.0\.113\.(\d+)$/);
      const lastOctet = Number(created.public_ip.split('.')[3]);
      expect(lastOctet).toBeGreaterThanOrEqual(2);
      expect(lastOctet).toBeLessThanOrEqual(254);
      // The account's first instance in the region: the first address of its private network.
      expect(created.private_ip).toBe('10.10.0.2');
      expect(created.hostname).toBe(`${created.id}.us-east-1.nimbus.example.net`);
      expect(created.internal_hostname).toBe(`${created.id}.us-east-1.internal`);
      expect(new Date(created.created_at).toISOString()).toBe(created.created_at);
      expect(created.updated_at).toBe(created.created_at);

      const one = await getInstance(server, key, created.id);
      // GET one also lists the volumes on the instance: here its root volume.
      expect(Object.keys(one).sort()).toEqual([...FIELDS_OF_ONE, 'volumes'].sort());
      expect(one.volumes).toEqual([
        {
          id: created.root_volume_id,
          name: 'web-1-root',
          device_name: '/dev/vda',
          size_gb: 50,
          kind: 'root',
          status: 'in-use',
        },
      ]);
      expect(one.user_data).toBe('#!/bin/sh\necho hi\n');

      const list = await server.request('GET', '/v1/instances', { key });
      expect(list.status).toBe(200);
      expect(list.body.data).toHaveLength(1);
      expect(list.body.data[0]).not.toHaveProperty('user_data');
      expect(Object.keys(list.body.data[0]).sort()).toEqual(FIELDS_OF_ONE.filter((f) => f !== 'user_data'));

      const running = await waitForStatus(server, key, created.id, 'running');
      expect(running).toMatchObject({
        public_ip: created.public_ip,
        private_ip: created.private_ip,
        name: 'web-1',
      });
      expect(running.updated_at > created.updated_at || running.updated_at === created.updated_at).toBe(true);
      if (UNDER_QEMU)
        expect(running.ssh).toEqual({ host: '127.0.0.1', port: expect.any(Number), user: 'lambda' });
      expect(await eventTypes(server, key, created.id)).toEqual(['instance.created', 'instance.started']);

      // The root volume, sized by the type, is recorded in the store.
      const volume = await server.running.backends.store.db
        .selectFrom('volumes')
        .selectAll()
        .where('id', '=', created.root_volume_id)
        .executeTakeFirst();
      expect(volume).toMatchObject({ size_gb: 50, kind: 'root', instance_id: created.id });
    });

    it('stops, starts, restarts, resizes (running and stopped) and deletes, keeping its addresses', async () => {
      const { key } = await account(server);
      const created = await createInstance(server, key, { instance_type: 'compute-2x' });
      const { id, public_ip, private_ip } = created;
      const sameAddresses = (row: Json) => expect(row).toMatchObject({ public_ip, private_ip });
      await waitForStatus(server, key, id, 'running');

      // stop (no body, as `curl -X POST` sends it) → stopping → stopped
      const stop = await act(server, key, id, 'stop');
      expect(stop.status, stop.text).toBe(202);
      expect(stop.body.data.status).toBe('stopping');
      sameAddresses(await waitForStatus(server, key, id, 'stopped'));

      // start → starting → running
      const start = await act(server, key, id, 'start');
      expect(start.status, start.text).toBe(202);
      expect(start.body.data.status).toBe('starting');
      sameAddresses(await waitForStatus(server, key, id, 'running'));

      // restart: stopping → starting → running
      const restart = await act(server, key, id, 'restart');
      expect(restart.status, restart.text).toBe(202);
      expect(restart.body.data.status).toBe('stopping');
      await waitForEvent(server, key, id, 'instance.restarted');
      sameAddresses(await waitForStatus(server, key, id, 'running'));

      // resize from running: stop, change, start; ends running with the new type and a bigger root disk
      const resize = await act(server, key, id, 'resize', { instance_type: 'compute-4x' });
      expect(resize.status, resize.text).toBe(202);
      expect(resize.body.data).toMatchObject({ status: 'stopping', instance_type: 'compute-4x' });
      await waitForEvent(server, key, id, 'instance.resized');
      const resized = await waitForStatus(server, key, id, 'running');
      sameAddresses(resized);
      expect(resized).toMatchObject({
        instance_type: 'compute-4x',
        vcpus: 4,
        memory_gb: 8,
        storage_gb: 100,
        price_per_hour: 0.2,
      });
      const volume = await server.running.backends.store.db
        .selectFrom('volumes')
        .select('size_gb')
        .where('id', '=', created.root_volume_id)
        .executeTakeFirstOrThrow();
      expect(volume.size_gb).toBe(100);

      // resize from stopped: the type changes, the instance stays stopped
      expect((await act(server, key, id, 'stop', {})).status).toBe(202);
      await waitForStatus(server, key, id, 'stopped');
      const resizeStopped = await act(server, key, id, 'resize', { instance_type: 'compute-8x' });
      expect(resizeStopped.status, resizeStopped.text).toBe(202);
      expect(resizeStopped.body.data).toMatchObject({ status: 'stopped', instance_type: 'compute-8x' });
      await waitForEvent(server, key, id, 'instance.resized', 2);
      await sleep(SETTLE_MS);
      const stillStopped = await getInstance(server, key, id);
      expect(stillStopped).toMatchObject({
        status: 'stopped',
        instance_type: 'compute-8x',
        vcpus: 8,
        storage_gb: 200,
      });
      sameAddresses(stillStopped);
      expect((await act(server, key, id, 'start')).status).toBe(202);
      sameAddresses(await waitForStatus(server, key, id, 'running'));
      expect((await getInstance(server, key, id)).instance_type).toBe('compute-8x');

      // delete → deleting → 404; the root volume goes with it
      const del = await server.request('DELETE', `/v1/instances/${id}`, { key });
      expect(del.status, del.text).toBe(202);
      expect(del.body.data.status).toBe('deleting');
      await waitForStatus(server, key, id, 'gone');
      expectError(await server.request('GET', `/v1/instances/${id}`, { key }), 404, 'not_found');
      const rootLeft = await server.running.backends.store.db
        .selectFrom('volumes')
        .select('id')
        .where('id', '=', created.root_volume_id)
        .executeTakeFirst();
      expect(rootLeft).toBeUndefined();
      expect(await eventTypes(server, key, id)).toEqual([
        'instance.created',
        'instance.started',
        'instance.stopped',
        'instance.started',
        'instance.restarted',
        'instance.resized',
        'instance.stopped',
        'instance.resized',
        'instance.started',
        'instance.deleted',
      ]);
    });

    it('releases the private address on delete: the next instance gets the lowest free one', async () => {
      const { key } = await account(server);
      const first = await createRunning(server, key);
      const second = await createRunning(server, key);
      expect(first.private_ip).toBe('10.10.0.2');
      expect(second.private_ip).toBe('10.10.0.3');
      expect(second.public_ip).not.toBe(first.public_ip);
      expect((await server.request('DELETE', `/v1/instances/${first.id}`, { key })).status).toBe(202);
      await waitForStatus(server, key, first.id, 'gone');
      const third = await createInstance(server, key);
      expect(third.private_ip).toBe('10.10.0.2');
      // Each account has its own private network: another account's first instance also gets .2.
      const other = await account(server);
      expect((await createInstance(server, other.key)).private_ip).toBe('10.10.0.2');
      // Other regions use their own networks.
      expect((await createInstance(server, key, { region: 'us-west-2' })).private_ip).toBe('10.20.0.2');
    });
  });

  describe('PATCH', () => {
    it('changes name, tags, monitoring and backup_schedule (200), moves updated_at, writes instance.updated', async () => {
      const { key } = await account(server);
      const running = await createRunning(server, key, { name: 'before', tags: { env: 'dev' } });
      await sleep(5);
      const reply = await server.request('PATCH', `/v1/instances/${running.id}`, {
        key,
        body: {
          name: 'after',
          tags: { env: 'prod', team: 'core' },
          monitoring: false,
          backup_schedule: { frequency: 'daily', retention: 7 },
        },
      });
      expect(reply.status, reply.text).toBe(200);
      const patched = reply.body.data as Json;
      expect(patched).toMatchObject({
        id: running.id,
        name: 'after',
        status: 'running',
        tags: { env: 'prod', team: 'core' },
        monitoring: false,
        backup_schedule: { frequency: 'daily', retention: 7 },
        instance_type: running.instance_type,
        public_ip: running.public_ip,
        created_at: running.created_at,
      });
      expect(Date.parse(patched.updated_at)).toBeGreaterThan(Date.parse(running.updated_at));
      // GET adds the volumes on the instance, which the other answers leave out.
      expect(await getInstance(server, key, running.id)).toEqual({ ...patched, volumes: expect.any(Array) });
      const [updated] = await waitForEvent(server, key, running.id, 'instance.updated');
      expect(updated?.data).toMatchObject({ instance_id: running.id, name: 'after', status: 'running' });

      // The tag filter follows the new tags; the old one no longer matches.
      const byNew = await server.request('GET', '/v1/instances?tag=env:prod', { key });
      expect(byNew.body.data.map((i: Json) => i.id)).toEqual([running.id]);
      const byOld = await server.request('GET', '/v1/instances?tag=env:dev', { key });
      expect(byOld.body.data).toEqual([]);

      // One field at a time; the rest stays. backup_schedule null clears it.
      const partial = await server.request('PATCH', `/v1/instances/${running.id}`, {
        key,
        body: { backup_schedule: null },
      });
      expect(partial.status, partial.text).toBe(200);
      expect(partial.body.data).toMatchObject({
        name: 'after',
        backup_schedule: null,
        monitoring: false,
        tags: { env: 'prod', team: 'core' },
      });
      await waitForEvent(server, key, running.id, 'instance.updated', 2);
      expect((await getInstance(server, key, running.id)).status).toBe('running');
    });

    it('works on a stopped instance and leaves it stopped', async () => {
      const { key } = await account(server);
      const stopped = await createStopped(server, key);
      const reply = await server.request('PATCH', `/v1/instances/${stopped.id}`, {
        key,
        body: { name: 'renamed' },
      });
      expect(reply.status, reply.text).toBe(200);
      expect(reply.body.data).toMatchObject({ name: 'renamed', status: 'stopped' });
      await sleep(SETTLE_MS);
      expect((await getInstance(server, key, stopped.id)).status).toBe('stopped');
    });
  });

  describe('a request racing the reconciler', () => {
    // The reconciler writes an instance's status guarded by the version it read (resources/instances/store.ts
    // updateInstance). Here that write is made by the test, in a transaction that commits while the
    // user's request is in flight, exactly as when a boot completes during the request. The action is
    // allowed from both the old and the new status, so it must apply, not answer 409.
    const RACES: [string, (key: string, id: string) => Promise<Reply>, number, string][] = [
      [
        'PATCH',
        (key, id) => server.request('PATCH', `/v1/instances/${id}`, { key, body: { name: 'patched' } }),
        200,
        'running',
      ],
      ['forced stop', (key, id) => act(server, key, id, 'stop', { force: true }), 202, 'stopped'],
      ['delete', (key, id) => server.request('DELETE', `/v1/instances/${id}`, { key }), 202, 'deleting'],
    ];

    it.each(RACES)('%s while the boot completes applies (no 409)', async (_label, request, status, after) => {
      const { key } = await account(server);
      const created = await createInstance(server, key, fault('stuck-starting'));
      await sleep(SETTLE_MS);
      expect((await getInstance(server, key, created.id)).status).toBe('starting');
      const db = server.running.backends.store.db;
      let inFlight: Promise<Reply> | undefined;
      await db.transaction().execute(async (trx) => {
        const row = await findInstance(trx, created.id);
        if (!row) throw new Error('instance row missing');
        const booted = await updateInstance(trx, row, {
          status: 'running',
          operation: null,
          operation_at: null,
          updated_at: new Date().toISOString(),
        });
        expect(booted?.status).toBe('running');
        inFlight = request(key, created.id);
        // Long enough for the request to read the instance before this write commits.
        await sleep(300);
      });
      const reply = await (inFlight as Promise<Reply>);
      expect(reply.status, reply.text).toBe(status);
      expect(reply.body.data.status).toBe(after);
    });
  });

  describe('events', () => {
    it('writes each transition with {instance_id, name, status}', async () => {
      const { key } = await account(server);
      const created = await createInstance(server, key, { name: 'evented' });
      const { id } = created;
      await waitForStatus(server, key, id, 'running');
      expect((await act(server, key, id, 'stop')).status).toBe(202);
      await waitForStatus(server, key, id, 'stopped');
      expect((await act(server, key, id, 'start')).status).toBe(202);
      await waitForStatus(server, key, id, 'running');
      expect((await act(server, key, id, 'restart')).status).toBe(202);
      await waitForEvent(server, key, id, 'instance.restarted');
      expect((await act(server, key, id, 'resize', { instance_type: 'compute-2x' })).status).toBe(202);
      await waitForEvent(server, key, id, 'instance.resized');
      await waitForStatus(server, key, id, 'running');
      expect(
        (await server.request('PATCH', `/v1/instances/${id}`, { key, body: { name: 'renamed' } })).status,
      ).toBe(200);
      expect((await server.request('DELETE', `/v1/instances/${id}`, { key })).status).toBe(202);
      await waitForStatus(server, key, id, 'gone');
      await waitForEvent(server, key, id, 'instance.deleted');

      const events = await eventsOf(server, key, id);
      expect(events.map((e) => [e.type, e.data.name, e.data.status])).toEqual([
        ['instance.created', 'evented', 'starting'],
        ['instance.started', 'evented', 'running'],
        ['instance.stopped', 'evented', 'stopped'],
        ['instance.started', 'evented', 'running'],
        ['instance.restarted', 'evented', 'running'],
        ['instance.resized', 'evented', 'running'],
        ['instance.updated', 'renamed', 'running'],
        ['instance.deleted', 'renamed', 'deleted'],
      ]);
      for (const event of events) {
        expect(event.id).toMatch(/^evt_/);
        expect(event.resource_id).toBe(id);
        expect(event.data.instance_id).toBe(id);
        expect(new Date(event.timestamp).toISOString()).toBe(event.timestamp);
      }
      // The type filter narrows to one kind; the family filter takes them all.
      const stoppedOnly = await server.request('GET', `/v1/events?resource_id=${id}&type=instance.stopped`, {
        key,
      });
      expect(stoppedOnly.body.data.map((e: Json) => e.type)).toEqual(['instance.stopped']);
      const family = await server.request('GET', `/v1/events?resource_id=${id}&type=instance.*&limit=100`, {
        key,
      });
      expect(family.body.pagination.total_items).toBe(8);
    });
  });

  describe('idempotent create', () => {
    it('the same Idempotency-Key twice makes one instance; the replay says so', async () => {
      const { key } = await account(server);
      const body = { name: 'once', ...COMPUTE };
      const headers = { 'idempotency-key': 'create-once-1' };
      const first = await server.request('POST', '/v1/instances', { key, body, headers });
      expect(first.status, first.text).toBe(202);
      expect(first.headers['idempotent-replayed']).toBeUndefined();
      const second = await server.request('POST', '/v1/instances', { key, body, headers });
      expect(second.status, second.text).toBe(202);
      expect(second.headers['idempotent-replayed']).toBe('true');
      expect(second.body.data.id).toBe(first.body.data.id);
      expect(second.body.data).toEqual(first.body.data);
      expect(await listTotal(server, key)).toBe(1);
      // The same key with another body is refused; a new key makes a new instance.
      expectError(
        await server.request('POST', '/v1/instances', { key, body: { ...body, name: 'twice' }, headers }),
        422,
        'idempotency_key_reused',
      );
      const third = await server.request('POST', '/v1/instances', {
        key,
        body,
        headers: { 'idempotency-key': 'create-once-2' },
      });
      expect(third.status).toBe(202);
      expect(third.body.data.id).not.toBe(first.body.data.id);
      expect(await listTotal(server, key)).toBe(2);
    });
  });
});
