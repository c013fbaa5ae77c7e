/**
 * Instances over HTTPS, on both stores: what create, PATCH, resize and stop refuse (400 naming the field,
 * nothing changed) and accept at the limits, and SSH keys named on create.
 */
import { generateKeyPairSync } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { FAULT_TAG, FAULTS } from '../src/drivers/simulator/simulator.js';
import { IMAGES, INSTANCE_TYPES, REGION_NAMES } from '../src/resources/catalog/catalog.js';
import { formatSshPublicKey } from '../src/resources/ssh-keys/rules.js';
import { STORES } from './helpers/backends.js';
import { account, expectError } from './helpers/common.js';
import { act, COMPUTE, createInstance, createRunning, getInstance, listTotal } from './helpers/instances.js';
import { serverForSuite } from './helpers/server.js';

type Json = Record<string, any>;

function sshPublicKey(): string {
  return formatSshPublicKey(generateKeyPairSync('ed25519').publicKey, 'me@laptop');
}

describe.each(STORES)('Instances: validation (%s)', (store) => {
  const server = serverForSuite({ store });

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
});
