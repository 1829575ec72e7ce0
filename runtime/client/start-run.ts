import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import { shapeHash } from '../../dsl/workflow-shape.js';
import type { AnyWorkflow } from '../../dsl/workflow.js';
import { DuplicateRunError, MigrationError, UnknownWorkflowError, ValidationError } from '../errors.js';
import { SQLSTATE, sqlStateOf } from '../store/sqlstate.js';
import type { Json, LedgerflowDatabase } from '../store/tables.js';
import { millis } from '../worker/claim.js';
import { RUNS_CHANNEL } from '../worker/worker.js';
import { parseDebounce, startDebounced, type DebounceOptions, type DebouncedRunColumns } from './debounce.js';
import { assertRunId, parseStartInput } from './validate-input.js';

export interface StartOptions {
  /** Your own id for the run (a UUID); starting again with it returns the same run. */
  readonly runId?: string;
  /** A business key, unique per workflow (e.g. the order id); starting again with it returns the same run. */
  readonly dedupeKey?: string;
  /**
   * When `runId` or `dedupeKey` already names a run of this workflow whose input differs from this
   * start's: `'refuse'` (the default) throws `DuplicateRunError`; `'return-existing'` returns that
   * run (`created: false`, this input ignored) — for callers whose retries may carry another
   * input (a timestamp, a re-rendered payload) that must not start the work twice.
   */
  readonly onDifferentInput?: 'refuse' | 'return-existing';
  /**
   * Many starts, one run: starts of this workflow with the same `debounce.key` within a window
   * share one run, due when the window ends. `keep: 'first'` keeps the first start's input;
   * `keep: 'last'` gives the run each later start's input and moves the window's end to `windowMs`
   * after that start (at most `maxWaitMs` after the first). Once a worker claimed the run, or the
   * window is over, the next start opens a new window. Not with `runId` or `dedupeKey`.
   *
   * @example
   * await client.start(digest, { customerId: 'c-7' }, { debounce: { key: 'digest:c-7', windowMs: 60_000, keep: 'last' } });
   */
  readonly debounce?: DebounceOptions;
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
  /**
   * `false` when the run id or dedupe key already named a run with the same workflow and input
   * (or any input, with `onDifferentInput: 'return-existing'`), or a debounced start joined the
   * open window of its key.
   */
  readonly created: boolean;
}

/** `name@version:hash` of workflow versions known to be migrated with that definition; such rows never change. */
export type MigratedVersions = Set<string>;

/** The longest dedupe key: what a `child`/`forEach` key may return, too (it becomes the child's). */
export const MAX_DEDUPE_KEY_LENGTH = 1_000;

/**
 * Validates and writes a new run, on `db` or inside the caller's transaction. Everything that
 * can be rejected without the database (input, run id, dedupe key, debounce options and what
 * they are combined with) is rejected before the first query. A debounced start goes on in
 * debounce.ts, with the same insert. `traceContext` (the caller's OpenTelemetry context as a
 * propagator carrier, or null) is stored with the run for the worker's spans to continue.
 */
export async function startRun(
  db: Kysely<LedgerflowDatabase>,
  workflow: AnyWorkflow,
  input: unknown,
  options: StartOptions,
  migrated: MigratedVersions,
  traceContext: Json | null = null,
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
  const onDifferentInput = options.onDifferentInput ?? 'refuse';
  if (onDifferentInput !== 'refuse' && onDifferentInput !== 'return-existing') {
    throw new ValidationError(`onDifferentInput must be 'refuse' or 'return-existing' (got ${String(onDifferentInput)}).`, [
      `onDifferentInput: ${String(onDifferentInput)}`,
    ]);
  }
  const debounce = parseDebounce(options.debounce, { runId: options.runId, dedupeKey });
  // PostgreSQL prints uuids in lower case; comparing with what it returns needs the same form.
  const runId = options.runId?.toLowerCase() ?? randomUUID();

  await assertMigrated(db, workflow, migrated);
  // One statement: the insert and, only if it inserted, the NOTIFY (delivered at commit, so a
  // worker never wakes for a run it cannot see yet; a debounced run is not due, so no NOTIFY).
  // Outside a caller's transaction it is its own commit: one round trip per start.
  const insert = async (debounced?: DebouncedRunColumns): Promise<boolean> => {
    const notify = debounced === undefined ? sql`pg_notify(${RUNS_CHANNEL}, inserted.id::text)` : sql`NULL`;
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
            ...(traceContext !== null ? { trace_context: JSON.stringify(traceContext) } : {}),
            ...debounced,
          })
          .onConflict((oc) => oc.doNothing())
          .returning('id'),
      )
      .selectFrom('inserted')
      .select(['inserted.id', sql<string | null>`${notify}`.as('notified')])
      .executeTakeFirst();
    return inserted !== undefined;
  };
  if (debounce !== undefined) {
    return startDebounced(
      db,
      {
        workflow,
        key: debounce.key,
        windowMs: debounce.windowMs,
        keep: debounce.keep,
        maxWaitMs: debounce.maxWaitMs,
        runId,
        inputJson,
        timeoutMs,
        priority: options.priority,
      },
      insert,
    );
  }
  // A conflicting row can vanish between the insert and the look-up (the run was deleted);
  // then the insert is simply tried again.
  for (let round = 0; round < 3; round++) {
    if (await insert()) return { runId, created: true };
    const existing = await findExisting(db, workflow, runId, options.runId !== undefined, dedupeKey, inputJson, onDifferentInput);
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
  onDifferentInput: 'refuse' | 'return-existing',
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
  if (!row.same_input && onDifferentInput === 'refuse') {
    throw new DuplicateRunError(
      `Run ${row.id} of ${asked} was started with a different input. ` +
        "A run id or dedupe key names one run: to start another, use a new id or key; to get this run back whatever its input, pass onDifferentInput: 'return-existing'.",
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
