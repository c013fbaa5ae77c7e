import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DRIVER_PROGRAMS } from '../src/drivers/qemu/qemu.js';
import { serveUntilExit } from './helpers/cli.js';

const _bin = path.resolve(import.meta.dirname, '..', 'bin', 'nimbus');
const made: string[] = [];

afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A directory holding a do-nothing executable for every driver program except `without`. */
function pathWithout(without: readonly string[]): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-programs-'));
  made.push(dir);
  for (const program of DRIVER_PROGRAMS.flatMap((need) => need.programs)) {
    if (without.includes(program)) continue;
    writeFileSync(path.join(dir, program), '#!/bin/sh\nexit 0\n');
    chmodSync(path.join(dir, program), 0o755);
  }
  return dir;
}

function serveQemu(pathVariable: string): Promise<{ code: number | null; stderr: string }> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-programs-data-'));
  made.push(dataDir);
  return serveUntilExit({
    PATH: pathVariable,
    NIMBUS_DRIVER: 'qemu',
    NIMBUS_DATA_DIR: dataDir,
    NIMBUS_IMAGE_DIR: path.join(dataDir, 'images'),
  });
}

// A serve that gets as far as the image check has opened its store first: seconds on a loaded host.
describe('serve with NIMBUS_DRIVER=qemu', { timeout: 60_000 }, () => {
  it('refuses to start without genisoimage or xorriso, naming them and the Debian package', async () => {
    const { code, stderr } = await serveQemu(pathWithout(['genisoimage', 'xorriso']));
    expect(code).toBe(2);
    expect(stderr).toContain('NIMBUS_DRIVER=qemu needs programs that are not installed');
    expect(stderr).toContain('genisoimage or xorriso (Debian package genisoimage)');
    expect(stderr).toContain('apt-get install genisoimage');
  });

  it('names every missing program and each package once', async () => {
    const { code, stderr } = await serveQemu(pathWithout(['qemu-system-x86_64', 'qemu-img', 'mkfs.xfs']));
    expect(code).toBe(2);
    expect(stderr).toContain('qemu-system-x86_64 (Debian package qemu-system-x86)');
    expect(stderr).toContain('qemu-img (Debian package qemu-utils)');
    expect(stderr).toContain('mkfs.xfs (Debian package xfsprogs)');
    expect(stderr).toContain('apt-get install qemu-system-x86 qemu-utils xfsprogs');
    expect(stderr).not.toContain('genisoimage');
  });

  it('with xorriso in place of genisoimage gets past the check (to the missing guest image)', async () => {
    const { code, stderr } = await serveQemu(pathWithout(['genisoimage']));
    expect(code).toBe(2);
    expect(stderr).not.toContain('not installed');
    expect(stderr).toContain('no guest image');
  });
});
