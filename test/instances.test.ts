/**
 * Instances over HTTPS, on both stores: the whole lifecycle with every field of the record, addresses
 * that survive stop/start and resize and are released on delete, every 409 of the state machine (driven
 * from ALLOWED_FROM), forced stop out of each stuck state, boot errors, validation, quotas, payment,
 * GPU and public-IP capacity, PATCH, events, other accounts' instances, network info, idempotent create,
 * and (with a manual clock and stepped jobs) the simulated timings. Lists: instance-lists.test.ts.
 */
import { generateKeyPairSync } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { IMAGES, INSTANCE_TYPES, REGION_NAMES } from '../src/domain/catalog.js';
import { ManualClock } from '../src/domain/clock.js';
import {
  ALLOWED_FROM,
  type InstanceAction,
  type InstanceStatus,
  isAllowed,
} from '../src/domain/instance-states.js';
import { formatSshPublicKey } from '../src/domain/ssh-keys.js';
import { FAULT_TAG, FAULTS } from '../src/drivers/simulator/simulator.js';
import { findInstance, updateInstance } from '../src/store/instances.js';
import { STORES } from './helpers/backends.js';
import { COMPUTE, createInstance, waitForStatus } from './helpers/instances.js';
import { type Reply, serverForSuite, type TestServer } from './helpers/server.js';

type Json = Record<string, any>;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const fault = (name: string) => ({ tags: { [FAULT_TAG]: name } });
/** Long enough for a simulated boot (8 ms), stop (5 ms) or resize (25 ms) at speed-up 1000 to finish many times over. */
const SETTLE_MS = 150;

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
  'public_ip',
  'region',
  'root_volume_id',
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

function expectError(reply: Reply, status: number, code: string): { message: string; details?: Json } {
  expect(reply.status, reply.text).toBe(status);
  expect(reply.body.success, reply.text).toBe(false);
  expect(reply.body.error.code, reply.text).toBe(code);
  return reply.body.error;
}

/** An account whose rate limit never gets in the way of a test. */
async function account(server: TestServer, plan = 'professional') {
  return server.createAccount({ plan, perHour: 1_000_000, burst: 100_000 });
}

function act(server: TestServer, key: string, id: string, action: string, body?: unknown): Promise<Reply> {
  return server.request('POST', `/v1/instances/${id}/${action}`, {
    key,
    ...(body === undefined ? {} : { body }),
  });
}

async function getInstance(server: TestServer, key: string, id: string): Promise<Json> {
  const reply = await server.request('GET', `/v1/instances/${id}`, { key });
  expect(reply.status, reply.text).toBe(200);
  return reply.body.data;
}

async function eventsOf(server: TestServer, key: string, id: string): Promise<Json[]> {
  const reply = await server.request('GET', `/v1/events?resource_id=${id}&limit=100`, { key });
  expect(reply.status, reply.text).toBe(200);
  return [...(reply.body.data as Json[])].reverse();
}

/** Event types of the instance, oldest first. */
async function eventTypes(server: TestServer, key: string, id: string): Promise<string[]> {
  return (await eventsOf(server, key, id)).map((e) => e.type);
}

async function waitForEvent(
  server: TestServer,
  key: string,
  id: string,
  type: string,
  count = 1,
): Promise<Json[]> {
  const deadline = Date.now() + 10_000;
  let types: string[] = [];
  while (Date.now() < deadline) {
    const events = await eventsOf(server, key, id);
    types = events.map((e) => e.type);
    const matching = events.filter((e) => e.type === type);
    if (matching.length >= count) return matching;
    await sleep(15);
  }
  throw new Error(`instance ${id}: no ${count}× ${type} event (saw ${types.join(', ')})`);
}

async function createRunning(server: TestServer, key: string, body: Json = {}): Promise<Json> {
  const created = await createInstance(server, key, body);
  return waitForStatus(server, key, created.id, 'running');
}

async function createStopped(server: TestServer, key: string, body: Json = {}): Promise<Json> {
  const running = await createRunning(server, key, body);
  expect((await act(server, key, running.id, 'stop')).status).toBe(202);
  return waitForStatus(server, key, running.id, 'stopped');
}

async function listTotal(server: TestServer, key: string): Promise<number> {
  const reply = await server.request('GET', '/v1/instances', { key });
  expect(reply.status, reply.text).toBe(200);
  return reply.body.pagination.total_items;
}

function sshPublicKey(): string {
  return formatSshPublicKey(generateKeyPairSync('ed25519').publicKey, 'me@laptop');
}

describe.each(STORES)('Instances (%s)', (store) => {
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
          image: 'ubuntu-24.04',
          user_data: '#!/bin/sh\necho hi\n',
        },
      });
      expect(reply.status, reply.text).toBe(202);
      expect(reply.body.success).toBe(true);
      const created = reply.body.data as Json;
      expect(Object.keys(created).sort()).toEqual(FIELDS_OF_ONE);
      const type = catalogType('compute-2x');
      expect(created).toMatchObject({
        name: 'web-1',
        status: 'starting',
        instance_type: 'compute-2x',
        region: 'us-east-1',
        image: 'ubuntu-24.04',
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
      expect(Object.keys(one).sort()).toEqual(FIELDS_OF_ONE);
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

  describe('409 conflict from every status an action is not allowed in', () => {
    const held = {} as Record<Exclude<InstanceStatus, 'deleting'>, string>;
    let key = '';

    beforeAll(async () => {
      key = (await account(server)).key;
      held.starting = (await createInstance(server, key, fault('stuck-starting'))).id;
      held.running = (await createRunning(server, key)).id;
      held.stopped = (await createStopped(server, key)).id;
      const stuckStopping = await createRunning(server, key, fault('stuck-stopping'));
      expect((await act(server, key, stuckStopping.id, 'stop')).status).toBe(202);
      held.stopping = stuckStopping.id;
      const failing = await createInstance(server, key, fault('boot-error'));
      held.error = (await waitForStatus(server, key, failing.id, 'error')).id;
      await sleep(SETTLE_MS);
      for (const [status, id] of Object.entries(held)) {
        expect((await getInstance(server, key, id)).status, `held ${status} instance`).toBe(status);
      }
    });

    const ACTIONS: Record<InstanceAction, (id: string) => Promise<Reply>> = {
      start: (id) => act(server, key, id, 'start'),
      stop: (id) => act(server, key, id, 'stop'),
      force_stop: (id) => act(server, key, id, 'stop', { force: true }),
      restart: (id) => act(server, key, id, 'restart'),
      resize: (id) => act(server, key, id, 'resize', { instance_type: 'compute-2x' }),
      update: (id) => server.request('PATCH', `/v1/instances/${id}`, { key, body: { name: 'renamed' } }),
      delete: (id) => server.request('DELETE', `/v1/instances/${id}`, { key }),
    };
    const STATUSES = ['starting', 'running', 'stopping', 'stopped', 'error'] as const;
    const CONFLICTS = STATUSES.flatMap((status) =>
      (Object.keys(ALLOWED_FROM) as InstanceAction[])
        .filter((action) => !isAllowed(action, status))
        .map((action) => [action, status] as const),
    );

    it('the table covers every refused pair of the state machine', () => {
      expect(CONFLICTS.length).toBe(16);
      expect(CONFLICTS).toContainEqual(['start', 'running']);
      expect(CONFLICTS).toContainEqual(['force_stop', 'stopped']);
      expect(CONFLICTS).toContainEqual(['resize', 'error']);
    });

    it.each(CONFLICTS)(
      '%s from %s → 409 conflict with current and allowed statuses',
      async (action, status) => {
        const id = held[status];
        const before = await getInstance(server, key, id);
        const error = expectError(await ACTIONS[action](id), 409, 'conflict');
        expect(error.details).toEqual({
          current_status: status,
          allowed_statuses: [...ALLOWED_FROM[action]],
        });
        const after = await getInstance(server, key, id);
        expect(after).toEqual(before);
      },
    );
  });

  describe('forced stop and stuck instances', () => {
    it('force-stops an instance stuck in starting (202 stopped at once, instance.stopped)', async () => {
      const { key } = await account(server);
      const stuck = await createInstance(server, key, fault('stuck-starting'));
      await sleep(SETTLE_MS);
      expect((await getInstance(server, key, stuck.id)).status).toBe('starting');
      const forced = await act(server, key, stuck.id, 'stop', { force: true });
      expect(forced.status, forced.text).toBe(202);
      expect(forced.body.data.status).toBe('stopped');
      expect((await getInstance(server, key, stuck.id)).status).toBe('stopped');
      const [stopped] = await waitForEvent(server, key, stuck.id, 'instance.stopped');
      expect(stopped?.data).toMatchObject({ instance_id: stuck.id, name: stuck.name, status: 'stopped' });
      await sleep(SETTLE_MS);
      expect((await getInstance(server, key, stuck.id)).status).toBe('stopped');
      // Without the fault it starts normally afterwards.
      expect(
        (await server.request('PATCH', `/v1/instances/${stuck.id}`, { key, body: { tags: {} } })).status,
      ).toBe(200);
      expect((await act(server, key, stuck.id, 'start')).status).toBe(202);
      await waitForStatus(server, key, stuck.id, 'running');
    });

    it('force-stops a running instance at once', async () => {
      const { key } = await account(server);
      const running = await createRunning(server, key);
      const forced = await act(server, key, running.id, 'stop', { force: true });
      expect(forced.status, forced.text).toBe(202);
      expect(forced.body.data.status).toBe('stopped');
      expect((await getInstance(server, key, running.id)).status).toBe('stopped');
      await waitForEvent(server, key, running.id, 'instance.stopped');
      await sleep(SETTLE_MS);
      expect((await getInstance(server, key, running.id)).status).toBe('stopped');
      expect((await act(server, key, running.id, 'start')).status).toBe(202);
      await waitForStatus(server, key, running.id, 'running');
    });

    it('force-stops an instance stuck in stopping', async () => {
      const { key } = await account(server);
      const running = await createRunning(server, key, fault('stuck-stopping'));
      expect((await act(server, key, running.id, 'stop')).status).toBe(202);
      await sleep(SETTLE_MS);
      expect((await getInstance(server, key, running.id)).status).toBe('stopping');
      const forced = await act(server, key, running.id, 'stop', { force: true });
      expect(forced.status, forced.text).toBe(202);
      expect(forced.body.data.status).toBe('stopped');
      await sleep(SETTLE_MS);
      expect((await getInstance(server, key, running.id)).status).toBe('stopped');
      expect(
        (await eventTypes(server, key, running.id)).filter((t) => t === 'instance.stopped'),
      ).toHaveLength(1);
    });

    it('refuses a forced stop of a stopped instance (409)', async () => {
      const { key } = await account(server);
      const stopped = await createStopped(server, key);
      const error = expectError(await act(server, key, stopped.id, 'stop', { force: true }), 409, 'conflict');
      expect(error.details).toEqual({
        current_status: 'stopped',
        allowed_statuses: ['starting', 'running', 'stopping'],
      });
    });

    it('finishes the boot once PATCH removes the stuck-starting tag', async () => {
      const { key } = await account(server);
      const stuck = await createInstance(server, key, { tags: { [FAULT_TAG]: 'stuck-starting', team: 'a' } });
      await sleep(SETTLE_MS);
      expect((await getInstance(server, key, stuck.id)).status).toBe('starting');
      const patched = await server.request('PATCH', `/v1/instances/${stuck.id}`, {
        key,
        body: { tags: { team: 'a' } },
      });
      expect(patched.status, patched.text).toBe(200);
      const running = await waitForStatus(server, key, stuck.id, 'running');
      expect(running.tags).toEqual({ team: 'a' });
      await waitForEvent(server, key, stuck.id, 'instance.started');
    });

    it('finishes the shutdown once PATCH removes the stuck-stopping tag', async () => {
      const { key } = await account(server);
      const running = await createRunning(server, key, fault('stuck-stopping'));
      expect((await act(server, key, running.id, 'stop')).status).toBe(202);
      await sleep(SETTLE_MS);
      expect((await getInstance(server, key, running.id)).status).toBe('stopping');
      expect(
        (await server.request('PATCH', `/v1/instances/${running.id}`, { key, body: { tags: {} } })).status,
      ).toBe(200);
      await waitForStatus(server, key, running.id, 'stopped');
    });

    it.each(['stuck-starting', 'stuck-stopping'])('deletes an instance that is %s', async (name) => {
      const { key } = await account(server);
      let instance = await createInstance(server, key, fault(name));
      if (name === 'stuck-stopping') {
        instance = await waitForStatus(server, key, instance.id, 'running');
        expect((await act(server, key, instance.id, 'stop')).status).toBe(202);
      }
      await sleep(SETTLE_MS);
      expect((await getInstance(server, key, instance.id)).status).toBe(
        name === 'stuck-starting' ? 'starting' : 'stopping',
      );
      const del = await server.request('DELETE', `/v1/instances/${instance.id}`, { key });
      expect(del.status, del.text).toBe(202);
      expect(del.body.data.status).toBe('deleting');
      await waitForStatus(server, key, instance.id, 'gone');
      await waitForEvent(server, key, instance.id, 'instance.deleted');
    });
  });

  describe('boot errors', () => {
    it('goes to error with instance.error; start retries the boot, and without the tag it runs', async () => {
      const { key } = await account(server);
      const created = await createInstance(server, key, fault('boot-error'));
      await waitForStatus(server, key, created.id, 'error');
      const [errorEvent] = await waitForEvent(server, key, created.id, 'instance.error');
      expect(errorEvent?.data).toMatchObject({
        instance_id: created.id,
        name: created.name,
        status: 'error',
      });

      // With the fault still there the retry fails again.
      const retry = await act(server, key, created.id, 'start');
      expect(retry.status, retry.text).toBe(202);
      expect(retry.body.data.status).toBe('starting');
      await waitForEvent(server, key, created.id, 'instance.error', 2);
      expect((await getInstance(server, key, created.id)).status).toBe('error');

      // PATCH leaves the status alone; a start without the fault boots.
      expect(
        (await server.request('PATCH', `/v1/instances/${created.id}`, { key, body: { tags: {} } })).status,
      ).toBe(200);
      await sleep(SETTLE_MS);
      expect((await getInstance(server, key, created.id)).status).toBe('error');
      expect((await act(server, key, created.id, 'start')).status).toBe(202);
      await waitForStatus(server, key, created.id, 'running');
      expect(await eventTypes(server, key, created.id)).toEqual([
        'instance.created',
        'instance.error',
        'instance.error',
        'instance.updated',
        'instance.started',
      ]);
    });

    it('deletes an instance in error', async () => {
      const { key } = await account(server);
      const created = await createInstance(server, key, fault('boot-error'));
      await waitForStatus(server, key, created.id, 'error');
      expect((await server.request('DELETE', `/v1/instances/${created.id}`, { key })).status).toBe(202);
      await waitForStatus(server, key, created.id, 'gone');
    });
  });

  describe('validation', () => {
    const TYPE_NAMES = INSTANCE_TYPES.map((t) => t.name);
    const IMAGE_NAMES = IMAGES.map((i) => i.name);
    const GPU_IMAGES = IMAGES.filter((i) => i.gpu_compatible).map((i) => i.name);
    // Where a tag key is refused, naming the tag ('tags.<key>') is as good as naming 'tags'.
    const TAGS_FIELD = /^tags(\.|$)/;
    const manyTags = (n: number) =>
      Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, `v${i}`]));

    /** [label, body fields, expected details]; a RegExp `field` matches the field named. */
    const BAD_CREATES: [string, Json, Json][] = [
      [
        'unknown instance_type',
        { instance_type: 'compute-3x' },
        { field: 'instance_type', value: 'compute-3x', allowed_values: TYPE_NAMES },
      ],
      [
        'unknown region',
        { region: 'mars-1' },
        { field: 'region', value: 'mars-1', allowed_values: REGION_NAMES },
      ],
      [
        'unknown image',
        { image: 'windows-11' },
        { field: 'image', value: 'windows-11', allowed_values: IMAGE_NAMES },
      ],
      [
        'GPU type in a region without GPUs',
        { instance_type: 'gpu-1x', region: 'eu-central-1', image: 'ubuntu-22.04-cuda' },
        { field: 'region', value: 'eu-central-1', allowed_values: ['us-east-1', 'us-west-2'] },
      ],
      [
        'GPU type with an image without GPU drivers',
        { instance_type: 'gpu-1x', image: 'debian-12' },
        { field: 'image', value: 'debian-12', allowed_values: GPU_IMAGES },
      ],
      ['empty name', { name: '' }, { field: 'name', value: '' }],
      ['65-character name', { name: 'a'.repeat(65) }, { field: 'name', value: 'a'.repeat(65) }],
      ['name with a space', { name: 'web 1' }, { field: 'name', value: 'web 1' }],
      ['name with a slash', { name: 'web/1' }, { field: 'name', value: 'web/1' }],
      ['name that is not a string', { name: 42 }, { field: 'name', value: 42 }],
      ['missing name', { name: undefined }, { field: 'name' }],
      ['user_data over 16 KiB of ASCII', { user_data: 'x'.repeat(16 * 1024 + 1) }, { field: 'user_data' }],
      // 8,193 two-byte characters: under 16,384 characters, but 16,386 bytes.
      [
        'user_data over 16 KiB in bytes, not characters',
        { user_data: 'é'.repeat(8193) },
        { field: 'user_data' },
      ],
      ['51 tags', { tags: manyTags(51) }, { field: 'tags' }],
      ['a tag key with a space', { tags: { 'bad key': 'x' } }, { field: TAGS_FIELD }],
      ['a tag key with a colon', { tags: { 'a:b': 'x' } }, { field: TAGS_FIELD }],
      ['an empty tag key', { tags: { '': 'x' } }, { field: TAGS_FIELD }],
      ['a tag key of 129 characters', { tags: { ['k'.repeat(129)]: 'x' } }, { field: TAGS_FIELD }],
      ['a tag value of 257 characters', { tags: { k: 'v'.repeat(257) } }, { field: 'tags.k' }],
      [
        'an unknown simulator fault',
        { tags: { [FAULT_TAG]: 'explode' } },
        { field: `tags.${FAULT_TAG}`, value: 'explode', allowed_values: [...FAULTS] },
      ],
      ['an unknown field', { colour: 'red' }, { field: 'colour', value: 'red' }],
      [
        'an unknown firewall preset',
        { firewall_preset: 'open' },
        { field: 'firewall_preset', value: 'open' },
      ],
      [
        'a backup retention of 91',
        { backup_schedule: { frequency: 'daily', retention: 91 } },
        { field: /^backup_schedule(\.|$)/ },
      ],
      ['ssh_keys that is not an array', { ssh_keys: 'mykey' }, { field: 'ssh_keys' }],
    ];

    it.each(BAD_CREATES)(
      'refuses %s (400 naming the field) and creates nothing',
      async (_label, body, details) => {
        const { key } = await account(server);
        const reply = await server.request('POST', '/v1/instances', {
          key,
          body: { name: 'valid-name', ...COMPUTE, ...body },
        });
        const error = expectError(reply, 400, 'invalid_request');
        const { field, ...rest } = details;
        if (field instanceof RegExp) expect(String(error.details?.field)).toMatch(field);
        else expect(error.details?.field).toBe(field);
        expect(error.details).toMatchObject(rest);
        expect(await listTotal(server, key)).toBe(0);
      },
    );

    it('accepts the limits themselves: 64-character name, 16 KiB of user_data in bytes, 50 tags', async () => {
      const other = await account(server);
      const name = `${'a'.repeat(60)}.-_9`;
      const userData = 'é'.repeat(8192); // exactly 16,384 bytes
      const created = await createInstance(server, other.key, {
        name,
        user_data: userData,
        tags: manyTags(50),
        encryption_key_id: 'kms-key-1',
        firewall_preset: 'web',
        monitoring: false,
        backup_schedule: { frequency: 'weekly', retention: 90 },
      });
      const one = await getInstance(server, other.key, created.id);
      expect(one).toMatchObject({
        name,
        user_data: userData,
        tags: manyTags(50),
        encryption_key_id: 'kms-key-1',
        firewall_preset: 'web',
        monitoring: false,
        backup_schedule: { frequency: 'weekly', retention: 90 },
      });
    });

    describe('PATCH and resize', () => {
      let id = '';
      let key = '';
      beforeAll(async () => {
        key = (await account(server)).key;
        id = (await createRunning(server, key, { instance_type: 'compute-4x', name: 'patch-me' })).id;
      });

      it.each([
        ['instance_type', { instance_type: 'compute-8x' }],
        ['region', { region: 'us-west-2' }],
        ['image', { image: 'debian-12' }],
        ['status', { status: 'stopped' }],
        ['public_ip', { public_ip: '203.0.113.200' }],
      ])('PATCH of %s → 400 naming it', async (field, body) => {
        const before = await getInstance(server, key, id);
        const error = expectError(
          await server.request('PATCH', `/v1/instances/${id}`, { key, body }),
          400,
          'invalid_request',
        );
        expect(error.details?.field).toBe(field);
        expect(await getInstance(server, key, id)).toEqual(before);
      });

      it.each([
        ['an empty body', {}],
        ['a bad name', { name: 'bad name' }],
        ['an unknown fault', { tags: { [FAULT_TAG]: 'explode' } }],
        ['a tag key with a space', { tags: { 'bad key': 'x' } }],
        ['51 tags', { tags: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, 'v'])) }],
        ['a bad backup frequency', { backup_schedule: { frequency: 'monthly', retention: 3 } }],
        ['monitoring that is not a boolean', { monitoring: 'yes' }],
      ])('PATCH with %s → 400', async (_label, body) => {
        const before = await getInstance(server, key, id);
        expectError(
          await server.request('PATCH', `/v1/instances/${id}`, { key, body }),
          400,
          'invalid_request',
        );
        expect(await getInstance(server, key, id)).toEqual(before);
      });

      it.each([
        ['the same type', 'compute-4x', {}],
        ['a smaller root disk (compute-4x → compute-2x)', 'compute-2x', {}],
        ['an unknown type', 'compute-3x', { allowed_values: TYPE_NAMES }],
      ])('resize to %s → 400', async (_label, instanceType, extra) => {
        const error = expectError(
          await act(server, key, id, 'resize', { instance_type: instanceType }),
          400,
          'invalid_request',
        );
        expect(error.details).toMatchObject({ field: 'instance_type', value: instanceType, ...extra });
      });

      it('resize without a type, or with an extra field → 400', async () => {
        expectError(await act(server, key, id, 'resize', {}), 400, 'invalid_request');
        expectError(
          await act(server, key, id, 'resize', { instance_type: 'compute-8x', force: true }),
          400,
          'invalid_request',
        );
      });

      it('resize to a GPU type with an image without GPU drivers → 400', async () => {
        const plain = await createRunning(server, key, { image: 'debian-12' });
        const error = expectError(
          await act(server, key, plain.id, 'resize', { instance_type: 'gpu-1x' }),
          400,
          'invalid_request',
        );
        expect(error.details).toMatchObject({ field: 'image', value: 'debian-12' });
      });

      it('stop with an unknown field → 400', async () => {
        expectError(await act(server, key, id, 'stop', { forced: true }), 400, 'invalid_request');
        expect((await getInstance(server, key, id)).status).toBe('running');
      });

      it('none of the refusals changed the instance', async () => {
        const one = await getInstance(server, key, id);
        expect(one).toMatchObject({
          status: 'running',
          instance_type: 'compute-4x',
          name: 'patch-me',
          region: 'us-east-1',
        });
      });
    });

    describe('ssh_keys', () => {
      it('takes ids and names and stores ids; an unknown one is 400 naming it', async () => {
        const owner = await account(server);
        const upload = async (name: string) => {
          const reply = await server.request('POST', '/v1/ssh-keys', {
            key: owner.key,
            body: { name, public_key: sshPublicKey() },
          });
          expect(reply.status, reply.text).toBe(201);
          return reply.body.data as Json;
        };
        const laptop = await upload('laptop');
        const desktop = await upload('desktop');
        const created = await createInstance(server, owner.key, { ssh_keys: [laptop.id, 'desktop'] });
        expect(created.ssh_keys).toEqual([laptop.id, desktop.id]);
        expect((await getInstance(server, owner.key, created.id)).ssh_keys).toEqual([laptop.id, desktop.id]);
        // The same key named twice (by id and by name) is installed once.
        const twice = await createInstance(server, owner.key, { ssh_keys: ['laptop', laptop.id] });
        expect(twice.ssh_keys).toEqual([laptop.id]);

        const before = await listTotal(server, owner.key);
        const error = expectError(
          await server.request('POST', '/v1/instances', {
            key: owner.key,
            body: { name: 'k', ...COMPUTE, ssh_keys: ['laptop', 'no-such-key'] },
          }),
          400,
          'invalid_request',
        );
        expect(error.details).toMatchObject({ field: 'ssh_keys', value: 'no-such-key' });
        expect(error.message).toContain('no-such-key');
        expect(await listTotal(server, owner.key)).toBe(before);

        // Another account's keys are unknown here, by id and by name.
        const other = await account(server);
        for (const ref of [laptop.id, 'laptop']) {
          const refused = expectError(
            await server.request('POST', '/v1/instances', {
              key: other.key,
              body: { name: 'k', ...COMPUTE, ssh_keys: [ref] },
            }),
            400,
            'invalid_request',
          );
          expect(refused.details).toMatchObject({ field: 'ssh_keys', value: ref });
        }
        expect(await listTotal(server, other.key)).toBe(0);
      });
    });
  });

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
      expect(await getInstance(server, key, running.id)).toEqual(patched);
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
    // The reconciler writes an instance's status guarded by the version it read (store/instances.ts
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

  describe('network', () => {
    it('GET /v1/instances/{id}/network shows addresses, DNS names and the private network', async () => {
      const { key } = await account(server);
      const instance = await createInstance(server, key, { region: 'us-west-2' });
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
        firewall_rules: [],
        private_traffic_free: true,
      });
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

  it('public IPv4 pool: a /29 hands out .2–.6, then 503; a delete releases the address for the next instance', async () => {
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
    const reused = await createInstance(server, other.key, west);
    expect(reused.public_ip).toBe('198.51.100.4');
    expectError(
      await server.request('POST', '/v1/instances', { key, body: { name: 'no-ip', ...COMPUTE, ...west } }),
      503,
      'service_unavailable',
    );
  });
});

describe.each(STORES)('Instance timings in simulated time (%s)', (store) => {
  const clock = new ManualClock();
  const server = serverForSuite({ store, clock, steppedJobs: true, env: { NIMBUS_SIM_SPEEDUP: '1' } });
  let key = '';
  beforeAll(async () => {
    key = (await account(server)).key;
  });

  const runDue = () => server.running.backends.jobs.runDue();
  /**
   * Moves the clock to `offsetMs` after `start`, running due jobs at every half second after `start` on
   * the way: every simulated duration is a multiple of that, so each change is seen the moment it settles.
   */
  async function runUntil(start: number, offsetMs: number): Promise<void> {
    const target = start + offsetMs;
    await runDue();
    while (clock.now().getTime() < target) {
      const now = clock.now().getTime();
      const nextTick = start + (Math.floor((now - start) / 500) + 1) * 500;
      clock.advance(Math.min(nextTick, target) - now);
      await runDue();
    }
  }
  const status = async (id: string) => (await getInstance(server, key, id)).status;

  it('boots in 8 s: starting at 7.9 s, running at 8 s, with the event at that time', async () => {
    const t0 = clock.now().getTime();
    const created = await createInstance(server, key);
    await runUntil(t0, 7_900);
    expect(await status(created.id)).toBe('starting');
    await runUntil(t0, 8_000);
    expect(await status(created.id)).toBe('running');
    const started = (await eventsOf(server, key, created.id)).find((e) => e.type === 'instance.started');
    expect(started?.timestamp).toBe(new Date(t0 + 8_000).toISOString());
  });

  it('stops in 5 s and starts again in 8 s', async () => {
    const created = await createInstance(server, key);
    await runUntil(clock.now().getTime(), 8_000);
    expect(await status(created.id)).toBe('running');
    let t0 = clock.now().getTime();
    expect((await act(server, key, created.id, 'stop')).status).toBe(202);
    await runUntil(t0, 4_900);
    expect(await status(created.id)).toBe('stopping');
    await runUntil(t0, 5_000);
    expect(await status(created.id)).toBe('stopped');
    t0 = clock.now().getTime();
    expect((await act(server, key, created.id, 'start')).status).toBe(202);
    await runUntil(t0, 7_900);
    expect(await status(created.id)).toBe('starting');
    await runUntil(t0, 8_000);
    expect(await status(created.id)).toBe('running');
  });

  it('restarts through stopping (5 s) and starting (8 s) to running', async () => {
    const created = await createInstance(server, key);
    await runUntil(clock.now().getTime(), 8_000);
    const t0 = clock.now().getTime();
    expect((await act(server, key, created.id, 'restart')).status).toBe(202);
    await runUntil(t0, 4_500);
    expect(await status(created.id)).toBe('stopping');
    await runUntil(t0, 5_000);
    expect(await status(created.id)).toBe('starting');
    await runUntil(t0, 12_900);
    expect(await status(created.id)).toBe('starting');
    await runUntil(t0, 13_000);
    expect(await status(created.id)).toBe('running');
    expect((await eventsOf(server, key, created.id)).at(-1)).toMatchObject({
      type: 'instance.restarted',
      timestamp: new Date(t0 + 13_000).toISOString(),
    });
  });

  it('a forced stop in the middle of a resize still finishes the change, stopped, and reports it', async () => {
    const created = await createInstance(server, key, { instance_type: 'compute-2x' });
    await runUntil(clock.now().getTime(), 8_000);
    const t0 = clock.now().getTime();
    expect((await act(server, key, created.id, 'resize', { instance_type: 'compute-4x' })).status).toBe(202);
    await runUntil(t0, 10_000);
    const forced = await act(server, key, created.id, 'stop', { force: true });
    expect(forced.status).toBe(202);
    expect(forced.body.data.status).toBe('stopped');
    await runUntil(t0, 60_000);
    const after = await getInstance(server, key, created.id);
    expect(after).toMatchObject({ status: 'stopped', instance_type: 'compute-4x', storage_gb: 100 });
    const types = (await eventsOf(server, key, created.id)).map((e) => e.type);
    expect(types.slice(-2)).toEqual(['instance.stopped', 'instance.resized']);
  });

  it('a resize of a running instance is 30–60 s of downtime (5 s stop + 25 s resize + 8 s boot)', async () => {
    const created = await createInstance(server, key, { instance_type: 'compute-2x' });
    await runUntil(clock.now().getTime(), 8_000);
    expect(await status(created.id)).toBe('running');
    const t0 = clock.now().getTime();
    expect((await act(server, key, created.id, 'resize', { instance_type: 'compute-4x' })).status).toBe(202);
    await runUntil(t0, 4_900);
    expect(await status(created.id)).toBe('stopping');
    await runUntil(t0, 29_900);
    expect(await status(created.id)).not.toBe('running');
    await runUntil(t0, 37_900);
    expect(await status(created.id)).toBe('starting');
    await runUntil(t0, 38_000);
    const resized = await getInstance(server, key, created.id);
    expect(resized).toMatchObject({ status: 'running', instance_type: 'compute-4x', storage_gb: 100 });
    const event = (await eventsOf(server, key, created.id)).at(-1);
    expect(event?.type).toBe('instance.resized');
    const downtimeMs = Date.parse(event?.timestamp) - t0;
    expect(downtimeMs).toBeGreaterThanOrEqual(30_000);
    expect(downtimeMs).toBeLessThanOrEqual(60_000);
  });

  it('a resize of a stopped instance takes 25 s and leaves it stopped', async () => {
    const created = await createInstance(server, key, { instance_type: 'compute-2x' });
    await runUntil(clock.now().getTime(), 8_000);
    expect((await act(server, key, created.id, 'stop')).status).toBe(202);
    await runUntil(clock.now().getTime(), 5_000);
    expect(await status(created.id)).toBe('stopped');
    const t0 = clock.now().getTime();
    expect((await act(server, key, created.id, 'resize', { instance_type: 'memory-2x' })).status).toBe(202);
    await runUntil(t0, 25_000);
    const event = (await eventsOf(server, key, created.id)).at(-1);
    expect(event).toMatchObject({ type: 'instance.resized', timestamp: new Date(t0 + 25_000).toISOString() });
    expect(await getInstance(server, key, created.id)).toMatchObject({
      status: 'stopped',
      instance_type: 'memory-2x',
    });
  });

  it('a stuck-starting instance is still starting an hour later; a forced stop is immediate', async () => {
    const created = await createInstance(server, key, fault('stuck-starting'));
    await runUntil(clock.now().getTime(), 10_000);
    clock.advance(3_600_000);
    await runDue();
    expect(await status(created.id)).toBe('starting');
    const forced = await act(server, key, created.id, 'stop', { force: true });
    expect(forced.body.data.status).toBe('stopped');
    expect(await status(created.id)).toBe('stopped');
    await runDue();
    expect(await status(created.id)).toBe('stopped');
  });

  it('every action on a deleting instance is 409; the jobs then remove it', async () => {
    const created = await createInstance(server, key);
    await runUntil(clock.now().getTime(), 8_000);
    const del = await server.request('DELETE', `/v1/instances/${created.id}`, { key });
    expect(del.status, del.text).toBe(202);
    expect(await status(created.id)).toBe('deleting');
    const attempts: [InstanceAction, () => Promise<Reply>][] = [
      ['start', () => act(server, key, created.id, 'start')],
      ['stop', () => act(server, key, created.id, 'stop')],
      ['force_stop', () => act(server, key, created.id, 'stop', { force: true })],
      ['restart', () => act(server, key, created.id, 'restart')],
      ['resize', () => act(server, key, created.id, 'resize', { instance_type: 'compute-2x' })],
      [
        'update',
        () => server.request('PATCH', `/v1/instances/${created.id}`, { key, body: { name: 'late' } }),
      ],
      ['delete', () => server.request('DELETE', `/v1/instances/${created.id}`, { key })],
    ];
    for (const [action, attempt] of attempts) {
      const error = expectError(await attempt(), 409, 'conflict');
      expect(error.details, action).toEqual({
        current_status: 'deleting',
        allowed_statuses: [...ALLOWED_FROM[action]],
      });
    }
    expect(attempts.map(([action]) => action).sort()).toEqual(Object.keys(ALLOWED_FROM).sort());
    await runDue();
    expectError(await server.request('GET', `/v1/instances/${created.id}`, { key }), 404, 'not_found');
  });
});
