/**
 * vitest.qemu.config.ts's global setup: the qemu driver's KVM probe (process.ts) boots a kernel and, on
 * a host whose KVM hangs, waits out its whole deadline; made here once for the run, it is handed to every
 * suite server as NIMBUS_QEMU_ACCEL (helpers/server.ts) instead of being made again by each.
 */
import { listImages } from '../../src/drivers/qemu/images.js';
import { kvmUsable } from '../../src/drivers/qemu/process.js';
import { QEMU_BINARY } from '../../src/drivers/qemu/qemu.js';

export default async function probeAccelOnce(): Promise<void> {
  if (process.env.NIMBUS_TEST_QEMU_ACCEL) return;
  const imageDir = process.env.NIMBUS_TEST_IMAGE_DIR ?? '/var/cache/nimbus-images';
  const kernel = [...listImages(imageDir).values()].flatMap((i) =>
    i.kind === 'nimbus' ? [i.kernel] : [],
  )[0];
  process.env.NIMBUS_TEST_QEMU_ACCEL = (await kvmUsable(QEMU_BINARY, kernel ?? null)) ? 'kvm' : 'tcg';
}
