import { sql } from 'kysely';
import pg from 'pg';
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

/** Throws unless the three-step workload wrote exactly one application row per workflow. */
export async function expectReservations(url: string, workflows: number, engine: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ n: number; runs: number }>(
      'SELECT count(*)::int AS n, count(DISTINCT run_id)::int AS runs FROM bench_app.reservation',
    );
    const { n, runs } = rows[0] ?? { n: 0, runs: 0 };
    if (n !== workflows || runs !== workflows) {
      throw new Error(`${engine}: ${workflows} three-step workflows wrote ${n} application rows for ${runs} runs (expected one each)`);
    }
  } finally {
    await client.end();
  }
}
