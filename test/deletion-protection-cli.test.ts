/**
 * Deletion protection in the CLI (issue 35 item 5), as a child process against the real HTTPS server:
 * `--protect` on create and `--no-protect` on update of instances, volumes and public IPs, the flag in
 * `get` and the wide list, and a refused delete (409 `conflict`, exit 1) that works once it is off.
 */
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { type Cli, cliFor, ensureBuilt, expectErrorLine } from './helpers/cli.js';
import { account } from './helpers/common.js';
import { serverForSuite } from './helpers/server.js';

// Each test runs bin/nimbus several times (about a second each, far more on a loaded machine).
vi.setConfig({ testTimeout: 180_000 });

const SHAPE = ['--type', 'compute-1x', '--region', 'us-east-1', '--image', 'ubuntu-24.04'];

describe('nimbus … --protect', () => {
  const server = serverForSuite();
  let cli: Cli;

  beforeAll(async () => {
    ensureBuilt();
    cli = cliFor(server, (await account(server)).key);
  }, 180_000);

  it('protects an instance, a volume and a public IP, refuses their delete, and lets go with --no-protect', async () => {
    const instance = await cli.json('instances', 'create', 'guarded-1', ...SHAPE, '--protect');
    expect(instance.protection).toEqual({ delete: true });
    const volume = await cli.json(
      'volumes',
      'create',
      'guarded-vol',
      '--size',
      '10',
      '--region',
      'us-east-1',
    );
    expect(volume.protection).toEqual({ delete: false });
    expect((await cli.json('volumes', 'update', 'guarded-vol', '--protect')).protection).toEqual({
      delete: true,
    });
    const ip = await cli.json(
      'public-ips',
      'create',
      '--region',
      'us-east-1',
      '--name',
      'guarded-ip',
      '--protect',
    );
    expect(ip.protection).toEqual({ delete: true });

    expect((await cli.json('instances', 'get', 'guarded-1')).protection).toEqual({ delete: true });
    const wide = await cli.run('public-ips', 'list', '-o', 'wide');
    expect(wide.stdout).toMatch(/PROTECTED/);
    expect(wide.stdout).toMatch(new RegExp(`^${ip.id}\\s.*\\btrue\\b`, 'm'));

    for (const [group, name] of [
      ['instances', 'guarded-1'],
      ['volumes', 'guarded-vol'],
      ['public-ips', 'guarded-ip'],
    ] as const) {
      const refused = await cli.run(group, 'delete', name);
      expectErrorLine(refused, 1, 'conflict');
      expect(refused.stderr).toContain('protection.delete is on');
      expect((await cli.json(group, 'update', name, '--no-protect')).protection).toEqual({ delete: false });
      expect((await cli.run(group, 'delete', name)).code).toBe(0);
    }
  });
});
