import { afterAll, describe, expect, it } from 'vitest';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { expectTheDemoClaims, runDemo } from './demo-run.js';

// In the chaos project (npm run test:chaos): the same crash demo, its workers killed, on the server.
describe('npm start against PostgreSQL (DATABASE_URL)', () => {
  let store: TestStore | undefined;
  afterAll(async () => store?.close());

  it('uses the server and shows the same', async () => {
    store = await createPgTestStore();
    const report = await runDemo(['--orders', '6', '--kills', '2'], { DATABASE_URL: store.url! });
    expect(report.store).toBe('pg');
    expect(report.dataLocation).toMatch(/^PostgreSQL at 127\.0\.0\.1:\d+\/lf_test_/);
    expectTheDemoClaims(report);
  }, 180_000);
});
