/**
 * The instance suites against the qemu driver (`npm run test:qemu-instances`, run by .ci/run after
 * `npm test`): every suite server boots real VMs (test/helpers/driver.ts). One file at a time and
 * SQLite only, so the VMs have the two cores to themselves; docs/testing.md lists the suites and the
 * cases skipped here, and why.
 */
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: [
      'test/instances-lifecycle.test.ts',
      'test/instances-states.test.ts',
      'test/instances-network.test.ts',
    ],
    env: { NIMBUS_TEST_DRIVER: 'qemu' },
    // KVM or TCG, probed once for the run rather than by every suite's server.
    globalSetup: ['test/helpers/qemu-accel.ts'],
    // A case boots several VMs one after another, each some seconds under TCG.
    testTimeout: 600_000,
    hookTimeout: 600_000,
    pool: 'forks',
    fileParallelism: false,
    reporters: process.env.CI === 'true' ? ['default', 'junit'] : ['default'],
    outputFile: { junit: 'test-results/junit-qemu.xml' },
  },
});
