import { sql, type Kysely } from 'kysely';
import type { LedgerflowDatabase } from '../store/tables.js';

/**
 * The test clock: database time that a test moves forward.
 *
 * The runtime reads time only from the database (`statement_timestamp()`, and `now()` in a few
 * column defaults; DESIGN.md "Leases, fencing and time"), and workers only contribute durations.
 * So the kit moves the database's clock instead of rewriting stored instants: it creates
 * `statement_timestamp()`, `now()`, `transaction_timestamp()` and `clock_timestamp()` in the schema {@link CLOCK_SCHEMA},
 * each the real function plus an offset kept in one row, and puts that schema before
 * `pg_catalog` in the session's `search_path` (PostgreSQL searches `pg_catalog` first only when
 * it is not listed). Every unqualified call — in the runtime's statements and in the PL/pgSQL of
 * the core migrations (`queue_grant`, the triggers), which resolve names when they run — reads the
 * moved clock. Column defaults were bound to `pg_catalog` when the tables were created, so
 * {@link installTestClock} points them at the clock too.
 *
 * `advanceTime(ms)` is then one UPDATE: every instant the runtime stored (run_after, deadlines,
 * leases, wait deadlines, intent horizons, debounce windows, schedule ticks, queue rate windows,
 * backoffs) keeps its value and simply falls due, as it would after `ms` of waiting — nothing
 * is shifted, so nothing can be missed. Stored instants written later are on the moved clock too.
 * Needs one session (PGlite is one); a pg pool would need the setting on every connection.
 */
export const CLOCK_SCHEMA = 'ledgerflow_test_clock';

/**
 * The time functions the runtime calls unqualified, with their volatility; each is the real one
 * plus the offset. `clock_timestamp()` is read by `queue_grant` (core 0018) once it holds the
 * queue's lock: left unmoved, a grant would be dated before the moved clock and rate windows
 * would never open under `advanceTime`. It stays volatile (a new instant at every call).
 */
const CLOCK_FUNCTIONS = {
  statement_timestamp: 'STABLE',
  now: 'STABLE',
  transaction_timestamp: 'STABLE',
  clock_timestamp: 'VOLATILE',
} as const;
const CLOCK_FUNCTION_NAMES = Object.keys(CLOCK_FUNCTIONS) as ReadonlyArray<keyof typeof CLOCK_FUNCTIONS>;

/** Creates the clock (offset 0), routes the session's time functions and the defaults through it. */
export async function installTestClock(db: Kysely<LedgerflowDatabase>): Promise<void> {
  await sql
    .raw(
      [
        `CREATE SCHEMA IF NOT EXISTS ${CLOCK_SCHEMA}`,
        `CREATE TABLE IF NOT EXISTS ${CLOCK_SCHEMA}.clock (one boolean PRIMARY KEY DEFAULT true CHECK (one), offset_ms double precision NOT NULL)`,
        `INSERT INTO ${CLOCK_SCHEMA}.clock (offset_ms) VALUES (0) ON CONFLICT (one) DO UPDATE SET offset_ms = 0`,
        ...CLOCK_FUNCTION_NAMES.map(
          (fn) =>
            `CREATE OR REPLACE FUNCTION ${CLOCK_SCHEMA}.${fn}() RETURNS timestamptz LANGUAGE sql ${CLOCK_FUNCTIONS[fn]} AS ` +
            `$$ SELECT pg_catalog.${fn}() + (SELECT offset_ms FROM ${CLOCK_SCHEMA}.clock) * interval '1 millisecond' $$`,
        ),
        `SET search_path = ${CLOCK_SCHEMA}, "$user", public, pg_catalog`,
      ].join(';\n'),
    )
    .execute(db);
  // Defaults such as `created_at DEFAULT now()` name pg_catalog's function by oid; re-point them
  // (built-in functions are pinned, so pg_depend does not list them: the deparsed text is matched).
  const { rows } = await sql<{ table_name: string; column_name: string; expression: string }>`
    SELECT c.relname AS table_name, a.attname AS column_name, pg_get_expr(d.adbin, d.adrelid) AS expression
      FROM pg_attrdef d
      JOIN pg_class c ON c.oid = d.adrelid
      JOIN pg_namespace n ON n.oid = c.relnamespace
      JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
     WHERE n.nspname = 'ledgerflow'
       AND pg_get_expr(d.adbin, d.adrelid) = ANY(${CLOCK_FUNCTION_NAMES.flatMap((fn) => [`${fn}()`, `pg_catalog.${fn}()`])}::text[])`.execute(
    db,
  );
  for (const row of rows) {
    const fn = row.expression.replace(/^pg_catalog\./, '');
    await sql
      .raw(
        `ALTER TABLE ledgerflow.${quote(row.table_name)} ALTER COLUMN ${quote(row.column_name)} SET DEFAULT ${CLOCK_SCHEMA}.${fn}`,
      )
      .execute(db);
  }
}

/** Moves the clock forward by `ms` (one UPDATE); resolves to the new offset in milliseconds. */
export async function advanceTestClock(db: Kysely<LedgerflowDatabase>, ms: number): Promise<number> {
  if (!(typeof ms === 'number' && Number.isFinite(ms) && ms >= 0)) {
    throw new RangeError(
      `advanceTime(ms): ms must be a finite number of milliseconds >= 0 (got ${String(ms)}); time only moves forward.`,
    );
  }
  const { rows } = await sql<{ offset_ms: number }>`
    UPDATE ${sql.raw(CLOCK_SCHEMA)}.clock SET offset_ms = offset_ms + ${ms} RETURNING offset_ms`.execute(db);
  return Number(rows[0]!.offset_ms);
}

/**
 * Moves the clock to the moment nothing a dead or timed-out attempt left behind can still be in
 * flight: past every lease still held (`workflow_run.lease_expires_at` of a `running` run) and every
 * open intent's horizon (`step_effect.reconcile_after`, which is also where an inconclusive
 * lookup's backoff is stored). Nothing else is moved past: retry backoffs, sleeps and timeouts are
 * the test's to move with {@link advanceTestClock}. Never moves back; resolves to the new offset.
 */
export async function advanceTestClockPastHorizons(db: Kysely<LedgerflowDatabase>): Promise<number> {
  const { rows } = await sql<{ ms: number | null }>`
    SELECT ceil(extract(epoch FROM (GREATEST(
             (SELECT max(lease_expires_at) FROM ledgerflow.workflow_run WHERE status = 'running'),
             (SELECT max(reconcile_after) FROM ledgerflow.step_effect WHERE status = 'intent')
           ) - statement_timestamp())) * 1000)::double precision AS ms`.execute(db);
  return advanceTestClock(db, Math.max(0, Number(rows[0]?.ms ?? 0)));
}

/** The moved clock's current time, as the runtime sees it. */
export async function testClockNow(db: Kysely<LedgerflowDatabase>): Promise<Date> {
  const { rows } = await sql<{ now: Date }>`SELECT statement_timestamp() AS now`.execute(db);
  return rows[0]!.now;
}

function quote(identifier: string): string {
  return `"${identifier.replaceAll('"', '""')}"`;
}
