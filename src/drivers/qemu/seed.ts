/**
 * The NoCloud seed of a VM, as cloud-init reads it: an ISO 9660 volume labelled `cidata` (a CD-ROM in the
 * guest) holding `meta-data` (instance id, hostname, SSH public keys), `vendor-data` (Nimbus's own
 * cloud-config: the user `lambda` with those keys, no password login, no root login) and `user-data` (the
 * instance's, as given). A real cloud image with cloud-init boots with it as it would on any cloud.
 *
 * The built image's busybox guest reads the same values as plain files (hostname, authorized_keys,
 * instance-id, user-data), so it needs no YAML parser: QEMU hands them over through fw_cfg
 * (`opt/nimbus/<name>`, from the machine's `seed/` folder), and they are on the ISO too, under `nimbus/`. Every value reaches the guest as
 * the contents of a file; none is ever part of a command line. Values written into YAML are JSON strings,
 * which YAML reads as they are, so no key comment or hostname can change the document's shape.
 */
import { chmodSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { GUEST_USER } from './guest-files.js';
import { run, ToolError } from './tools.js';

export interface SeedContent {
  instanceId: string;
  hostname: string;
  /** OpenSSH public keys, one per entry. */
  sshKeys: readonly string[];
  userData: string | null;
}

const q = (value: string) => JSON.stringify(value);

export function seedFiles(seed: SeedContent): Record<string, string> {
  const keys = seed.sshKeys.map((key) => key.trim()).filter(Boolean);
  const keyList = keys.length > 0 ? `\n${keys.map((k) => `  - ${q(k)}`).join('\n')}` : ' []';
  return {
    'meta-data': `instance-id: ${q(seed.instanceId)}\nlocal-hostname: ${q(seed.hostname)}\npublic-keys:${keyList}\n`,
    'vendor-data': [
      '#cloud-config',
      'users:',
      `  - name: ${q(GUEST_USER)}`,
      '    gecos: "Nimbus login user"',
      '    shell: /bin/bash',
      '    lock_passwd: true',
      '    sudo: "ALL=(ALL) NOPASSWD:ALL"',
      `    ssh_authorized_keys:${keys.length > 0 ? `\n${keys.map((k) => `      - ${q(k)}`).join('\n')}` : ' []'}`,
      'disable_root: true',
      'ssh_pwauth: false',
      '',
    ].join('\n'),
    'user-data': seed.userData ?? '',
    'nimbus/instance-id': `${seed.instanceId}\n`,
    'nimbus/hostname': `${seed.hostname}\n`,
    'nimbus/authorized_keys': keys.map((k) => `${k}\n`).join(''),
    ...(seed.userData !== null ? { 'nimbus/user-data': seed.userData } : {}),
  };
}

/** The plain-file values of the seed, by name (fw_cfg's opt/nimbus/<name>). */
export const PLAIN_SEED_FILES = ['instance-id', 'hostname', 'authorized_keys', 'user-data'] as const;

/**
 * Writes the seed: the ISO to `isoFile` (built in `workDir`, removed after) and the plain files into
 * `plainDir` (0700; files 0600), replacing what was there.
 */
export async function writeSeed(
  isoFile: string,
  plainDir: string,
  workDir: string,
  seed: SeedContent,
): Promise<void> {
  rmSync(plainDir, { recursive: true, force: true });
  mkdirSync(plainDir, { mode: 0o700 });
  for (const [file, text] of Object.entries(seedFiles(seed))) {
    if (file.startsWith('nimbus/')) writeFileSync(path.join(plainDir, file.slice(7)), text, { mode: 0o600 });
  }
  await writeSeedIso(isoFile, workDir, seed);
}

/** Writes the seed ISO to `isoFile` (built in `workDir`, which is removed after). */
export async function writeSeedIso(isoFile: string, workDir: string, seed: SeedContent): Promise<void> {
  rmSync(workDir, { recursive: true, force: true });
  mkdirSync(path.join(workDir, 'nimbus'), { recursive: true, mode: 0o700 });
  try {
    for (const [file, text] of Object.entries(seedFiles(seed))) {
      writeFileSync(path.join(workDir, file), text, { mode: 0o600 });
    }
    const tmp = `${isoFile}.tmp-${process.pid}`;
    const args = ['-quiet', '-output', tmp, '-volid', 'cidata', '-joliet', '-rock', workDir];
    try {
      await run('genisoimage', args, { timeoutMs: 60_000 });
    } catch (error) {
      if (!(error instanceof ToolError && error.code === 'ENOENT')) throw error;
      // xorriso speaks genisoimage's options too.
      await run('xorriso', ['-as', 'mkisofs', ...args], { timeoutMs: 60_000 });
    }
    chmodSync(tmp, 0o600);
    renameSync(tmp, isoFile);
  } finally {
    rmSync(workDir, { recursive: true, force: true });
  }
}
