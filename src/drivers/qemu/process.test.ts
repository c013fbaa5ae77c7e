/**
 * The accelerator probe's test of a guest: a kernel must run to its end (its panic for want of a root
 * disk); QEMU merely staying alive is not enough (a host here keeps a hung KVM guest alive for ever).
 * Run under TCG, which works everywhere QEMU does; skipped without QEMU or a built image.
 */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { listImages } from './images.js';
import { bootsLinux, kvmUsable } from './process.js';

const IMAGE_DIR = process.env.NIMBUS_TEST_IMAGE_DIR ?? '/var/cache/nimbus-images';
const binary = 'qemu-system-x86_64';
const hasQemu = spawnSync(binary, ['--version']).status === 0;
const kernel = hasQemu
  ? [...listImages(IMAGE_DIR).values()].flatMap((i) => (i.kind === 'nimbus' ? [i.kernel] : []))[0]
  : undefined;

describe.skipIf(!kernel)('bootsLinux (the KVM probe)', () => {
  it('is true for a kernel that boots to its end under TCG', async () => {
    expect(await bootsLinux(binary, ['-accel', 'tcg'], kernel!, 90_000)).toBe(true);
  }, 100_000);

  it('is false for a file that is no kernel, and when the guest is still going at the deadline', async () => {
    expect(await bootsLinux(binary, ['-accel', 'tcg'], '/etc/hostname', 30_000)).toBe(false);
    // 50 ms: no kernel gets to its panic that soon; the probe does not wait on beyond its deadline.
    const began = Date.now();
    expect(await bootsLinux(binary, ['-accel', 'tcg'], kernel!, 50)).toBe(false);
    expect(Date.now() - began).toBeLessThan(5_000);
  }, 60_000);

  it('is false for KVM without a kernel to probe with', async () => {
    expect(await kvmUsable(binary, null)).toBe(false);
  });
});
