/**
 * README.md's "Use the CLI" section, run as written: its shell blocks in order, in one bash with
 * `set -euo pipefail`, against a real server, from a directory whose `data` is the server's data
 * directory (so `data/bootstrap-api-key` and `data/tls/cert.pem` are the ones the steps read), with
 * `nimbus` on the PATH and a home directory of its own holding an SSH key pair. The only change made to
 * the text is the server's address. Then the results are checked through the API.
 */
import { execFile } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { formatSshPublicKey } from '../../src/resources/ssh-keys/rules.js';
import { BIN, baseEnv, ensureBuilt, ROOT } from '../helpers/cli.js';
import { serverForSuite } from '../helpers/server.js';

/** The ```sh blocks of the README section under `heading`, in order. */
function shellBlocks(readme: string, heading: string): string[] {
  const start = readme.indexOf(`\n## ${heading}\n`);
  if (start === -1) throw new Error(`README.md has no "## ${heading}" section`);
  const end = readme.indexOf('\n## ', start + 1);
  const section = readme.slice(start, end === -1 ? undefined : end);
  // Blocks sit inside numbered steps, indented; the indent is taken off each line.
  return [...section.matchAll(/^( *)```sh\n([\s\S]*?)^\1```$/gm)].map(([, indent, body]) =>
    body!
      .split('\n')
      .map((line) => (line.startsWith(indent!) ? line.slice(indent!.length) : line))
      .join('\n')
      .trimEnd(),
  );
}

describe('README: Use the CLI', () => {
  const server = serverForSuite();
  const blocks = shellBlocks(readFileSync(path.join(ROOT, 'README.md'), 'utf8'), 'Use the CLI');
  let home = '';
  let work = '';

  beforeAll(() => {
    ensureBuilt();
    home = mkdtempSync(path.join(os.tmpdir(), 'nimbus-readme-home-'));
    work = mkdtempSync(path.join(os.tmpdir(), 'nimbus-readme-work-'));
    symlinkSync(server.config.dataDir, path.join(work, 'data'));
    // `nimbus` on the PATH, as `npm link` would put it.
    const bin = path.join(work, '.bin');
    mkdirSync(bin);
    writeFileSync(path.join(bin, 'nimbus'), `#!/bin/sh\nexec '${process.execPath}' '${BIN}' "$@"\n`);
    chmodSync(path.join(bin, 'nimbus'), 0o755);
    // The key pair `ssh-keygen -t ed25519` would have made.
    mkdirSync(path.join(home, '.ssh'), { mode: 0o700 });
    const { publicKey } = generateKeyPairSync('ed25519');
    writeFileSync(
      path.join(home, '.ssh', 'id_ed25519.pub'),
      `${formatSshPublicKey(publicKey, 'me@laptop')}\n`,
    );
  }, 180_000);

  it('has the steps the issue asks for: login, create with --wait, list, -o json, delete', () => {
    const text = blocks.join('\n');
    expect(text).toMatch(/^nimbus login .*--api-key-stdin/m);
    expect(text).toMatch(/^nimbus instances create web-1 .*\\\n.*--wait$/m);
    expect(text).toMatch(/^nimbus instances list$/m);
    expect(text).toContain('-o json');
    expect(text).toMatch(/^nimbus instances delete web-1 --wait$/m);
  });

  it('runs every block as written, in order, and leaves what the text says', async () => {
    const script = [
      'set -euo pipefail',
      ...blocks.map((block, index) => `echo "== block ${index + 1}" >&2\n${block}`),
    ]
      .join('\n')
      .replaceAll('https://localhost:8443', server.url);
    const env = { ...baseEnv(home), PATH: `${path.join(work, '.bin')}:${process.env.PATH}` };
    const result = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile('bash', ['-c', script], { cwd: work, env, timeout: 400_000 }, (error, stdout, stderr) =>
        resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });
    expect(result.code, `${result.stderr}\n${result.stdout}`).toBe(0);
    const { stdout, stderr } = result;

    // Logged in: the profile 0600, pinned to the certificate's fingerprint.
    const configFile = path.join(home, '.config', 'nimbus', 'config.json');
    expect(statSync(configFile).mode & 0o777).toBe(0o600);
    const profile = JSON.parse(readFileSync(configFile, 'utf8')).profiles.default;
    expect(profile).toMatchObject({ url: server.url, api_key: server.rootKey });
    expect(profile.tls_fingerprint).toMatch(/^([0-9A-F]{2}:){31}[0-9A-F]{2}$/);
    expect(stderr).toContain(`Logged in to ${server.url}`);

    // The instance was running, listed in a table, then stopped and deleted; the volume stays.
    expect(stderr).toMatch(/ins_\w+ is running after/);
    expect(stdout).toMatch(/^ID\s+NAME\s+STATUS\s+TYPE\s+REGION\s+PUBLIC IP$/m);
    expect(stdout).toMatch(/^ins_\w+\s+web-1\s+running\s+compute-2x\s+us-east-1\s+\d+\.\d+\.\d+\.\d+$/m);
    const instanceId = /^(ins_\w+)\s+web-1\s+running/m.exec(stdout)![1]!;
    expect(stdout).toMatch(/instance\.created/);
    expect(stdout).toContain(`${instanceId} deleted`);
    const key = server.rootKey;
    expect((await server.request('GET', `/v1/instances/${instanceId}`, { key })).status).toBe(404);
    const volumes = (await server.request('GET', '/v1/volumes?name=data-1', { key })).body.data;
    expect(volumes).toMatchObject([
      { status: 'available', size_gb: 100, filesystem: 'ext4', instance_id: null },
    ]);
    const sshKeys = (await server.request('GET', '/v1/ssh-keys', { key })).body.data;
    expect(sshKeys.map((sshKey: { name: string }) => sshKey.name)).toContain('me-laptop');

    // Three lines of live values, and the month's usage with the instance in it.
    expect(stdout.match(new RegExp(`^\\S+Z ${instanceId} cpu_percent=`, 'gm'))).toHaveLength(3);
    expect(stdout).toMatch(new RegExp(`^${instanceId}\\s+instance_compute`, 'm'));
    expect(stdout).toMatch(/^Total \d+\.\d{2,} USD/m);

    // The VPN's client file: complete, with the key wg made, 0600.
    const wgConf = path.join(work, 'wg0.conf');
    expect(statSync(wgConf).mode & 0o777).toBe(0o600);
    const privateKey = readFileSync(path.join(work, 'client.key'), 'utf8').trim();
    expect(readFileSync(wgConf, 'utf8')).toContain(`PrivateKey = ${privateKey}`);
  }, 480_000);
});
