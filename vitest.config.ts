import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two cores: two files at a time keeps servers, PostgreSQL and Redis from starving each other.
    maxWorkers: 2,
    reporters: process.env.CI === 'true' ? ['default', 'junit'] : ['default'],
    outputFile: { junit: 'test-results/junit.xml' },
    projects: [
      {
        extends: true,
        test: { name: 'server', include: ['test/**/*.test.ts', 'src/**/*.test.ts'], environment: 'node' },
      },
      {
        // The console's component tests: Preact components rendered into happy-dom's document.
        extends: true,
        oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
        test: {
          name: 'console',
          include: ['console/**/*.test.{ts,tsx}'],
          environment: 'happy-dom',
          // The console's API and stream URLs are made from its origin.
          environmentOptions: { happyDOM: { url: 'https://console.test/console/' } },
          setupFiles: ['console/test-setup.ts'],
        },
      },
    ],
  },
});
