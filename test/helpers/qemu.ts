/**
 * What the QEMU suites share: the guest image (built once into a cache outside the clone by npm test's
 * set-up), whether this machine can run them, an SSH key pair made with OpenSSH, and `ssh` into a guest.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildGuestImage } from '../../src/drivers/qemu/images.js';
import { DRIVER_PROGRAMS } from '../../src/drivers/qemu/qemu.js';
import { describeMissing, missingPrograms } from '../../src/drivers/qemu/tools.js';

/** Where the suites find (or build) the guest image: NIMBUS_TEST_IMAGE_DIR, else the CI cache. */
export const IMAGE_DIR = process.env.NIMBUS_TEST_IMAGE_DIR ?? '/var/cache/nimbus-images';

/**
 * Whether the QEMU suites can run here: every program the driver runs, and ssh to reach the guests. In CI
 * (npm test's set-up, scripts/test-setup.mjs, installs them) a missing one is a failure, never a skip.
 */
export async function qemuAvailable(): Promise<boolean> {
  const missing = missingPrograms([
    ...DRIVER_PROGRAMS,
    { programs: ['ssh'], debianPackage: 'openssh-client' },
    { programs: ['ssh-keygen'], debianPackage: 'openssh-client' },
  ]);
  if (missing.length > 0 && process.env.CI === 'true') {
    throw new Error(`CI: the QEMU suites need ${describeMissing(missing)}`);
  }
  return missing.length === 0;
}

/** Builds the image into IMAGE_DIR (nothing to do when it is there: the build is cached by its recipe). */
export async function ensureImage(): Promise<void> {
  await buildGuestImage({ imageDir: IMAGE_DIR });
}

function run(
  program: string,
  args: string[],
  timeoutMs = 60_000,
): Promise<{ stdout: string; stderr: string; code: number }> {
  return new Promise((resolve) => {
    execFile(program, args, { timeout: timeoutMs, encoding: 'utf8' }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 255) : 0;
      resolve({ stdout, stderr, code });
    });
  });
}

/** A fresh ed25519 key pair (OpenSSH's ssh-keygen): the private key's file and the public key's text. */
export async function sshKeyPair(): Promise<{ privateKey: string; publicKey: string }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-ssh-'));
  const privateKey = path.join(dir, 'id_ed25519');
  const made = await run('ssh-keygen', [
    '-q',
    '-t',
    'ed25519',
    '-N',
    '',
    '-C',
    'qemu-suite',
    '-f',
    privateKey,
  ]);
  if (made.code !== 0) throw new Error(`ssh-keygen: ${made.stderr}`);
  return { privateKey, publicKey: readFileSync(`${privateKey}.pub`, 'utf8').trim() };
}

/**
 * OpenSSH's arguments for logging into a guest with `privateKey` as `endpoint`'s user: key only (no
 * password is ever tried), no host key kept, quiet; `port` omitted for a guest reached on port 22.
 */
export function sshArguments(
  endpoint: { host: string; port?: number; user: string },
  privateKey: string,
  connectTimeoutSeconds = 20,
): string[] {
  return [
    ...['-i', privateKey],
    ...(endpoint.port === undefined ? [] : ['-p', String(endpoint.port)]),
    ...['-o', 'BatchMode=yes', '-o', 'StrictHostKeyChecking=no', '-o', 'UserKnownHostsFile=/dev/null'],
    ...['-o', 'LogLevel=ERROR', '-o', `ConnectTimeout=${connectTimeoutSeconds}`],
    ...['-o', 'PasswordAuthentication=no'],
    `${endpoint.user}@${endpoint.host}`,
  ];
}

/** Runs `command` in the guest over OpenSSH as the endpoint's user, with the key; no password is ever tried. */
export function ssh(
  endpoint: { host: string; port: number; user: string },
  privateKey: string,
  command: string,
  timeoutMs = 60_000,
): Promise<{ stdout: string; stderr: string; code: number }> {
  return run('ssh', [...sshArguments(endpoint, privateKey), command], timeoutMs);
}
