/**
 * The remembered KVM verdict: a "no" from the probe is kept for the same host, QEMU and guest kernel;
 * a "yes", or a changed kernel, means probing again. The probe itself is process.test.ts's subject; here
 * it is a counting stand-in, and Node stands in for the QEMU binary whose version is part of the key.
 */
import { existsSync, mkdtempSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { kvmUsableRemembered } from './kvm-verdict.js';

function countingProbe(answer: boolean) {
  const probe = async () => {
    probe.calls += 1;
    return answer;
  };
  probe.calls = 0;
  return probe;
}

function setUp() {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-kvm-verdict-'));
  const kernel = path.join(dir, 'vmlinuz');
  writeFileSync(kernel, 'a kernel');
  return { kernel, file: path.join(dir, 'kvm-verdict.json') };
}

describe.skipIf(!existsSync('/dev/kvm'))('the remembered KVM verdict', () => {
  it('keeps a "no" for the next start, which then does not probe', async () => {
    const { kernel, file } = setUp();
    const probe = countingProbe(false);
    expect(await kvmUsableRemembered(process.execPath, kernel, file, probe)).toBe(false);
    expect(await kvmUsableRemembered(process.execPath, kernel, file, probe)).toBe(false);
    expect(probe.calls).toBe(1);
    expect(readFileSync(file, 'utf8')).toContain(os.release());
  });

  it('probes again for another guest kernel file, and never keeps a "yes"', async () => {
    const { kernel, file } = setUp();
    const no = countingProbe(false);
    await kvmUsableRemembered(process.execPath, kernel, file, no);
    utimesSync(kernel, new Date(), new Date(Date.now() + 60_000));
    const yes = countingProbe(true);
    expect(await kvmUsableRemembered(process.execPath, kernel, file, yes)).toBe(true);
    expect(await kvmUsableRemembered(process.execPath, kernel, file, yes)).toBe(true);
    expect(yes.calls).toBe(2);
  });
});

describe('without a kernel to probe with', () => {
  it('asks the probe and writes nothing', async () => {
    const { file } = setUp();
    const probe = countingProbe(false);
    expect(await kvmUsableRemembered(process.execPath, null, file, probe)).toBe(false);
    expect(probe.calls).toBe(1);
    expect(existsSync(file)).toBe(false);
  });
});
