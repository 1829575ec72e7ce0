import { readFileSync } from 'node:fs';
import { globSync } from 'tinyglobby';
import { configDefaults, defineConfig } from 'vitest/config';

/**
 * The repository runs from its TypeScript sources: `ledgerflow/*` imports resolve through the
 * `ledgerflow-source` export condition, in the test files (resolve.conditions) and in every
 * process a test starts (NODE_OPTIONS, inherited by `node --import tsx …` and `bin/ledgerflow.js`).
 */
const SOURCE_CONDITION = 'ledgerflow-source';

/**
 * What test files resolve with, in vite's client and server resolution alike. Not vite's 'module'
 * condition: a dependency vitest leaves to Node (externalized) must resolve to what Node can load
 * (@opentelemetry/api's 'module' build has extensionless imports).
 */
const RESOLVE_CONDITIONS = [SOURCE_CONDITION, 'node', 'development|production'];

/** Files that replace modules with vi.mock: they need a module registry of their own. */
const OWN_MODULES = ['tests/runtime/state-machines.test.ts'];

/**
 * The slow multi-process suites: the chaos run (workers SIGKILLed, backends terminated, the
 * server restarted), a standby promoted under load and a demoted primary, the worker fleets, the
 * crash demo on PostgreSQL, the 100 000-run prune and the claim and dashboard-list plans over
 * 1 000 000 runs: tens of seconds each. `npm test` runs everything else; `npm run test:chaos`
 * runs these; `.ci/run` runs both on every submission.
 */
const CHAOS = [
  'tests/chaos/**/*.test.ts',
  'tests/fuzz/**/*.test.ts',
  'tests/failover/*.test.ts',
  'tests/runtime/queue-fleet.test.ts',
  'tests/runtime/schedule-fleet.test.ts',
  'tests/runtime/prune-100k.test.ts',
  'tests/examples/demo-pg.test.ts',
  'tests/runtime/claim-scale-plan.test.ts',
  'tests/dashboard/run-list-plan.test.ts',
];

/** The failover tests alone (`npm run test:failover`); they are part of the chaos project too. */
const FAILOVER = ['tests/failover/*.test.ts'];

/**
 * `npm run test:pgbouncer`: the store conformance suite — every test file that runs its suites with
 * `describeStores` (tests/support/describe-stores.ts), on PostgreSQL only — with each test store
 * behind a PgBouncer in transaction pooling mode (tests/support/pgbouncer.ts, started by
 * global-setup.ts), and the PgBouncer tests of their own in tests/pgbouncer/ (a chaos run through
 * it, polling without LISTEN, and what prepared statements would do there).
 */
const PGBOUNCER_OWN = ['tests/pgbouncer/**/*.test.ts'];
const CONFORMANCE = globSync('tests/**/*.test.ts', { ignore: ['tests/pgbouncer/**'] })
  .filter((file) => readFileSync(file, 'utf8').includes('describeStores('))
  .sort();
/**
 * Conformance files left out of the PgBouncer run, each for a reason of the test's, not the store's.
 */
const NOT_THROUGH_PGBOUNCER: string[] = [];

/** The packaging test builds, packs and installs the package: `npm run test:package` (vitest.package.config.ts). */
const PACKAGE = ['tests/package/**'];

export default defineConfig({
  resolve: { conditions: RESOLVE_CONDITIONS },
  ssr: { resolve: { conditions: RESOLVE_CONDITIONS } },
  test: {
    globalSetup: ['tests/support/global-setup.ts'],
    env: { NODE_OPTIONS: [process.env['NODE_OPTIONS'], `--conditions=${SOURCE_CONDITION}`].filter(Boolean).join(' ') },
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // Three test processes on two cores: many tests wait on PostgreSQL or on child processes, so
    // a third keeps the cores busy (npm test: 196 s with two, 177 s with three, on a quiet 2-core
    // machine). `npm run test:chaos` passes --maxWorkers 2: its suites are the multi-process,
    // lease-timed ones, and a third beside them only stalls their workers.
    maxWorkers: 3,
    projects: [
      // Test files share their worker process and its loaded modules (isolate: false): loading
      // the runtime, ts-morph and the PGlite template once per worker instead of once per file
      // halves the suite's time. Every file opens and closes its own stores and workers.
      {
        extends: true,
        test: {
          name: 'main',
          include: ['tests/**/*.test.ts'],
          exclude: [...configDefaults.exclude, ...CHAOS, ...FAILOVER, ...OWN_MODULES, ...PACKAGE, ...PGBOUNCER_OWN],
          isolate: false,
        },
      },
      { extends: true, test: { name: 'own-modules', include: OWN_MODULES } },
      { extends: true, test: { name: 'chaos', include: CHAOS } },
      { extends: true, test: { name: 'failover', include: FAILOVER } },
      {
        extends: true,
        test: {
          name: 'pgbouncer',
          include: [...CONFORMANCE, ...PGBOUNCER_OWN],
          exclude: [...configDefaults.exclude, ...CHAOS, ...OWN_MODULES, ...PACKAGE, ...NOT_THROUGH_PGBOUNCER],
          env: { LEDGERFLOW_TEST_STORES: 'pg' },
          isolate: false,
        },
      },
    ],
  },
});
