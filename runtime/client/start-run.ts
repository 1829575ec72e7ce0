import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import { shapeHash } from '../../dsl/workflow-shape.js';
import type { AnyWorkflow } from '../../dsl/workflow.js';
import { DuplicateRunError, MigrationError, UnknownWorkflowError, ValidationError } from '../errors.js';
import { SQLSTATE, sqlStateOf } from '../store/sqlstate.js';
import type { LedgerflowDatabase } from '../store/tables.js';
import { millis } from '../worker/claim.js';
import { RUNS_CHANNEL } from '../worker/worker.js';
import { assertRunId, parseStartInput } from './validate-input.js';

export interface StartOptions {
  /** Your own id for the run (a UUID); starting again with it returns the same run. */
  readonly runId?: string;
  /** A business key, unique per workflow (e.g. the order id); starting again with it returns the same run. */
  readonly dedupeKey?: string;
  /**
   * Cancel the run (and its children) if it is still unfinished this long after it started;
   * overrides the workflow's `timeoutMs`. The deadline is fixed on database time at the start.
   */
  readonly timeoutMs?: number;
  /**
   * Order among the runs waiting for a slot of the same queue partition: higher first (default
   * 0). Between partitions the one with the highest waiting priority goes first, then round-robin.
   */
  readonly priority?: number;
}

export interface StartedRun {
  readonly runId: string;
  /** `false` when the run id or dedupe key already named a run with the same workflow and input. */
  readonly created: boolean;
}

/** `name@version:hash` of workflow versions known to be migrated with that definition; such rows never change. */
export type MigratedVersions = Set<string>;

const MAX_DEDUPE_KEY_LENGTH = 1_000;

/**
 * Validates and writes a new run, on `db` or inside the caller's transaction. Everything that
 * can be rejected without the database (input, run id, dedupe key) is rejected before the
 * first query.
 */
export async function startRun(
  db: Kysely<LedgerflowDatabase>,
  workflow: AnyWorkflow,
  input: unknown,
  options: StartOptions,
  migrated: MigratedVersions,
): Promise<StartedRun> {
  const inputJson = parseStartInput(workflow, input);
  if (options.runId !== undefined) assertRunId(options.runId);
  const { dedupeKey } = options;
  if (dedupeKey !== undefined && (dedupeKey.length === 0 || dedupeKey.length > MAX_DEDUPE_KEY_LENGTH)) {
    throw new ValidationError(`The dedupe key must be 1 to ${MAX_DEDUPE_KEY_LENGTH} characters long.`, [
      `dedupeKey: length ${dedupeKey.length}`,
    ]);
  }
  const timeoutMs = options.timeoutMs ?? workflow.timeoutMs;
  if (timeoutMs !== undefined && !(typeof timeoutMs === 'number' && timeoutMs > 0 && Number.isFinite(timeoutMs))) {
    throw new ValidationError(`timeoutMs must be a number of milliseconds > 0 (got ${String(timeoutMs)}).`, [`timeoutMs: ${String(timeoutMs)}`]);
  }
  if (options.priority !== undefined && !(Number.isInteger(options.priority) && Math.abs(options.priority) <= 1_000_000)) {
    throw new ValidationError(`priority must be an integer from -1000000 to 1000000 (got ${String(options.priority)}).`, [
      `priority: ${String(options.priority)}`,
    ]);
  }
  // PostgreSQL prints uuids in lower case; comparing with what it returns needs the same form.
  const runId = options.runId?.toLowerCase() ?? randomUUID();

  await assertMigrated(db, workflow, migrated);
  // A conflicting row can vanish between the insert and the look-up (the run was deleted);
  // then the insert is simply tried again.
  for (let round = 0; round < 3; round++) {
    // One statement: the insert and, only if it inserted, the NOTIFY (delivered at commit, so a
    // worker never wakes for a run it cannot see yet). Outside a caller's transaction it is its
    // own commit: one round trip per start.
    const inserted = await db
      .with('inserted', (qb) =>
        qb
          .insertInto('ledgerflow.workflow_run')
          .values({
            id: runId,
            workflow_name: workflow.name,
            workflow_version: workflow.version,
            input: inputJson,
            dedupe_key: dedupeKey ?? null,
            ...(timeoutMs !== undefined ? { deadline_at: sql<Date>`statement_timestamp() + ${millis(timeoutMs)}` } : {}),
            ...(options.priority !== undefined ? { priority: options.priority } : {}),
          })
          .onConflict((oc) => oc.doNothing())
          .returning('id'),
      )
      .selectFrom('inserted')
      .select(['inserted.id', sql<string>`pg_notify(${RUNS_CHANNEL}, inserted.id::text)`.as('notified')])
      .executeTakeFirst();
    if (inserted !== undefined) return { runId, created: true };
    const existing = await findExisting(db, workflow, runId, options.runId !== undefined, dedupeKey, inputJson);
    if (existing !== undefined) return { runId: existing, created: false };
  }
  throw new Error(`Run ${runId} conflicted with an existing run that then disappeared, three times in a row.`);
}

async function findExisting(
  db: Kysely<LedgerflowDatabase>,
  workflow: AnyWorkflow,
  runId: string,
  runIdGiven: boolean,
  dedupeKey: string | undefined,
  inputJson: string,
): Promise<string | undefined> {
  const rows = await db
    .selectFrom('ledgerflow.workflow_run')
    .select(['id', 'workflow_name', 'workflow_version', 'dedupe_key', sql<boolean>`input = ${inputJson}::jsonb`.as('same_input')])
    .where((eb) =>
      eb.or([
        eb('id', '=', runId),
        ...(dedupeKey !== undefined ? [eb.and([eb('workflow_name', '=', workflow.name), eb('dedupe_key', '=', dedupeKey)])] : []),
      ]),
    )
    .execute();
  const row = rows[0];
  if (row === undefined) return undefined;
  const asked = `workflow "${workflow.name}"${dedupeKey !== undefined ? ` with dedupe key "${dedupeKey}"` : ''}`;
  if (rows.length > 1) {
    throw new DuplicateRunError(
      `Run id ${runId} and dedupe key "${dedupeKey}" name two different runs (${rows.map((r) => r.id).join(', ')}). ` +
        'Pass one or the other, or both of the same run.',
    );
  }
  if (row.workflow_name !== workflow.name) {
    throw new DuplicateRunError(
      `Run id ${runId} already belongs to a run of workflow "${row.workflow_name}"; it cannot start ${asked}. Use another run id.`,
    );
  }
  if (runIdGiven && row.id !== runId) {
    throw new DuplicateRunError(
      `Dedupe key "${dedupeKey}" of workflow "${workflow.name}" already names run ${row.id}, not the run id ${runId} you passed.`,
    );
  }
  if (row.dedupe_key !== (dedupeKey ?? null)) {
    throw new DuplicateRunError(
      `Run ${runId} already exists with ${row.dedupe_key === null ? 'no dedupe key' : `dedupe key "${row.dedupe_key}"`}; ` +
        `it cannot be started again with ${dedupeKey === undefined ? 'none' : `"${dedupeKey}"`}.`,
    );
  }
  if (!row.same_input) {
    throw new DuplicateRunError(
      `Run ${row.id} of ${asked} was started with a different input. ` +
        'A run id or dedupe key names one run: to start another, use a new id or key.',
    );
  }
  return row.id;
}

/**
 * Checked before the insert rather than by catching the foreign-key violation: in a caller's
 * transaction an error would abort their whole transaction, not just this statement.
 */
async function assertMigrated(db: Kysely<LedgerflowDatabase>, workflow: AnyWorkflow, migrated: MigratedVersions): Promise<void> {
  const hash = shapeHash(workflow);
  const id = `${workflow.name}@${workflow.version}:${hash}`;
  if (migrated.has(id)) return;
  let row: { definition_hash: string } | undefined;
  try {
    row = await db
      .selectFrom('ledgerflow.workflow_version')
      .select('definition_hash')
      .where('workflow_name', '=', workflow.name)
      .where('version', '=', workflow.version)
      .executeTakeFirst();
  } catch (error) {
    if (sqlStateOf(error) === SQLSTATE.UNDEFINED_TABLE || sqlStateOf(error) === SQLSTATE.INVALID_SCHEMA_NAME) {
      throw new MigrationError('The ledgerflow schema does not exist in this database. Run `ledgerflow migrate` first.', {
        cause: error,
      });
    }
    throw error;
  }
  if (row === undefined) {
    throw new UnknownWorkflowError(
      `Workflow "${workflow.name}" v${workflow.version} is not migrated in this database. ` +
        'Run `ledgerflow codegen` (if the workflow is new) and then `ledgerflow migrate`.',
    );
  }
  if (row.definition_hash !== hash) {
    throw new MigrationError(
      `Workflow "${workflow.name}" v${workflow.version} was migrated with definition ${row.definition_hash}, but the code ` +
        `has ${hash}: its steps changed without a version bump. Bump the version, run \`ledgerflow codegen\` and \`ledgerflow migrate\`.`,
    );
  }
  migrated.add(id);
}
