/**
 * `nimbus login` as a person does it, on a pseudo-terminal (util-linux `script`): the URL typed, the
 * self-signed certificate shown by its SHA-256 fingerprint and trusted, the key typed without echo; the
 * profile saved 0600 and used afterwards with no environment at all (the certificate pinned). Also the
 * scripted login (--url, --api-key-stdin, --fingerprint), refusals that save nothing, profiles, the
 * NIMBUS_API_KEY override, and logout.
 */
import { spawn } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { BIN, baseEnv, type Cli, cliFor, ensureBuilt, runNimbus } from '../helpers/cli.js';
import { account } from '../helpers/common.js';
import { freePort, serverForSuite } from '../helpers/server.js';

// Each test runs bin/nimbus several times (about a second each, far more on a loaded machine).
vi.setConfig({ testTimeout: 180_000 });

interface Step {
  /** Wait until the terminal shows this (since the previous answer)… */
  prompt: RegExp;
  /** …then type this. */
  answer: string;
}

/** Runs `nimbus …args` on a pseudo-terminal, answering each prompt in turn; returns the whole screen. */
function onTerminal(
  env: Record<string, string>,
  args: string[],
  steps: Step[],
): Promise<{ code: number; screen: string }> {
  const command = [process.execPath, BIN, ...args].map((word) => `'${word}'`).join(' ');
  return new Promise((resolve, reject) => {
    const child = spawn('script', ['-qefc', command, '/dev/null'], {
      env: { ...env, SHELL: '/bin/sh' },
      stdio: 'pipe',
    });
    let screen = '';
    let from = 0;
    let step = 0;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`login stalled at step ${step}; screen so far:\n${JSON.stringify(screen)}`));
    }, 90_000);
    child.stdout.on('data', (chunk: Buffer) => {
      screen += chunk.toString();
      const next = steps[step];
      if (next?.prompt.test(screen.slice(from))) {
        from = screen.length;
        step += 1;
        child.stdin.write(next.answer);
      }
    });
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      child.stdin.destroy();
      resolve({ code: code ?? -1, screen });
    });
  });
}

describe('nimbus login', () => {
  const server = serverForSuite();
  let key: string;
  let fingerprint: string;

  beforeAll(async () => {
    ensureBuilt();
    key = (await account(server)).key;
    fingerprint = new X509Certificate(readFileSync(server.running.certFile)).fingerprint256;
  }, 180_000);

  /** A user with an empty home directory and no NIMBUS_* variables. */
  const newUser = (): Cli => {
    const cli = cliFor(server, key);
    return cli.with({ NIMBUS_URL: undefined, NIMBUS_API_KEY: undefined, NIMBUS_CA_FILE: undefined });
  };
  const configFile = (cli: Cli) => path.join(cli.home, '.config', 'nimbus', 'config.json');

  it('asks for URL and key, shows the fingerprint of the self-signed certificate, never echoes the key', async () => {
    const cli = newUser();
    const { code, screen } = await onTerminal(
      cli.env,
      ['login'],
      [
        { prompt: /Nimbus URL/, answer: `${server.url}\r` },
        { prompt: /Trust this certificate/, answer: 'y\r' },
        { prompt: /API key/, answer: `${key}\r` },
      ],
    );
    expect(code, screen).toBe(0);
    expect(screen).toContain('is self-signed');
    expect(screen).toContain(`SHA-256 fingerprint: ${fingerprint}`);
    expect(screen).toMatch(/Logged in to https:\/\/127\.0\.0\.1:\d+ as user\d+-\S+@example\.com/);
    // The key went to the terminal but never came back: not echoed, not masked in clear, not printed.
    expect(screen).not.toContain(key);
    expect(screen).not.toContain(key.slice(4, 16));

    const file = configFile(cli);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(path.dirname(file)).mode & 0o777).toBe(0o700);
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({
      profiles: { default: { url: server.url, api_key: key, tls_fingerprint: fingerprint } },
    });

    // From now on no environment is needed: the profile gives URL and key, the pin trusts the server.
    const whoami = await cli.json('whoami');
    expect(whoami).toMatchObject({ url: server.url, certificate: `pinned ${fingerprint}` });
    expect(whoami.key).toMatch(/\(profile "default"\)$/);
    expect((await cli.run('instances', 'list')).code).toBe(0);

    // NIMBUS_API_KEY and NIMBUS_URL win over the profile.
    const overridden = await cli.with({ NIMBUS_API_KEY: 'nmb_not_a_key' }).run('whoami');
    expect(overridden.code).toBe(3);
    expect(overridden.stderr).toMatch(/code: authentication_failed/);
    const nowhere = `https://127.0.0.1:${await freePort()}`;
    const elsewhere = await cli.with({ NIMBUS_URL: nowhere }).run('whoami');
    expect(elsewhere.code).toBe(1);
    expect(elsewhere.stderr).toMatch(new RegExp(`^Error: cannot reach ${nowhere}: .*ECONNREFUSED`, 'm'));
    // A pin that does not match the server's certificate refuses before any key is sent.
    const mismatch = await cli.with({ NIMBUS_TLS_FINGERPRINT: '00'.repeat(32) }).run('whoami');
    expect(mismatch.code).toBe(3);
    expect(mismatch.stderr).toMatch(/fingerprint is .* not the trusted 00:00/);

    const out = await cli.run('logout');
    expect(out.stdout).toMatch(/Logged out of profile "default"/);
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({ profiles: {} });
    const after = await cli.run('whoami');
    expect(after.code).toBe(3);
    expect(after.stderr).toMatch(/Not logged in \(profile "default"\)/);
  });

  it('declining the certificate saves nothing (exit 3); the key is not even asked for', async () => {
    const cli = newUser();
    const { code, screen } = await onTerminal(
      cli.env,
      ['login'],
      [
        { prompt: /Nimbus URL/, answer: `${server.url}\r` },
        { prompt: /Trust this certificate/, answer: 'n\r' },
      ],
    );
    expect(code, screen).toBe(3);
    expect(screen).toMatch(/Certificate not trusted; not logged in/);
    expect(screen).not.toMatch(/API key/);
    expect(existsSync(configFile(cli))).toBe(false);
  });

  it('scripted: --url, --api-key-stdin and --fingerprint; a profile per server', async () => {
    const cli = newUser();
    const login = (profile: string, args: string[], input: string) =>
      runNimbus(['login', '--profile', profile, '--url', server.url, '--api-key-stdin', ...args], {
        env: cli.env,
        input,
      });

    const wrongPin = await login('staging', ['--fingerprint', 'AA'.repeat(32)], key);
    expect(wrongPin.code).toBe(3);
    expect(wrongPin.stderr).toMatch(/not the --fingerprint given/);
    const wrongKey = await login('staging', ['--fingerprint', fingerprint], 'nmb_wrong');
    expect(wrongKey.code).toBe(3);
    expect(wrongKey.stderr).toMatch(/code: authentication_failed/);
    // Without a terminal and without --fingerprint, an untrusted certificate is not trusted silently.
    const unasked = await login('staging', [], key);
    expect(unasked.code).toBe(3);
    expect(unasked.stderr).toContain(fingerprint);
    expect(existsSync(configFile(cli))).toBe(false);

    const ok = await login(
      'staging',
      ['--fingerprint', fingerprint.replace(/:/g, '').toLowerCase()],
      `${key}\n`,
    );
    expect(ok.code, ok.stderr).toBe(0);
    expect(statSync(configFile(cli)).mode & 0o777).toBe(0o600);
    expect((await cli.run('whoami')).code).toBe(3);
    expect((await cli.run('whoami', '--profile', 'staging')).code).toBe(0);
    expect((await cli.with({ NIMBUS_PROFILE: 'staging' }).run('account', 'get')).code).toBe(0);

    // A server this machine already trusts (NIMBUS_CA_FILE) is not pinned and nothing is asked.
    const trusted = await runNimbus(['login', '--url', server.url, '--api-key-stdin'], {
      env: { ...cli.env, NIMBUS_CA_FILE: server.running.certFile },
      input: key,
    });
    expect(trusted.code, trusted.stderr).toBe(0);
    expect(trusted.stderr).not.toMatch(/fingerprint/i);
    const saved = JSON.parse(readFileSync(configFile(cli), 'utf8'));
    expect(Object.keys(saved.profiles).sort()).toEqual(['default', 'staging']);
    expect(saved.profiles.default.tls_fingerprint).toBeUndefined();

    // login without a terminal and without the flags says how to do it.
    const bare = await runNimbus(['login'], { env: baseEnv(cli.home) });
    expect(bare.code).toBe(2);
    expect(bare.stderr).toMatch(/--url and --api-key-stdin/);
  });
});
