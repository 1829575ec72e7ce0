/*
 * `ledgerflow/schema`: for code that reads ledgerflow's own tables or its errors — the Kysely types
 * of the `ledgerflow.*` tables (`LedgerflowDatabase`, a `…Table` and `…Row` type per table), the
 * run status sets, the NOTIFY channel a worker listens on, the SQLSTATEs ledgerflow names, and the
 * core migrations that create the schema.
 */
import '../dsl/check-peer-dependencies.js';
export type * from './store/tables.js';
export { FINAL_RUN_STATUSES, RUN_STATUSES } from './store/tables.js';
export { SETTLED_RUN_STATUSES } from './client/run-details.js';
export { RUNS_CHANNEL } from './store/channels.js';
export { SQLSTATE, sqlStateOf, type SqlState } from './store/sqlstate.js';
export { CORE_MIGRATIONS_DIR, coreMigrations, type CoreMigration } from './migrate/core-migrations.js';
