/**
 * `nimbus admin images build` and the image dir (issue 22): the build is idempotent (a second run with the
 * same recipe does nothing and says so), its manifest names the Debian packages it was made of, `images list`
 * shows built and dropped-in cloud images, and `serve` with NIMBUS_DRIVER=qemu refuses to start without any
 * image, naming the build command. No VM is booted here.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readlinkSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runAdmin } from '../src/cli/admin.js';
import { loadConfig } from '../src/platform/config.js';
import { ensureImage, IMAGE_DIR, qemuAvailable } from './helpers/qemu.js';
import { startTestServer } from './helpers/server.js';

const canRun = await qemuAvailable();

async function admin(env: Record<string, string>, ...args: string[]) {
  const out: string[] = [];
  const progress: string[] = [];
  await runAdmin([...args, '--json'], loadConfig(env), {
    out: (line) => out.push(line),
    progress: (line) => progress.push(line),
  });
  return { result: JSON.parse(out.join('\n')), progress };
}

describe.skipIf(!canRun)('QEMU guest images', () => {
  it('builds once; a second build with the same recipe does nothing and says so', async () => {
    await ensureImage();
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-images-'));
    try {
      const env = { NIMBUS_DATA_DIR: dataDir, NIMBUS_IMAGE_DIR: IMAGE_DIR };
      const { result, progress } = await admin(env, 'images', 'build');
      expect(result).toMatchObject({ name: 'debian-12', built: false });
      expect(progress.join('\n')).toMatch(/up to date/);
      expect(progress[0]).toMatch(/^\[1\/6\] resolving Debian packages/);
      const dir = path.join(IMAGE_DIR, 'debian-12', result.version);
      expect(readlinkSync(path.join(IMAGE_DIR, 'debian-12', 'current'))).toBe(result.version);
      const manifest = JSON.parse(readFileSync(path.join(dir, 'manifest.json'), 'utf8'));
      const names = manifest.packages.map((p: { name: string }) => p.name);
      for (const wanted of ['busybox-static', 'dropbear-bin', 'e2fsprogs', 'libc6'])
        expect(names).toContain(wanted);
      expect(names.some((n: string) => /^linux-image-.*-cloud-amd64$/.test(n))).toBe(true);
      for (const file of ['vmlinuz', 'initrd.img', 'root.qcow2', 'manifest.json']) {
        expect((statSync(path.join(dir, file)).mode & 0o777).toString(8), file).toBe('600');
      }
      // The root filesystem is a qcow2 image, as qemu-img reads it.
      const info = await new Promise<string>((resolve, reject) =>
        execFile('qemu-img', ['info', '--output=json', path.join(dir, 'root.qcow2')], (e, out) =>
          e ? reject(e) : resolve(out),
        ),
      );
      expect(JSON.parse(info).format).toBe('qcow2');
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 900_000);

  it('lists built images and cloud images dropped into the image dir', async () => {
    const imageDir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-image-dir-'));
    try {
      await new Promise<void>((resolve, reject) =>
        execFile(
          'qemu-img',
          ['create', '-q', '-f', 'qcow2', path.join(imageDir, 'ubuntu-24.04.qcow2'), '1G'],
          (e) => (e ? reject(e) : resolve()),
        ),
      );
      const env = { NIMBUS_DATA_DIR: imageDir, NIMBUS_IMAGE_DIR: imageDir };
      const { result } = await admin(env, 'images', 'list');
      expect(result.images).toEqual([
        { name: 'ubuntu-24.04', kind: 'cloud', root: path.join(imageDir, 'ubuntu-24.04.qcow2') },
      ]);
    } finally {
      rmSync(imageDir, { recursive: true, force: true });
    }
  });

  it('serve refuses to start with no image, naming the build command', async () => {
    const empty = mkdtempSync(path.join(os.tmpdir(), 'nimbus-no-images-'));
    try {
      const imageDir = path.join(empty, 'images');
      await expect(
        startTestServer({ dataDir: empty, env: { NIMBUS_DRIVER: 'qemu', NIMBUS_IMAGE_DIR: imageDir } }),
      ).rejects.toThrow(/no guest image in .*nimbus admin images build/);
      expect(existsSync(path.join(imageDir, 'debian-12'))).toBe(false);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });
});
