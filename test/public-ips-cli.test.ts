/**
 * `nimbus public-ips …` as a child process against the real HTTPS server: create, list (table and
 * filters), get and assign by name, unassign, update --keep, release (409 while assigned, exit 1), and
 * `instances create --no-public-ip`.
 */
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { type Cli, cliFor, ensureBuilt, expectErrorLine } from './helpers/cli.js';
import { account } from './helpers/common.js';
import { serverForSuite } from './helpers/server.js';

// Each test runs bin/nimbus several times (about a second each, far more on a loaded machine).
vi.setConfig({ testTimeout: 180_000 });

const SHAPE = ['--type', 'compute-1x', '--region', 'us-east-1', '--image', 'ubuntu-24.04'];

describe('nimbus public-ips', () => {
  const server = serverForSuite();
  let cli: Cli;

  beforeAll(async () => {
    ensureBuilt();
    cli = cliFor(server, (await account(server)).key);
  }, 180_000);

  it('allocates, assigns by name, moves, keeps and releases', async () => {
    const ip = await cli.json(
      'public-ips',
      'create',
      '--region',
      'us-east-1',
      '--name',
      'front',
      '--tag',
      'env=prod',
    );
    expect(ip).toMatchObject({ name: 'front', instance_id: null, auto_delete: false, tags: { env: 'prod' } });
    const bare = await cli.json('instances', 'create', 'bare-1', ...SHAPE, '--no-public-ip');
    expect(bare.public_ip).toBeNull();
    const table = await cli.run('public-ips', 'list', '--assigned', 'false', '--no-headers');
    expect(table.stdout).toMatch(
      new RegExp(`^${ip.id}\\s+front\\s+${ip.address.replaceAll('.', '\\.')}\\s+us-east-1`, 'm'),
    );

    const assigned = await cli.json('public-ips', 'assign', 'front', '--instance', 'bare-1');
    expect(assigned).toMatchObject({ id: ip.id, instance_id: bare.id });
    expect((await cli.json('instances', 'get', 'bare-1')).public_ip).toBe(ip.address);
    expectErrorLine(await cli.run('public-ips', 'delete', 'front'), 1, 'conflict');

    const other = await cli.json('instances', 'create', 'web-1', ...SHAPE);
    const [own] = await cli.json<any[]>('public-ips', 'list', '--instance', other.id);
    expect(own).toMatchObject({ address: other.public_ip, auto_delete: true, name: 'web-1-ip' });
    expect((await cli.json('public-ips', 'update', own.id, '--keep')).auto_delete).toBe(false);
    expectErrorLine(await cli.run('public-ips', 'assign', ip.id, '--instance', 'web-1'), 1, 'conflict');

    expect((await cli.json('public-ips', 'unassign', 'front')).instance_id).toBeNull();
    expect((await cli.json('instances', 'get', 'bare-1')).public_ip).toBeNull();
    const removed = await cli.run('public-ips', 'delete', 'front');
    expect(removed.stdout).toMatch(/^Deleted public IP ip_\w+$/m);
    expectErrorLine(await cli.run('public-ips', 'get', ip.id), 4, 'not_found');
  });
});
