import { afterAll, beforeAll, describe } from 'vitest';
import type { StoreKind } from '../../runtime/store/store.js';
import { createPGliteTestStore, createPgTestStore, type TestStore } from './test-stores.js';

const ALL_KINDS: readonly StoreKind[] = ['pg', 'pglite'];

/**
 * Which stores conformance suites run on: all, unless `LEDGERFLOW_TEST_STORES` narrows it
 * (e.g. `LEDGERFLOW_TEST_STORES=pg` while iterating on one driver).
 */
export function testStoreKinds(): readonly StoreKind[] {
  const requested = process.env['LEDGERFLOW_TEST_STORES'];
  if (!requested) return ALL_KINDS;
  const kinds = requested.split(',').map((k) => k.trim());
  const unknown = kinds.filter((k) => !ALL_KINDS.includes(k as StoreKind));
  if (unknown.length > 0) {
    throw new Error(`LEDGERFLOW_TEST_STORES has unknown store kind(s) ${unknown.join(', ')}; use pg, pglite or both.`);
  }
  return kinds as StoreKind[];
}

/**
 * Runs one suite against each store (the conformance pattern): a describe block per kind,
 * each with its own fresh database (core schema migrated) created in `beforeAll` and dropped
 * in `afterAll`. Call `getStore()` inside tests and hooks, not while declaring them.
 *
 * @example
 * describeStores('client.start', (getStore, kind) => {
 *   beforeAll(() => migrateForTest(getStore(), [orders]));
 *   it('creates a run', async () => { … getStore().db … });
 * });
 */
export function describeStores(title: string, suite: (getStore: () => TestStore, kind: StoreKind) => void): void {
  for (const kind of testStoreKinds()) {
    describe(`${title} [${kind}]`, () => {
      let store: TestStore | undefined;
      beforeAll(async () => {
        store = kind === 'pg' ? await createPgTestStore() : await createPGliteTestStore();
      });
      afterAll(async () => {
        await store?.close();
      });
      suite(() => {
        if (store === undefined) throw new Error('The test store is not ready: call getStore() inside a test or hook.');
        return store;
      }, kind);
    });
  }
}
