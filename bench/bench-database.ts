import { sql } from 'kysely';
import pg from 'pg';
import { createPgStore } from '../runtime/store/pg/pg-store.js';
import { migrateForTest } from '../tests/support/migrate-for-test.js';
import type { BenchServer } from './environment.js';
import type { ReservationCounts } from './exactly-once.js';
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

/** What bench_app.reservation holds: the three-step workload's application rows, checked by bench/exactly-once.ts. */
export async function countReservations(url: string): Promise<ReservationCounts> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<ReservationCounts>(
      'SELECT count(*)::int AS "rows", count(DISTINCT run_id)::int AS runs FROM bench_app.reservation',
    );
    return rows[0] ?? { rows: 0, runs: 0 };
  } finally {
    await client.end();
  }
}
