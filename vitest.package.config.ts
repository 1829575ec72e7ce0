import { defineConfig } from 'vitest/config';

/**
 * `npm run test:package`: builds, packs and installs the package in a scratch application, the
 * way a user gets it (tests/package/). Kept out of `npm test`, which runs from the sources.
 */
export default defineConfig({
  test: {
    include: ['tests/package/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 300_000,
    pool: 'forks',
    maxWorkers: 1,
  },
});
