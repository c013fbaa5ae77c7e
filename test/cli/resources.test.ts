/**
 * Every other command group as a child process against the real HTTPS server: ssh-keys, keys, account,
 * events, catalog, volumes, snapshots, firewall, vpn (the wg-quick file written 0600 with the user's
 * own private key) and webhooks (a real HTTPS receiver gets the test delivery).
 */
import { createPublicKey, generateKeyPairSync } from 'node:crypto';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { formatSshPublicKey } from '../../src/resources/ssh-keys/rules.js';
import { type Cli, cliFor, ensureBuilt, expectErrorLine } from '../helpers/cli.js';
import { account, waitFor } from '../helpers/common.js';
import { serverForSuite } from '../helpers/server.js';
import { type Receiver, startReceiver } from '../helpers/webhook-receiver.js';

// Each test runs bin/nimbus several times (about a second each, far more on a loaded machine).
vi.setConfig({ testTimeout: 180_000 });

const SHAPE = ['--type', 'compute-2x', '--region', 'us-east-1', '--image', 'ubuntu-24.04'];

let receiver: Receiver;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver?.close();
});

describe('nimbus resource groups', () => {
  const server = serverForSuite({
    env: {
      NIMBUS_WEBHOOK_ALLOW_PRIVATE: '1',
      get NIMBUS_WEBHOOK_CA_FILE() {
        return receiver.caFile;
      },
    },
  });
  let cli: Cli;
  let instanceId: string;

  beforeAll(async () => {
    ensureBuilt();
    cli = cliFor(server, (await account(server)).key);
    instanceId = (await cli.json('instances', 'create', 'app-1', ...SHAPE, '--wait')).id;
  }, 180_000);

  it('ssh-keys: add from a file or as text, list, get by name, delete', async () => {
    const file = path.join(cli.home, 'id_ed25519.pub');
    writeFileSync(file, `${formatSshPublicKey(generateKeyPairSync('ed25519').publicKey, 'dev@box')}\n`);
    const added = await cli.json('ssh-keys', 'add', '--file', file);
    expect(added).toMatchObject({ name: 'dev-box', fingerprint: expect.stringMatching(/^SHA256:/) });
    const text = formatSshPublicKey(generateKeyPairSync('ed25519').publicKey);
    await cli.json('ssh-keys', 'add', '--name', 'ci', '--public-key', text);
    const table = await cli.run('ssh-keys', 'list', '--no-headers');
    expect(
      table.stdout
        .trim()
        .split('\n')
        .map((line) => line.split(/\s+/)[1])
        .sort(),
    ).toEqual(['ci', 'dev-box']);
    expect((await cli.json('ssh-keys', 'get', 'ci')).public_key).toBe(text);
    const removed = await cli.run('ssh-keys', 'delete', 'ci');
    expect(removed.stdout).toMatch(/^Deleted SSH key sshk_\w+$/m);
    expect(await cli.json<any[]>('ssh-keys', 'list')).toHaveLength(1);
    expect((await cli.run('ssh-keys', 'add')).code).toBe(2);
  });

  it('keys: create shows the value once, list and get never do, delete revokes it', async () => {
    const created = await cli.run('keys', 'create', 'ci', '--permission', 'instances:read');
    expect(created.code, created.stderr).toBe(0);
    const value = /^key\s+(nmb_\w+)$/m.exec(created.stdout)?.[1];
    expect(value).toBeDefined();
    expect(created.stderr).toMatch(/not shown again/);
    const listed = await cli.run('keys', 'list', '-o', 'wide');
    expect(listed.stdout).toMatch(/^key_\w+\s+ci\s+nmb_\w+\s+instances:read/m);
    expect(listed.stdout).not.toContain(value);
    const id = (await cli.json<any[]>('keys', 'list')).find((key) => key.name === 'ci').id;
    expect((await cli.json('keys', 'get', id)).permissions).toEqual(['instances:read']);
    const asCi = cli.with({ NIMBUS_API_KEY: value });
    expect((await asCi.run('instances', 'list')).code).toBe(0);
    expect((await cli.run('keys', 'delete', id)).code).toBe(0);
    expectErrorLine(await asCi.run('instances', 'list'), 3, 'authentication_failed');
  });

  it('account: get, update, quota, rate-limit; whoami', async () => {
    expect((await cli.json('account', 'get')).plan).toBe('professional');
    expect((await cli.json('account', 'update', '--company', 'Example Ltd')).company).toBe('Example Ltd');
    const quota = await cli.run('account', 'quota');
    expect(quota.stdout).toMatch(/^QUOTA\s+USED\s+LIMIT$/m);
    expect(quota.stdout).toMatch(/^instances\s+1\s+50$/m);
    const rate = await cli.json('account', 'rate-limit');
    expect(rate).toMatchObject({
      limit: expect.any(Number),
      remaining: expect.any(Number),
      burst: expect.any(Number),
    });
    const whoami = await cli.json('whoami');
    expect(whoami).toMatchObject({ plan: 'professional', url: server.url });
    expect(whoami.key).toMatch(/^nmb_\w{4}… \(NIMBUS_API_KEY\)$/);
  });

  it('events: list with filters, get, types', async () => {
    const events = await cli.json<any[]>('events', 'list', '--resource', instanceId, '--all');
    expect(events.map((event) => event.type)).toEqual(
      expect.arrayContaining(['instance.created', 'instance.started']),
    );
    expect((await cli.json('events', 'get', events[0].id)).id).toBe(events[0].id);
    const created = await cli.json<any[]>('events', 'list', '--type', 'instance.created');
    expect(created.every((event) => event.type === 'instance.created')).toBe(true);
    const types = await cli.run('events', 'types');
    expect(types.stdout).toMatch(/^instance\.created\s+\S/m);

    // Who did it: the CLI's key and address for the create, the system for the boot.
    const keyId = events.find((event) => event.type === 'instance.created').actor.id as string;
    const table = (await cli.run('events', 'list', '--resource', instanceId)).stdout;
    expect(table).toMatch(/^ID\s+TYPE\s+RESOURCE\s+TIME\s+ACTOR$/m);
    expect(table).toMatch(
      new RegExp(`^evt_\\w+\\s+instance\\.created\\s.*\\s${keyId} from 127\\.0\\.0\\.1$`, 'm'),
    );
    expect(table).toMatch(/^evt_\w+\s+instance\.started\s.*\ssystem$/m);
    const byKey = await cli.json<any[]>('events', 'list', '--actor', keyId, '--all');
    expect(byKey.map((event) => event.type)).toContain('instance.created');
    expect(byKey.every((event) => event.actor.id === keyId)).toBe(true);
    const bySystem = await cli.json<any[]>('events', 'list', '--actor-type', 'system', '--all');
    expect(bySystem.map((event) => event.type)).toContain('instance.started');
  });

  it('catalog: types, regions, images', async () => {
    const gpu = await cli.json<any[]>(
      'catalog',
      'types',
      '--family',
      'gpu',
      '--sort',
      'price_per_hour',
      '--order',
      'asc',
    );
    expect(gpu[0]).toMatchObject({ name: 'gpu-1x', price_per_hour: 2.5 });
    const types = await cli.run('catalog', 'types', '--all');
    expect(types.stdout.trim().split('\n')).toHaveLength(1 + 20);
    expect(types.stdout).toMatch(/^compute-2x\s+compute\s+2\s+4\s+50\s+-\s+0\.1$/m);
    const regions = await cli.json<any[]>('catalog', 'regions');
    expect(regions.map((region) => region.name).sort()).toEqual([
      'ap-northeast-1',
      'eu-central-1',
      'us-east-1',
      'us-west-2',
    ]);
    expect((await cli.json<any[]>('catalog', 'images')).map((image) => image.name)).toContain('ubuntu-24.04');
  });

  it('volumes: create attached with --wait, list, update, detach, resize, attach, delete', async () => {
    const volume = await cli.json(
      'volumes',
      'create',
      'data-1',
      '--size',
      '100',
      '--region',
      'us-east-1',
      '--filesystem',
      'ext4',
      '--instance',
      'app-1',
      '--wait',
    );
    expect(volume).toMatchObject({ status: 'in-use', instance_id: instanceId, size_gb: 100 });
    const listed = await cli.run('volumes', 'list', '--kind', 'data');
    expect(listed.stdout).toMatch(/^vol_\w+\s+data-1\s+in-use\s+100\s+us-east-1\s+ins_\w+$/m);
    expect((await cli.json('volumes', 'update', 'data-1', '--tag', 'tier=gold')).tags).toEqual({
      tier: 'gold',
    });
    expect((await cli.json('volumes', 'detach', 'data-1', '--wait')).status).toBe('available');
    expect(await cli.json('volumes', 'resize', 'data-1', '--size', '200', '--wait')).toMatchObject({
      status: 'available',
      size_gb: 200,
    });
    expect((await cli.json('volumes', 'attach', 'data-1', '--instance', instanceId, '--wait')).status).toBe(
      'in-use',
    );
    expectErrorLine(await cli.run('volumes', 'delete', 'data-1'), 1, 'conflict');
    await cli.json('volumes', 'detach', 'data-1', '--wait');
    const deleted = await cli.run('volumes', 'delete', 'data-1', '--wait');
    expect(deleted.code, deleted.stderr).toBe(0);
    expectErrorLine(await cli.run('volumes', 'get', volume.id), 4, 'not_found');
  });

  it('snapshots: create from an instance with --wait, list, update, restore into a volume, delete', async () => {
    const snapshot = await cli.json('snapshots', 'create', 'snap-1', '--instance', 'app-1', '--wait');
    expect(snapshot).toMatchObject({ status: 'available', source_instance_id: instanceId });
    expect((await cli.json<any[]>('snapshots', 'list', '--instance', instanceId)).map((s) => s.id)).toEqual([
      snapshot.id,
    ]);
    expect((await cli.json('snapshots', 'update', snapshot.id, '--name', 'keep')).name).toBe('keep');
    const restored = await cli.json('snapshots', 'restore', snapshot.id, '--name', 'from-snap');
    expect(restored.volume).toMatchObject({ name: 'from-snap' });
    await waitFor('the restored volume', async () => {
      const volume = await cli.json('volumes', 'get', restored.volume.id);
      return volume.status === 'available' ? volume : undefined;
    });
    expect((await cli.run('snapshots', 'delete', snapshot.id, '--wait')).code).toBe(0);
    expect((await cli.run('snapshots', 'create', 'x')).code).toBe(2);
  });

  it('firewall: create, list, update, check a packet, delete', async () => {
    const rule = await cli.json(
      'firewall',
      'create',
      'allow-https',
      '--direction',
      'inbound',
      '--action',
      'allow',
      '--protocol',
      'tcp',
      '--port',
      '443',
      '--source',
      '0.0.0.0/0',
      '--region',
      'us-east-1',
      '--target-instance',
      instanceId,
    );
    expect(rule).toMatchObject({
      ports: '443',
      sources: ['0.0.0.0/0'],
      targets: { instance_ids: [instanceId] },
    });
    const table = await cli.run('firewall', 'list');
    expect(table.stdout).toMatch(
      /^fwr_\w+\s+allow-https\s+inbound\s+allow\s+tcp\s+443\s+0\.0\.0\.0\/0\s+\d+$/m,
    );
    expect((await cli.json('firewall', 'update', rule.id, '--port', '8443')).ports).toBe('8443');
    const check = await cli.json(
      'firewall',
      'check',
      'app-1',
      '--direction',
      'inbound',
      '--protocol',
      'tcp',
      '--port',
      '8443',
      '--address',
      '203.0.113.9',
    );
    expect(check).toMatchObject({ verdict: 'allow', matched_rule: { id: rule.id } });
    expect((await cli.json('firewall', 'update', rule.id, '--disable')).enabled).toBe(false);
    expect((await cli.run('firewall', 'delete', rule.id)).stdout).toMatch(/Deleted firewall rule fwr_/);
    expectErrorLine(await cli.run('firewall', 'get', rule.id), 4, 'not_found');
  });

  it('vpn: create with --wait, add a peer with the own private key, write the wg-quick file 0600, delete', async () => {
    const vpn = await cli.json('vpn', 'create', 'office', '--region', 'us-east-1', '--wait');
    expect(vpn.status).toBe('active');
    // The user's private key, as `wg genkey` writes it; only its public half may reach the server.
    const pair = generateKeyPairSync('x25519');
    const privateKey = Buffer.from(pair.privateKey.export({ format: 'jwk' }).d!, 'base64url').toString(
      'base64',
    );
    const publicKey = Buffer.from(
      createPublicKey(pair.privateKey).export({ format: 'jwk' }).x!,
      'base64url',
    ).toString('base64');
    writeFileSync(path.join(cli.home, 'client.key'), `${privateKey}\n`, { mode: 0o600 });
    const conf = path.join(cli.home, 'wg0.conf');
    const added = await cli.run(
      'vpn',
      'peers',
      'add',
      vpn.id,
      'laptop',
      '--private-key-file',
      path.join(cli.home, 'client.key'),
      '--config-file',
      conf,
    );
    expect(added.code, added.stderr).toBe(0);
    expect(added.stdout).toMatch(new RegExp(`^public_key\\s+${publicKey.replace(/[+/]/g, '\\$&')}$`, 'm'));
    expect(added.stdout).not.toContain(privateKey);
    expect(statSync(conf).mode & 0o777).toBe(0o600);
    const file = readFileSync(conf, 'utf8');
    expect(file).toContain(`PrivateKey = ${privateKey}`);
    expect(file).toContain(`PublicKey = ${vpn.server_public_key}`);

    const peers = await cli.json<any[]>('vpn', 'peers', 'list', vpn.id);
    expect(peers).toEqual([expect.objectContaining({ name: 'laptop', public_key: publicKey })]);
    const again = await cli.run('vpn', 'peers', 'config', vpn.id, peers[0].id);
    expect(again.stdout).toMatch(/^\[Interface\]$/m);
    // A peer without a key of its own gets a generated pair, in the file only.
    const phone = path.join(cli.home, 'phone.conf');
    expect((await cli.run('vpn', 'peers', 'add', vpn.id, 'phone', '--config-file', phone)).code).toBe(0);
    expect(readFileSync(phone, 'utf8')).toMatch(/^PrivateKey = [A-Za-z0-9+/]{43}=$/m);

    expect((await cli.json('vpn', 'update', vpn.id, '--name', 'hq')).name).toBe('hq');
    expect((await cli.run('vpn', 'peers', 'remove', vpn.id, peers[0].id)).code).toBe(0);
    expect((await cli.run('vpn', 'delete', vpn.id, '--wait')).code).toBe(0);
    expectErrorLine(await cli.run('vpn', 'get', vpn.id), 4, 'not_found');
  });

  it('webhooks: create, test delivery reaches the receiver, deliveries, update, rotate-secret, delete', async () => {
    const url = `${receiver.origin}/cli-hook`;
    const hook = await cli.json(
      'webhooks',
      'create',
      '--url',
      url,
      '--event',
      'instance.created',
      '--secret',
      'a-secret-of-24-chars-xx',
    );
    expect(hook).toMatchObject({ url, events: ['instance.created'] });
    expect((await cli.run('webhooks', 'list')).stdout).toMatch(
      new RegExp(`^whk_\\w+\\s+${url.replace(/[.]/g, '\\.')}\\s+instance\\.created`, 'm'),
    );
    expect((await cli.run('webhooks', 'test', hook.id)).code).toBe(0);
    await waitFor('the test delivery', () =>
      receiver.receivedAt('/cli-hook').length > 0 ? true : undefined,
    );
    const deliveries = await waitFor('a succeeded delivery', async () => {
      const listed = await cli.json<any[]>('webhooks', 'deliveries', hook.id, '--status', 'succeeded');
      return listed.length > 0 ? listed : undefined;
    });
    expect(deliveries[0].event_type).toBe('webhook.test');
    expect((await cli.run('webhooks', 'redeliver', hook.id, deliveries[0].id)).code).toBe(0);
    expect((await cli.json('webhooks', 'update', hook.id, '--event', '*')).events).toEqual(['*']);
    expect((await cli.json('webhooks', 'rotate-secret', hook.id)).secret).toEqual(expect.any(String));
    expect((await cli.run('webhooks', 'delete', hook.id)).code).toBe(0);
    expectErrorLine(await cli.run('webhooks', 'get', hook.id), 4, 'not_found');
  });
});
