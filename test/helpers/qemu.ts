/**
 * What the QEMU suites share: the guest image (built once into a cache outside the clone, as .ci/run
 * does), whether this machine can run them, an SSH key pair made with OpenSSH, and `ssh` into a guest.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildGuestImage } from '../../src/drivers/qemu/images.js';
import { available } from '../../src/drivers/qemu/tools.js';

/** Where the suites find (or build) the guest image: NIMBUS_TEST_IMAGE_DIR, else the CI cache. */
export const IMAGE_DIR = process.env.NIMBUS_TEST_IMAGE_DIR ?? '/var/cache/nimbus-images';

/**
 * Whether the QEMU suites can run here: QEMU, qemu-img, socat, genisoimage and ssh installed. In CI
 * (.ci/run installs them) a missing one is a failure, never a skip.
 */
export async function qemuAvailable(): Promise<boolean> {
  const checks = await Promise.all([
    available('qemu-system-x86_64'),
    available('qemu-img'),
    available('socat', ['-V']),
    available('genisoimage', ['-version']),
    available('ssh', ['-V']),
    available('ssh-keygen', ['-?']),
  ]);
  const ok = checks.every(Boolean);
  if (!ok && process.env.CI === 'true') {
    throw new Error(
      'CI: the QEMU suites need qemu-system-x86, qemu-utils, socat, genisoimage and openssh-client',
    );
  }
  return ok;
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

/** Runs `command` in the guest over OpenSSH as the endpoint's user, with the key; no password is ever tried. */
export function ssh(
  endpoint: { host: string; port: number; user: string },
  privateKey: string,
  command: string,
  timeoutMs = 60_000,
): Promise<{ stdout: string; stderr: string; code: number }> {
  return run(
    'ssh',
    [
      '-i',
      privateKey,
      '-p',
      String(endpoint.port),
      '-o',
      'BatchMode=yes',
      '-o',
      'StrictHostKeyChecking=no',
      '-o',
      'UserKnownHostsFile=/dev/null',
      '-o',
      'LogLevel=ERROR',
      '-o',
      'ConnectTimeout=20',
      '-o',
      'PasswordAuthentication=no',
      `${endpoint.user}@${endpoint.host}`,
      command,
    ],
    timeoutMs,
  );
}
