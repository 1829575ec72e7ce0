import { defaultServerConditions } from 'vite';
import { defineConfig } from 'vitest/config';

/**
 * The repository runs from its TypeScript sources: `ledgerflow/*` imports resolve through the
 * `ledgerflow-source` export condition, in the test files (resolve.conditions) and in every
 * process a test starts (NODE_OPTIONS, inherited by `node --import tsx …` and `bin/ledgerflow.js`).
 */
const SOURCE_CONDITION = 'ledgerflow-source';

export default defineConfig({
  resolve: { conditions: [SOURCE_CONDITION, ...defaultServerConditions] },
  ssr: { resolve: { conditions: [SOURCE_CONDITION, ...defaultServerConditions] } },
  test: {
    include: ['tests/**/*.test.ts'],
    // The packaging test builds, packs and installs the package: `npm run test:package`.
    exclude: ['tests/package/**'],
    globalSetup: ['tests/support/global-setup.ts'],
    env: { NODE_OPTIONS: [process.env['NODE_OPTIONS'], `--conditions=${SOURCE_CONDITION}`].filter(Boolean).join(' ') },
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // Two cores: PGlite initialisation and child-process tests are CPU-heavy.
    maxWorkers: 2,
  },
});
