import { sql, type Kysely, type Transaction } from 'kysely';
import { MigrationError } from '../errors.js';
import type { Store } from '../store/store.js';
import { sqlStateOf } from '../store/sqlstate.js';
import { versionHasRuns } from '../store/version-has-runs.js';
import type { LedgerflowDatabase } from '../store/tables.js';
import { CORE_PREFIX, coreMigrations, isLegacyCoreMigration, LEGACY_CORE_MIGRATION } from './core-migrations.js';
import { releasedDefinitionHash } from '../../codegen/emit/workflow-version-sql.js';
import { DEFAULT_MIGRATIONS_DIR, loadMigrations, type Migration, type MigrationSource } from './migration-source.js';

export interface MigrateOptions {
  /**
   * Directories of `NNNN_name.sql` files and/or in-memory migrations. Default: `generated/migrations`.
   * ledgerflow's own core migrations are not among them: they ship with the package and always apply first.
   */
  readonly sources?: readonly MigrationSource[];
  /** Called after each migration commits (progress output), core migrations included. */
  readonly onApplied?: (migration: Migration) => void;
}

export interface MigrateResult {
  /**
   * Applied by this call, in order: ledgerflow's core migrations first (named `core/NNNN_name.sql`),
   * then those of the sources.
   */
  readonly applied: readonly string[];
  /** Already recorded with the same checksum (by an earlier run or a concurrent process). */
  readonly skipped: readonly string[];
  /**
   * Core migrations recorded by this call without running them, because the database already has
   * their schema: it was created by an earlier ledgerflow whose codegen wrote the core schema into
   * the project's `0001_core.sql`, and that is recorded.
   */
  readonly adopted: readonly string[];
  /**
   * Files in the sources that are the core schema as an earlier ledgerflow's codegen wrote it
   * (`0001_core.sql`): superseded by the core migrations, so never run; recorded if they were not,
   * and kept as they are.
   */
  readonly superseded: readonly string[];
  /** Recorded in the database but in none of the sources, e.g. applied from a newer checkout. */
  readonly unknown: readonly string[];
  /**
   * Migrations of draft workflow versions that changed since they were applied, run again by this
   * call in place of what they registered (the version had no runs; core 0020) — or, for a draft
   * that ran here and is now released with the shape it ran with, recorded as released in place.
   */
  readonly replaced: readonly string[];
}

/**
 * Every migration run takes this transaction-scoped advisory lock first, so concurrent
 * `migrate` calls (several workers starting at once) apply each file exactly once, in order.
 * A transaction lock rather than a session lock: it works on one pooled connection per
 * transaction and on PGlite alike, and cannot leak if a process dies.
 */
const MIGRATION_LOCK_KEY = 0x4c46_4d49; // "LFMI"

const LEDGER_DDL = `CREATE SCHEMA IF NOT EXISTS ledgerflow;
CREATE TABLE IF NOT EXISTS ledgerflow.schema_migration (
    name       text        PRIMARY KEY,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);`;

/**
 * Applies ledgerflow's core migrations (shipped in the package, recorded as `core/NNNN_name.sql`)
 * and then the sources' migrations that are not yet recorded in `ledgerflow.schema_migration`,
 * each in its own transaction together with its ledger row, so a failing file leaves nothing
 * behind. Refuses to run at all when a file that was already applied has changed since (its
 * checksum differs): migrations are append-only. Safe to run twice and from several processes at once.
 *
 * A database created by an earlier ledgerflow (whose codegen wrote the core schema into the
 * project's `0001_core.sql`) is upgraded in place: the core migration equivalent to that file is
 * recorded without running, and the old file, if still in a source, is recognised and never run.
 *
 * A migration must not manage transactions itself (no BEGIN/COMMIT, no `CREATE INDEX CONCURRENTLY`).
 *
 * @example
 * const { applied } = await migrate(store); // core, then generated/migrations/*.sql
 * await migrate(store, { sources: ['generated/migrations', 'db/migrations'] });
 */
export async function migrate(store: Store, options: MigrateOptions = {}): Promise<MigrateResult> {
  const core = coreMigrations();
  const fromSources = loadMigrations(options.sources ?? [DEFAULT_MIGRATIONS_DIR]);
  const legacy = fromSources.filter(isLegacyCoreMigration);
  const user = fromSources.filter((m) => !isLegacyCoreMigration(m));
  const db = store.db;

  const recorded = await db.transaction().execute(async (trx) => {
    await lock(trx);
    await sql.raw(LEDGER_DDL).execute(trx);
    return trx.selectFrom('ledgerflow.schema_migration').select(['name', 'checksum']).orderBy('name').execute();
  });

  const known = new Map<string, Migration>([...core, ...fromSources].map((m) => [m.name, m]));
  const edited = recorded.flatMap((row) => {
    const migration = known.get(row.name);
    return migration !== undefined && migration.checksum !== row.checksum ? [{ migration, applied: row.checksum }] : [];
  });
  // A changed migration that registered a draft version is not an edit of history: it is replaced (below).
  const drafts = await draftsRegisteredBy(db, recorded, edited);
  const ranDrafts = edited.flatMap(({ migration }) => {
    const draft = drafts.get(migration.name);
    return draft?.hasRuns === true && !releasesAsRan(migration, draft) ? [{ migration, ...draft }] : [];
  });
  if (ranDrafts.length > 0) throw ranDraftError(ranDrafts);
  const changed = edited.filter(({ migration }) => !drafts.has(migration.name));
  if (changed.length > 0) throw changedError(changed);

  const recordedNames = new Set(recorded.map((r) => r.name));
  const applied: string[] = [];
  const skipped: string[] = [];
  const adopted: string[] = [];
  const superseded: string[] = [];
  const replaced: string[] = [];
  const outcomes = { applied, skipped, adopted, replaced };
  const run = async (migrations: readonly Migration[]): Promise<void> => {
    for (const migration of migrations) {
      const draft = drafts.get(migration.name);
      const outcome =
        draft !== undefined
          ? await replaceDraft(db, migration, draft)
          : recordedNames.has(migration.name)
            ? 'skipped'
            : await applyOne(db, migration);
      outcomes[outcome].push(migration.name);
      if (outcome === 'applied') options.onApplied?.(migration);
    }
  };
  await run(core);
  // Only now, with the core schema in place: a recorded old file makes its core migration count as applied.
  for (const old of legacy) {
    if (!recordedNames.has(old.name)) await recordOnly(db, old);
    superseded.push(old.name);
  }
  await run(user);
  return {
    applied,
    skipped,
    adopted,
    superseded,
    unknown: recorded.filter((row) => !known.has(row.name) && !isLegacyCoreMigration(row)).map((row) => row.name),
    replaced,
  };
}

/** The core migration that added drafts: before it, no migration can have registered one. */
const DRAFTS_CORE_MIGRATION = `${CORE_PREFIX}0020_workflow_fingerprints.sql`;

interface DraftRegistration {
  readonly workflowName: string;
  readonly version: number;
  readonly definitionHash: string;
  readonly hasRuns: boolean;
}

/**
 * A draft's migration, now released, that registers the shape its runs here ran with: the release
 * of what ran, recorded in place (`draft_migration` cleared) rather than replaced. The rest of what
 * runs depend on (schemas) the workers compare at start (workflow_fingerprint).
 */
function releasesAsRan(migration: Migration, draft: DraftRegistration): boolean {
  const released = releasedDefinitionHash(migration.sql);
  return released !== null && released.version === draft.version && released.hash === draft.definitionHash;
}

/** Per changed migration that registered a draft workflow version (`workflow_version.draft_migration`), that version. */
async function draftsRegisteredBy(
  db: Kysely<LedgerflowDatabase>,
  recorded: readonly { name: string }[],
  changed: ReadonlyArray<{ migration: Migration }>,
): Promise<Map<string, DraftRegistration>> {
  const names = changed.filter(({ migration }) => !isCore(migration)).map(({ migration }) => migration.name);
  if (names.length === 0 || !recorded.some((r) => r.name === DRAFTS_CORE_MIGRATION)) return new Map();
  const { rows } = await sql<{
    draft_migration: string;
    workflow_name: string;
    version: number;
    definition_hash: string;
    has_runs: boolean;
  }>`
    SELECT v.draft_migration, v.workflow_name, v.version, v.definition_hash, ${hasRuns} AS has_runs
      FROM ledgerflow.workflow_version v
     WHERE v.draft_migration = ANY(${names}::text[])`.execute(db);
  return new Map(
    rows.map((r) => [
      r.draft_migration,
      { workflowName: r.workflow_name, version: r.version, definitionHash: r.definition_hash, hasRuns: r.has_runs },
    ]),
  );
}

const hasRuns = versionHasRuns('v');

/**
 * Runs a draft's changed migration in place of what its earlier text registered: in one
 * transaction, under the lock, the version's rows go (its step definitions, its fingerprint, the
 * schedules that start it — workers register those again) and the new text runs and is recorded.
 * Refused if the version got a run meanwhile.
 */
async function replaceDraft(
  db: Kysely<LedgerflowDatabase>,
  migration: Migration,
  draft: DraftRegistration,
): Promise<'replaced'> {
  return db.transaction().execute(async (trx) => {
    await lock(trx);
    const { rows } = await sql<{ has_runs: boolean }>`
      SELECT ${hasRuns} AS has_runs FROM ledgerflow.workflow_version v
       WHERE v.workflow_name = ${draft.workflowName} AND v.version = ${draft.version} FOR UPDATE`.execute(trx);
    if (rows[0]?.has_runs === true) {
      if (!releasesAsRan(migration, draft)) throw ranDraftError([{ migration, ...draft, hasRuns: true }]);
      await trx
        .updateTable('ledgerflow.workflow_version')
        .set({ draft_migration: null })
        .where('workflow_name', '=', draft.workflowName)
        .where('version', '=', draft.version)
        .execute();
      await trx
        .updateTable('ledgerflow.schema_migration')
        .set({ checksum: migration.checksum })
        .where('name', '=', migration.name)
        .execute();
      return 'replaced' as const;
    }
    const version = (table: 'ledgerflow.schedule' | 'ledgerflow.workflow_step_def') =>
      trx.deleteFrom(table).where('workflow_name', '=', draft.workflowName);
    await version('ledgerflow.schedule').where('workflow_version', '=', draft.version).execute();
    await version('ledgerflow.workflow_step_def').where('version', '=', draft.version).execute();
    await trx
      .deleteFrom('ledgerflow.workflow_version')
      .where('workflow_name', '=', draft.workflowName)
      .where('version', '=', draft.version)
      .execute();
    try {
      await sql.raw(migration.sql).execute(trx);
    } catch (error) {
      throw failedError(migration, error);
    }
    await trx
      .updateTable('ledgerflow.schema_migration')
      .set({ checksum: migration.checksum })
      .where('name', '=', migration.name)
      .execute();
    return 'replaced' as const;
  });
}

function ranDraftError(drafts: ReadonlyArray<{ migration: Migration } & DraftRegistration>): MigrationError {
  const lines = drafts.map(
    ({ migration, workflowName, version }) =>
      `  ${migration.origin}: draft workflow "${workflowName}" v${version} changed, but it has runs in this database`,
  );
  return new MigrationError(
    `${drafts.length === 1 ? 'A draft workflow version that has' : 'Draft workflow versions that have'} runs changed:\n${lines.join('\n')}\n` +
      'A draft is free to change only until it runs somewhere: declare the change as a new version (bump `version`, keep ' +
      'this one declared as it ran, `ledgerflow codegen`, then `ledgerflow migrate`), or restore the definition that ran. ' +
      'Nothing was applied.',
  );
}

/**
 * Applies one migration under the lock: `skipped` when another process applied it meanwhile,
 * `adopted` (recorded, not run) for the core migration an earlier ledgerflow's `0001_core.sql` already applied.
 */
async function applyOne(
  db: Kysely<LedgerflowDatabase>,
  migration: Migration,
): Promise<'applied' | 'skipped' | 'adopted'> {
  return db.transaction().execute(async (trx) => {
    await lock(trx);
    const rows = await trx
      .selectFrom('ledgerflow.schema_migration')
      .select(['name', 'checksum'])
      .where('name', 'in', [migration.name, LEGACY_CORE_MIGRATION.name])
      .execute();
    const row = rows.find((r) => r.name === migration.name);
    if (row !== undefined) {
      if (row.checksum !== migration.checksum) throw changedError([{ migration, applied: row.checksum }]);
      return 'skipped';
    }
    const adopt = migration.name === LEGACY_CORE_MIGRATION.supersededBy && rows.some(isLegacyCoreMigration);
    if (!adopt) {
      try {
        await sql.raw(migration.sql).execute(trx);
      } catch (error) {
        throw failedError(migration, error);
      }
    }
    await trx
      .insertInto('ledgerflow.schema_migration')
      .values({ name: migration.name, checksum: migration.checksum })
      .execute();
    return adopt ? 'adopted' : 'applied';
  });
}

/** Records a superseded file without running it (unless recorded meanwhile). */
async function recordOnly(db: Kysely<LedgerflowDatabase>, migration: Migration): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await lock(trx);
    await trx
      .insertInto('ledgerflow.schema_migration')
      .values({ name: migration.name, checksum: migration.checksum })
      .onConflict((oc) => oc.column('name').doNothing())
      .execute();
  });
}

async function lock(trx: Transaction<LedgerflowDatabase>): Promise<void> {
  await sql`SELECT pg_advisory_xact_lock(${sql.lit(MIGRATION_LOCK_KEY)})`.execute(trx);
}

function isCore(migration: Migration): boolean {
  return migration.name.startsWith(CORE_PREFIX);
}

function changedError(changed: ReadonlyArray<{ migration: Migration; applied: string }>): MigrationError {
  const lines = changed.map(
    ({ migration, applied }) =>
      `  ${isCore(migration) ? `${migration.name} (ledgerflow's core migration ${migration.origin})` : migration.origin}: ` +
      `applied with checksum ${applied}, the file now has ${migration.checksum}`,
  );
  const advice = [
    ...(changed.some(({ migration }) => !isCore(migration))
      ? [
          'Applied migrations are append-only. Restore the original file (e.g. `git checkout` it) and put the change ' +
            'in a new migration with a higher number.',
        ]
      : []),
    ...(changed.some(({ migration }) => isCore(migration))
      ? [
          "ledgerflow's core migrations ship with the package and never change once released, so a changed one is a " +
            'bug in ledgerflow (or a modified installation): reinstall the ledgerflow version that migrated this ' +
            'database or a newer one, and report it if that does not help.',
        ]
      : []),
  ];
  return new MigrationError(
    `${changed.length === 1 ? 'A migration was' : 'Migrations were'} changed after being applied:\n${lines.join('\n')}\n` +
      `${advice.join('\n')} Nothing was applied.`,
  );
}

function failedError(migration: Migration, error: unknown): MigrationError {
  const state = sqlStateOf(error);
  const what = isCore(migration)
    ? `ledgerflow's core migration ${migration.name} (${migration.origin})`
    : `Migration ${migration.origin}`;
  const advice = isCore(migration)
    ? 'It was rolled back and not recorded. Core migrations ship with ledgerflow: if schema ledgerflow holds objects ' +
      'that ledgerflow.schema_migration does not account for, remove them; otherwise report this as a ledgerflow bug.'
    : 'It was rolled back and not recorded; fix the file and run `ledgerflow migrate` again.';
  return new MigrationError(
    `${what} failed${lineOf(error, migration.sql)}: ${messageOf(error)}${state ? ` (SQLSTATE ${state})` : ''}. ${advice}`,
    { cause: error },
  );
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** PostgreSQL reports a 1-based character offset into the statement; turn it into a line. */
function lineOf(error: unknown, text: string): string {
  const position = typeof error === 'object' && error !== null && 'position' in error ? Number(error.position) : NaN;
  if (!Number.isInteger(position) || position < 1) return '';
  return ` at line ${text.slice(0, position - 1).split('\n').length}`;
}
