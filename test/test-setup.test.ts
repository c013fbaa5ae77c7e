/**
 * npm test's set-up (scripts/test-setup.mjs): which Debian packages it takes for missing, the one command
 * it gives for them, and, run in --check mode (it changes nothing) on a PATH without zsh, that it names
 * zsh and its install command, and fails under CI=true where elsewhere it carries on.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';

interface Requirement {
  package: string;
  programs?: string[];
  files?: string[];
  for: string;
}
interface Has {
  program: (name: string) => boolean;
  file: (name: string) => boolean;
}
interface SetupModule {
  REQUIREMENTS: Requirement[];
  missingPackages: (requirements: Requirement[], has: Has) => Requirement[];
  installCommand: (packages: Requirement[], options: { root: boolean }) => string;
  findProgram: (program: string, pathVariable?: string) => string | null;
}

const script = path.resolve(import.meta.dirname, '..', 'scripts', 'test-setup.mjs');
const setup = (await import(pathToFileURL(script).href)) as SetupModule;

describe('what the set-up takes for missing', () => {
  it('a package is missing exactly when one of its programs or files is', () => {
    const things = setup.REQUIREMENTS.flatMap((r) => [...(r.programs ?? []), ...(r.files ?? [])]);
    fc.assert(
      fc.property(fc.subarray(things), (present) => {
        const has = { program: (p: string) => present.includes(p), file: (f: string) => present.includes(f) };
        const missing = setup.missingPackages(setup.REQUIREMENTS, has).map((r) => r.package);
        for (const r of setup.REQUIREMENTS) {
          const complete = [...(r.programs ?? []), ...(r.files ?? [])].every((t) => present.includes(t));
          expect(missing.includes(r.package)).toBe(!complete);
        }
      }),
    );
  });

  it('nothing is missing when everything is there, and everything when nothing is', () => {
    const all = { program: () => true, file: () => true };
    const none = { program: () => false, file: () => false };
    expect(setup.missingPackages(setup.REQUIREMENTS, all)).toEqual([]);
    expect(setup.missingPackages(setup.REQUIREMENTS, none)).toEqual(setup.REQUIREMENTS);
  });

  it('covers the packages the suites need', () => {
    expect(setup.REQUIREMENTS.map((r) => r.package).sort()).toEqual(
      [
        'postgresql',
        'redis-server',
        'wireguard-tools',
        'wireguard-go',
        'haproxy',
        'poppler-utils',
        'fonts-dejavu-core',
        'zsh',
        'fish',
        'openssl',
        'chromium',
        'qemu-system-x86',
        'qemu-utils',
        'socat',
        'genisoimage',
        'openssh-client',
        'bind9-dnsutils',
        'e2fsprogs',
        'xfsprogs',
        'openvswitch-switch',
        'ovn-central',
        'ovn-host',
        'ethtool',
        'iproute2',
        'iputils-ping',
        'udhcpc',
      ].sort(),
    );
  });

  it('gives one apt-get install for every missing package, with sudo when not root', () => {
    const [zsh, fish] = ['zsh', 'fish'].map((name) => setup.REQUIREMENTS.find((r) => r.package === name)!);
    expect(setup.installCommand([zsh!, fish!], { root: true })).toBe(
      'apt-get install -y --no-install-recommends zsh fish',
    );
    expect(setup.installCommand([zsh!, fish!], { root: false })).toBe(
      'sudo apt-get install -y --no-install-recommends zsh fish',
    );
  });

  it('finds a program as command -v does, and the sbin directories too', () => {
    expect(setup.findProgram('sh', '/usr/bin:/bin')).not.toBeNull();
    expect(setup.findProgram('sh', '')).toBeNull();
    expect(setup.findProgram('no-such-program-here', process.env.PATH)).toBeNull();
    // A non-root PATH often lacks sbin, where mke2fs lives.
    if (existsSync('/usr/sbin/mke2fs') || existsSync('/sbin/mke2fs')) {
      expect(setup.findProgram('mke2fs', '/usr/bin')).not.toBeNull();
    }
  });
});

describe('node scripts/test-setup.mjs --check on a PATH without zsh', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-setup-path-'));
  // Every program of the requirements found here, except zsh.
  for (const program of setup.REQUIREMENTS.flatMap((r) => r.programs ?? [])) {
    const found = setup.findProgram(program);
    if (program !== 'zsh' && found) symlinkSync(found, path.join(dir, program));
  }
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  function check(ci: string): Promise<{ code: number; stderr: string }> {
    return new Promise((resolve) => {
      execFile(
        process.execPath,
        [script, '--check'],
        { env: { ...process.env, PATH: dir, CI: ci }, timeout: 60_000 },
        (error, _stdout, stderr) => resolve({ code: error ? Number(error.code) : 0, stderr }),
      );
    });
  }

  it('names zsh and the command that installs it, and fails under CI=true', async () => {
    const { code, stderr } = await check('true');
    expect(code).toBe(1);
    expect(stderr).toMatch(/Debian packages missing: .*\bzsh\b/);
    expect(stderr).toMatch(/apt-get install -y --no-install-recommends .*\bzsh\b/);
    expect(stderr).toContain('CI=true: every suite must run, so this fails.');
  });

  it('carries on without CI, saying the suites will be skipped', async () => {
    const { code, stderr } = await check('');
    expect(code).toBe(0);
    expect(stderr).toMatch(/Debian packages missing: .*\bzsh\b/);
    expect(stderr).toContain('will be skipped');
  });
});
