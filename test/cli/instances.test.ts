/**
 * `nimbus instances …` as a child process against the real HTTPS server (self-signed certificate,
 * trusted through NIMBUS_CA_FILE): the newcomer's path of issue 17 (create with a key file and --wait,
 * see it in a table, script it with -o json), every instance command, and the exit code of each class
 * of failure. The simulator runs at NIMBUS_SIM_SPEEDUP=1000 (an 8 ms boot), so --wait is quick.
 */
import { generateKeyPairSync } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { formatSshPublicKey } from '../../src/resources/ssh-keys/rules.js';
import { type Cli, cliFor, ensureBuilt, expectErrorLine } from '../helpers/cli.js';
import { account } from '../helpers/common.js';
import { serverForSuite } from '../helpers/server.js';

// Each test runs bin/nimbus several times (about a second each, far more on a loaded machine).
vi.setConfig({ testTimeout: 180_000 });

const SHAPE = ['--type', 'compute-2x', '--region', 'us-east-1', '--image', 'ubuntu-24.04'];
const FAULT = 'nimbus.sim/fault';

describe('nimbus instances', () => {
  const server = serverForSuite();
  let cli: Cli;
  let keyFile: string;

  beforeAll(async () => {
    ensureBuilt();
    cli = cliFor(server, (await account(server)).key);
    // The user's own key pair, where ssh-keygen would have put it.
    mkdirSync(path.join(cli.home, '.ssh'), { mode: 0o700 });
    keyFile = path.join(cli.home, '.ssh', 'id_ed25519.pub');
    writeFileSync(keyFile, `${formatSshPublicKey(generateKeyPairSync('ed25519').publicKey, 'me@laptop')}\n`);
  }, 180_000);

  it('creates web-1 from a key file with --wait, shows it running in a table, and as JSON', async () => {
    const created = await cli.run('instances', 'create', 'web-1', ...SHAPE, '--ssh-key', keyFile, '--wait');
    expect(created.code, created.stderr).toBe(0);
    // The key file was uploaded once, under its comment; the wait ended in running with the time taken.
    expect(created.stderr).toMatch(/Added SSH key me-laptop \(sshk_/);
    expect(created.stderr).toMatch(/ins_\w+ is running after \d+\.\d s/);
    expect(created.stdout).toMatch(/^status\s+running$/m);
    expect(created.stdout).toMatch(/^login_user\s+lambda$/m);

    const table = await cli.run('instances', 'list');
    expect(table.code).toBe(0);
    const [header, ...rows] = table.stdout.trimEnd().split('\n');
    expect(header!.split(/\s{2,}/)).toEqual(['ID', 'NAME', 'STATUS', 'TYPE', 'REGION', 'PUBLIC IP']);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatch(/^ins_\w+\s+web-1\s+running\s+compute-2x\s+us-east-1\s+\d+\.\d+\.\d+\.\d+$/);
    // Not a terminal: no colour codes.
    expect(table.stdout).not.toContain('\u001b[');

    const [instance] = await cli.json<any[]>('instances', 'list');
    expect(instance).toMatchObject({ name: 'web-1', status: 'running', instance_type: 'compute-2x' });
    const keys = await cli.json<any[]>('ssh-keys', 'list');
    expect(instance.ssh_keys).toEqual([keys[0].id]);

    // The same key file again is matched by its key material, not uploaded twice.
    const second = await cli.run(
      'instances',
      'create',
      'web-2',
      ...SHAPE,
      '--ssh-key',
      keyFile,
      '-o',
      'json',
    );
    expect(second.code, second.stderr).toBe(0);
    expect(second.stderr).not.toMatch(/Added SSH key/);
    expect(JSON.parse(second.stdout).ssh_keys).toEqual([keys[0].id]);
    expect(await cli.json<any[]>('ssh-keys', 'list')).toHaveLength(1);
    await cli.run('instances', 'delete', 'web-2', '--wait');
  });

  it('creates with every field of the instance record', async () => {
    const userData = path.join(cli.home, 'cloud-init.yaml');
    writeFileSync(userData, '#cloud-config\npackages: [nginx]\n');
    const created = await cli.json(
      'instances',
      'create',
      'full-1',
      ...SHAPE,
      '--tag',
      'env=prod',
      '--tag',
      'team=web',
      '--user-data-file',
      userData,
      '--encryption-key',
      'kms-key-1',
      '--firewall-preset',
      'web',
      '--no-monitoring',
      '--backup',
      'daily:7',
      '--wait',
    );
    expect(created).toMatchObject({
      name: 'full-1',
      status: 'running',
      tags: { env: 'prod', team: 'web' },
      user_data: '#cloud-config\npackages: [nginx]\n',
      encryption_key_id: 'kms-key-1',
      firewall_preset: 'web',
      monitoring: false,
      backup_schedule: { frequency: 'daily', retention: 7 },
    });
    const filtered = await cli.json<any[]>('instances', 'list', '--tag', 'env:prod', '--status', 'running');
    expect(filtered.map((i) => i.name)).toEqual(['full-1']);
  });

  it('gets by id or name, updates, and reads the network', async () => {
    const byName = await cli.json('instances', 'get', 'web-1');
    const byId = await cli.json('instances', 'get', byName.id);
    expect(byId.id).toBe(byName.id);
    const yaml = await cli.run('instances', 'get', 'web-1', '-o', 'yaml');
    expect(yaml.stdout).toMatch(/^name: web-1$/m);

    const updated = await cli.json(
      'instances',
      'update',
      'web-1',
      '--tag',
      'role=frontend',
      '--backup',
      'weekly:4',
    );
    expect(updated).toMatchObject({
      tags: { role: 'frontend' },
      backup_schedule: { frequency: 'weekly', retention: 4 },
    });
    const cleared = await cli.json('instances', 'update', 'web-1', '--no-backup');
    expect(cleared.backup_schedule).toBeNull();

    const network = await cli.json('instances', 'network', 'web-1');
    expect(network).toMatchObject({ instance_id: byName.id, public_ip: byName.public_ip });
  });

  it('stops, starts, restarts, resizes and deletes, each followed with --wait', async () => {
    expect((await cli.json('instances', 'stop', 'web-1', '--wait')).status).toBe('stopped');
    // Resizing a stopped instance keeps it stopped: --wait follows it there.
    const resized = await cli.json('instances', 'resize', 'web-1', '--type', 'compute-4x', '--wait');
    expect(resized).toMatchObject({ status: 'stopped', instance_type: 'compute-4x' });
    expect((await cli.json('instances', 'start', 'web-1', '--wait')).status).toBe('running');
    expect((await cli.json('instances', 'restart', 'web-1', '--wait')).status).toBe('running');
    const grown = await cli.json('instances', 'resize', 'web-1', '--type', 'compute-8x', '--wait');
    expect(grown).toMatchObject({ status: 'running', instance_type: 'compute-8x' });

    const deleted = await cli.run('instances', 'delete', 'web-1', '--wait');
    expect(deleted.code, deleted.stderr).toBe(0);
    expect(deleted.stdout).toMatch(/^ins_\w+ deleted$/m);
    expectErrorLine(await cli.run('instances', 'get', 'web-1'), 4, 'not_found');
  });

  it('stop --force gets a stuck instance out; --wait on it times out with exit code 5', async () => {
    const stuck = await cli.run(
      'instances',
      'create',
      'stuck-1',
      ...SHAPE,
      '--tag',
      `${FAULT}=stuck-starting`,
      '--wait',
      '--timeout',
      '1',
    );
    expect(stuck.code, stuck.stderr).toBe(5);
    expect(stuck.stderr.trim().split('\n').at(-1)).toMatch(
      /^Error: ins_\w+ did not become running within 1000 ms \(last seen: starting\)$/,
    );
    const forced = await cli.json('instances', 'stop', 'stuck-1', '--force', '--wait');
    expect(forced.status).toBe('stopped');
  });

  it('a boot that ends in error fails --wait at once with exit code 1', async () => {
    const started = Date.now();
    const failed = await cli.run(
      'instances',
      'create',
      'broken-1',
      ...SHAPE,
      '--tag',
      `${FAULT}=boot-error`,
      '--wait',
      '--timeout',
      '60',
    );
    expect(failed.code, failed.stderr).toBe(1);
    expect(failed.stderr).toMatch(
      /^Error: ins_\w+ is error, so it will not become running \(code: resource_error\)$/m,
    );
    expect(Date.now() - started).toBeLessThan(30_000);
  });

  it('exit codes: usage 2, API error 1, authentication 3, not found 4', async () => {
    // Usage: commander names the problem; nothing reaches the server.
    const missing = await cli.run(
      'instances',
      'create',
      'x',
      '--region',
      'us-east-1',
      '--image',
      'ubuntu-24.04',
    );
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/required option '--type <instance-type>' not specified/);
    expect((await cli.run('instances', 'create', 'x', ...SHAPE, '--colour', 'red')).code).toBe(2);
    expect((await cli.run('instances', 'lst')).stderr).toMatch(/Did you mean one of list/);
    expect((await cli.run('instances', 'list', '--limit', 'ten')).code).toBe(2);
    expect((await cli.run('instances', 'list', '-o', 'xml')).code).toBe(2);
    expect((await cli.run('launch')).code).toBe(2);

    // API error: one line with code, message, details and request id.
    const invalid = await cli.run(
      'instances',
      'create',
      'x',
      '--type',
      'compute-3x',
      '--region',
      'us-east-1',
      '--image',
      'ubuntu-24.04',
    );
    expectErrorLine(invalid, 1, 'invalid_request');
    expect(invalid.stderr).toMatch(
      /details: \{"field":"instance_type","value":"compute-3x","allowed_values":\[/,
    );
    expect(invalid.stderr).toMatch(/request_id: req_\w+\)$/m);
    expect(invalid.stdout).toBe('');
    const stopped = await cli.json('instances', 'create', 'conflict-1', ...SHAPE, '--wait');
    await cli.run('instances', 'stop', stopped.id, '--wait');
    expectErrorLine(await cli.run('instances', 'stop', stopped.id), 1, 'conflict');

    // Authentication: a wrong key, no key at all, a key without the permission.
    expectErrorLine(
      await cli.with({ NIMBUS_API_KEY: 'nmb_wrong' }).run('instances', 'list'),
      3,
      'authentication_failed',
    );
    const noKey = await cli.with({ NIMBUS_API_KEY: undefined }).run('instances', 'list');
    expect(noKey.code).toBe(3);
    expect(noKey.stderr).toMatch(/Not logged in .*nimbus login.*NIMBUS_API_KEY/);
    const readOnly = await cli.json('keys', 'create', 'read-only', '--permission', 'account:read');
    expectErrorLine(
      await cli.with({ NIMBUS_API_KEY: readOnly.key }).run('instances', 'list'),
      3,
      'forbidden',
    );

    // Not found.
    expectErrorLine(await cli.run('instances', 'get', 'ins_00000000000000000000000000'), 4, 'not_found');
    expectErrorLine(await cli.run('instances', 'delete', 'no-such-name'), 4, 'not_found');
  });

  it('an untrusted server certificate is refused (exit 3) until it is trusted', async () => {
    const untrusted = await cli.with({ NIMBUS_CA_FILE: undefined }).run('account', 'get');
    expect(untrusted.code).toBe(3);
    expect(untrusted.stderr).toMatch(
      /^Error: cannot reach https:\/\/127\.0\.0\.1:\d+: .*self-signed.*nimbus login/m,
    );
  });
});
