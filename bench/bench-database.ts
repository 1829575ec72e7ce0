import { sql } from 'kysely';
import { createPgStore } from '../runtime/store/pg/pg-store.js';
import { migrateForTest } from '../tests/support/migrate-for-test.js';
import type { BenchServer } from './environment.js';
import { BENCH_APP_SQL, BENCH_WORKFLOWS } from './workloads/bench-workflows.js';
import { QUEUE_BENCH_WORKFLOWS } from './workloads/queues.js';

/** A fresh database with the core schema, the bench workflows and the application table; no session left open. */
export async function prepareBenchDatabase(server: BenchServer, name: string): Promise<{ url: string; name: string }> {
  const url = await server.freshDatabase(name);
  const store = createPgStore({ connectionString: url, maxConnections: 1 });
  try {
    await migrateForTest(store, [...BENCH_WORKFLOWS, ...QUEUE_BENCH_WORKFLOWS]);
    await sql.raw(BENCH_APP_SQL).execute(store.db);
  } finally {
    await store.close();
  }
  return { url, name };
}
