import { randomUUID } from 'node:crypto';
import { sql, type Kysely, type RawBuilder } from 'kysely';
import { z } from 'zod';
import { checkOptions, integer, rule } from '../../dsl/option-checks.js';
import { shapeHash } from '../../dsl/workflow-shape.js';
import type { AnyWorkflow } from '../../dsl/workflow.js';
import { DuplicateRunError, MigrationError, notMigratedError, UnknownWorkflowError } from '../errors.js';
import { inputHash } from '../store/input-hash.js';
import { PRUNED_RUN_COLUMNS, toPrunedRun, type PrunedRun } from '../retention/pruned-run.js';
import type { Json, LedgerflowDatabase } from '../store/tables.js';
import { toLeasedRun, type LeasedRun, type LeasedRunRow } from '../store/leased-run.js';
import { millis } from '../store/millis.js';
import type { LocalStarts, StartReservation } from './local-starts.js';
import { DeferredStart, deferredRun, type DeferredInsert } from './deferred-start.js';
import { invalidOption } from './invalid-option.js';
import { describeChanges, fingerprintOf } from '../contracts/workflow-fingerprint.js';
import { parseDebounce, startDebounced, type DebounceOptions, type DebouncedRunColumns } from './debounce.js';
import type { PayloadLimitsCache } from '../limits/limits-cache.js';
import { assertRunId, inputJson as buildInputJson, MAX_DEDUPE_KEY_LENGTH, parseInputSchema } from './validate-input.js';
import { insertRunStatement, type StartedRunColumns } from './insert-run.js';

/*
 * A start: the options checked, the input validated and hashed, the version's migration checked,
 * then one insert — plain, debounced, deduplicated, or claimed for the worker of this process (or
 * handed to it uninserted, deferred-start.ts) — and the existing run when the start names one.
 * Long because every start takes this one path in order, and each branch of it is a few lines that
 * read the same checked options; the insert's SQL is in insert-run.ts.
 */

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

/**
 * A start by `startAndWait`: a run it creates gets this id and is marked as waited for
 * (`notify_settled`, core 0011) by the insert itself, so waiting costs no extra statement —
 * unless the start claims it for the worker of this process, which answers the wait in-process:
 * then it is inserted unmarked (no NOTIFY at its settle) and the wait marks it should the run
 * leave that worker unsettled (wait-for-run.ts).
 */
export interface WatchedStart {
  readonly runId: string;
}

/** What a watched start returns: `unmarked` when it claimed its new run for the worker of this process without marking it. */
export interface WatchedStartedRun extends StartedRun {
  readonly unmarked?: true;
  /** The run was handed to the worker of this process uninserted: its insert rides on the run's first commit (deferred-start.ts). */
  readonly deferred?: DeferredInsert;
}

export interface StartedRun {
  readonly runId: string;
  /**
   * `false` when the run id or dedupe key already named a run with the same workflow and input
   * (or any input, with `onDifferentInput: 'return-existing'`), or a debounced start joined the
   * open window of its key.
   */
  readonly created: boolean;
  /**
   * Set when the run id or dedupe key names a run that finished and was pruned (`ledgerflow
   * prune`): nothing was started, and this is what the archive keeps of it (its final status, when
   * it finished). `getRun` of it throws `RunPrunedError`.
   */
  readonly pruned?: PrunedRun;
}

/** `name@version:hash` of workflow versions known to be migrated with that definition; such rows never change. */
export type MigratedVersions = Set<string>;

/** What {@link StartOptions} allow, checked on every start (a plain object: about a microsecond); the debounce has its own. */
const startOptionsSchema = z.object({
  dedupeKey: rule(z.string(), `must be a string of 1 to ${MAX_DEDUPE_KEY_LENGTH} characters`)
    .superRefine((key, ctx) => {
      if (key.length >= 1 && key.length <= MAX_DEDUPE_KEY_LENGTH) return;
      ctx.addIssue({
        code: 'custom',
        input: key.length,
        message: `must be 1 to ${MAX_DEDUPE_KEY_LENGTH} characters long (got ${key.length})`,
      });
    })
    .optional(),
  timeoutMs: rule(z.number().gt(0), 'must be a number of milliseconds > 0').optional(),
  priority: rule(integer().min(-1_000_000).max(1_000_000), 'must be an integer from -1000000 to 1000000').optional(),
  onDifferentInput: rule(z.enum(['refuse', 'return-existing']), "must be 'refuse' or 'return-existing'").optional(),
});

/**
 * Validates and writes a new run, on `db` or inside the caller's transaction. Everything that
 * can be rejected without the database (input, run id, dedupe key, debounce options and what
 * they are combined with) is rejected before the first query; then the input's size against
 * `limits` (read from the database, cached), before anything is written or the input sent. A debounced start goes on in
 * debounce.ts, with the same insert. `traceContext` (the caller's OpenTelemetry context as a
 * propagator carrier, or null) is stored with the run for the worker's spans to continue.
 * `watched`: the id of a run this start creates, inserted marked as waited for (startAndWait).
 * `local`: a worker of this process (`createClient({ worker })`); when it serves the workflow
 * version and has a slot free, a run this start creates is inserted already claimed for it, in
 * one statement with no NOTIFY, and handed to it once committed (one durable commit instead of
 * two; see {@link insertClaimedLocally}).
 * Only for a start on `db` itself, never inside a caller's transaction.
 */
export async function startRun(
  db: Kysely<LedgerflowDatabase>,
  workflow: AnyWorkflow,
  input: unknown,
  options: StartOptions,
  migrated: MigratedVersions,
  limits: PayloadLimitsCache,
  traceContext: Json | null = null,
  watched?: WatchedStart,
  local?: LocalStarts,
): Promise<WatchedStartedRun> {
  const data = parseInputSchema(workflow, input);
  if (options.runId !== undefined) assertRunId(options.runId);
  // The workflow's own timeout, used when the start gives none, was checked by the same rule when declared.
  checkOptions(startOptionsSchema, options, invalidOption);
  const { dedupeKey } = options;
  const timeoutMs = options.timeoutMs ?? workflow.timeoutMs;
  const onDifferentInput = options.onDifferentInput ?? 'refuse';
  const debounce = parseDebounce(options.debounce, { runId: options.runId, dedupeKey });
  // The one read before the input is refused or not: the limits (cached), never the input itself.
  const inputJson = buildInputJson(workflow, data, await limits.current(db));
  // PostgreSQL prints uuids in lower case; comparing with what it returns needs the same form.
  const runId = options.runId?.toLowerCase() ?? watched?.runId ?? randomUUID();

  await assertMigrated(db, workflow, migrated);
  // A start that names its run (an id of its own or a dedupe key) must not create one whose
  // identity a prune archived: its insert is guarded (ledgerflow.pruned_run, core 0008). A random
  // id names no archived run, so plain and debounced starts skip the archive.
  const guarded = debounce === undefined && (options.runId !== undefined || dedupeKey !== undefined);
  const columns = (debounced?: DebouncedRunColumns, marked = watched !== undefined): StartedRunColumns => ({
    id: runId,
    workflow_name: workflow.name,
    workflow_version: workflow.version,
    input: inputJson,
    dedupe_key: dedupeKey ?? null,
    ...(timeoutMs !== undefined ? { deadline_at: sql<Date>`statement_timestamp() + ${millis(timeoutMs)}` } : {}),
    ...(options.priority !== undefined ? { priority: options.priority } : {}),
    ...(traceContext !== null ? { trace_context: JSON.stringify(traceContext) } : {}),
    ...(marked ? { notify_settled: true } : {}),
    ...debounced,
  });
  const statement = (notify: boolean, debounced?: DebouncedRunColumns): RawBuilder<{ id: string }> =>
    insertRunStatement(columns(debounced), { guarded, notify });
  const insert = async (debounced?: DebouncedRunColumns): Promise<boolean> => {
    const inserted = await statement(debounced === undefined, debounced).execute(db);
    return inserted.rows.length > 0;
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
  // A watched run claimed for the worker of this process goes in unmarked (see WatchedStart).
  let unmarked = false;
  let deferred: DeferredStart | undefined;
  const insertHere = async (): Promise<boolean> => {
    const reservation = await local?.reserve(workflow.name, workflow.version);
    if (reservation === undefined) return insert();
    const claimedBy = { ...reservation.lease, step: firstStepOf(workflow) };
    if (watched !== undefined && options.runId === undefined && dedupeKey === undefined) {
      // Nothing can name this run but this start: its insert rides on the run's first commit (deferred-start.ts).
      deferred = new DeferredStart(
        (msAgo, completion) =>
          insertRunStatement(
            {
              ...columns(undefined, false),
              // The deadline counts from the hand-over, as the run's creation does.
              ...(timeoutMs !== undefined
                ? { deadline_at: sql<Date>`statement_timestamp() - ${millis(msAgo)} + ${millis(timeoutMs)}` }
                : {}),
            },
            {
              guarded: false,
              notify: false,
              claimedBy: { ...claimedBy, startedMsAgo: msAgo, ...(completion !== undefined ? { completion } : {}) },
            },
          ),
        async () => {
          await statement(true).execute(db);
        },
      );
      reservation.settle([
        deferredRun(deferred, {
          id: runId,
          workflowName: workflow.name,
          workflowVersion: workflow.version,
          inputJson,
          traceContext,
        }),
      ]);
      unmarked = true;
      return true;
    }
    const claimed = await insertClaimedLocally(
      db,
      reservation,
      insertRunStatement(columns(undefined, false), { guarded, notify: false, claimedBy }),
    );
    unmarked = watched !== undefined && claimed;
    return claimed;
  };
  // A conflicting row can vanish between the insert and the look-up (the run was deleted);
  // then the insert is simply tried again.
  for (let round = 0; round < 3; round++) {
    if (await insertHere()) {
      if (deferred !== undefined) return { runId, created: true, unmarked: true, deferred };
      return unmarked ? { runId, created: true, unmarked } : { runId, created: true };
    }
    const existing = await findExisting(
      db,
      workflow,
      runId,
      options.runId !== undefined,
      dedupeKey,
      inputJson,
      onDifferentInput,
    );
    if (existing !== undefined) return existing;
  }
  throw new Error(`Run ${runId} conflicted with an existing run that then disappeared, three times in a row.`);
}

/**
 * The start of a run claimed for a worker of this process: ONE statement, one commit — the insert
 * leases the new run to that worker and opens its first step's attempt (`insertRunStatement`
 * with `claimedBy`), without a NOTIFY (no other worker need wake for a run already taken). The
 * reservation is settled after the commit with the run taken, or with none when the insert found
 * an existing run (its id or dedupe key; or an archived identity) — or with `undefined` if the
 * statement failed: its outcome may be unknown, and the worker then looks for runs it holds that
 * nobody drives. Returns whether the run was created (and claimed).
 */
async function insertClaimedLocally(
  db: Kysely<LedgerflowDatabase>,
  reservation: StartReservation,
  insert: RawBuilder<LeasedRunRow>,
): Promise<boolean> {
  let claimed: LeasedRun[];
  try {
    claimed = (await insert.execute(db)).rows.map(toLeasedRun);
  } catch (error) {
    reservation.settle(undefined);
    throw error;
  }
  reservation.settle(claimed);
  return claimed.length > 0;
}

/** The name of a workflow's first step: the attempt a start claimed for its own worker opens. */
function firstStepOf(workflow: AnyWorkflow): string {
  const first = workflow.steps[0];
  if (first === undefined) throw new Error(`Workflow "${workflow.name}" has no steps.`);
  return first.name;
}

async function findExisting(
  db: Kysely<LedgerflowDatabase>,
  workflow: AnyWorkflow,
  runId: string,
  runIdGiven: boolean,
  dedupeKey: string | undefined,
  inputJson: string,
  onDifferentInput: 'refuse' | 'return-existing',
): Promise<StartedRun | undefined> {
  const live = await db
    .selectFrom('ledgerflow.workflow_run')
    .select([
      'id',
      'workflow_name',
      'workflow_version',
      'dedupe_key',
      sql<boolean>`input = ${inputJson}::jsonb`.as('same_input'),
    ])
    .where((eb) =>
      eb.or([
        eb('id', '=', runId),
        ...(dedupeKey !== undefined
          ? [eb.and([eb('workflow_name', '=', workflow.name), eb('dedupe_key', '=', dedupeKey)])]
          : []),
      ]),
    )
    .execute();
  // Only a start that names its run can meet an archived one (its insert was guarded).
  const rows =
    live.length > 0 || (!runIdGiven && dedupeKey === undefined)
      ? live.map((row) => ({ ...row, pruned: undefined }))
      : (
          await db
            .selectFrom('ledgerflow.run_archive')
            .select([
              ...PRUNED_RUN_COLUMNS,
              sql<boolean>`input_hash = ${inputHash(sql`${inputJson}::jsonb`)}`.as('same_input'),
            ])
            .where((eb) =>
              eb.or([
                eb('id', '=', runId),
                ...(dedupeKey !== undefined
                  ? [eb.and([eb('workflow_name', '=', workflow.name), eb('dedupe_key', '=', dedupeKey)])]
                  : []),
              ]),
            )
            .execute()
        ).map((row) => ({ ...row, pruned: toPrunedRun(row) }));
  const row = rows[0];
  if (row === undefined) return undefined;
  const pruned =
    row.pruned === undefined ? '' : ` (pruned; ${row.pruned.status} at ${row.pruned.finishedAt.toISOString()})`;
  const asked = `workflow "${workflow.name}"${dedupeKey !== undefined ? ` with dedupe key "${dedupeKey}"` : ''}`;
  if (rows.length > 1) {
    throw new DuplicateRunError(
      `Run id ${runId} and dedupe key "${dedupeKey}" name two different runs (${rows.map((r) => r.id).join(', ')}). ` +
        'Pass one or the other, or both of the same run.',
    );
  }
  if (row.workflow_name !== workflow.name) {
    throw new DuplicateRunError(
      `Run id ${runId} already belongs to a run of workflow "${row.workflow_name}"${pruned}; it cannot start ${asked}. Use another run id.`,
    );
  }
  if (runIdGiven && row.id !== runId) {
    throw new DuplicateRunError(
      `Dedupe key "${dedupeKey}" of workflow "${workflow.name}" already names run ${row.id}${pruned}, not the run id ${runId} you passed.`,
    );
  }
  if (row.dedupe_key !== (dedupeKey ?? null)) {
    throw new DuplicateRunError(
      `Run ${runId}${pruned} already exists with ${row.dedupe_key === null ? 'no dedupe key' : `dedupe key "${row.dedupe_key}"`}; ` +
        `it cannot be started again with ${dedupeKey === undefined ? 'none' : `"${dedupeKey}"`}.`,
    );
  }
  if (!row.same_input && onDifferentInput === 'refuse') {
    throw new DuplicateRunError(
      `Run ${row.id}${pruned} of ${asked} was started with a different input. ` +
        "A run id or dedupe key names one run: to start another, use a new id or key; to get this run back whatever its input, pass onDifferentInput: 'return-existing'.",
    );
  }
  return row.pruned === undefined
    ? { runId: row.id, created: false }
    : { runId: row.id, created: false, pruned: row.pruned };
}

/**
 * Checked before the insert rather than by catching the foreign-key violation: in a caller's
 * transaction an error would abort their whole transaction, not just this statement.
 */
async function assertMigrated(
  db: Kysely<LedgerflowDatabase>,
  workflow: AnyWorkflow,
  migrated: MigratedVersions,
): Promise<void> {
  const hash = shapeHash(workflow);
  const id = `${workflow.name}@${workflow.version}:${hash}`;
  if (migrated.has(id)) return;
  let row:
    | {
        definition_hash: string;
        draft_migration: string | null;
        fingerprint: string | null;
        parts: Record<string, string> | null;
      }
    | undefined;
  try {
    row = await db
      .selectFrom('ledgerflow.workflow_version as v')
      .leftJoin('ledgerflow.workflow_fingerprint as f', (join) =>
        join.onRef('f.workflow_name', '=', 'v.workflow_name').onRef('f.version', '=', 'v.version'),
      )
      .select(['v.definition_hash', 'v.draft_migration', 'f.fingerprint', 'f.parts'])
      .where('v.workflow_name', '=', workflow.name)
      .where('v.version', '=', workflow.version)
      .executeTakeFirst();
  } catch (error) {
    throw notMigratedError(error) ?? error;
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
  // Registered by the first worker that served it (core 0020); a draft's may still change (its worker re-registers it).
  const live = fingerprintOf(workflow);
  if (row.fingerprint !== null && row.parts !== null && row.fingerprint !== live.hash && row.draft_migration === null) {
    const parts = describeChanges(row.parts, live.parts);
    throw new MigrationError(
      `Workflow "${workflow.name}" v${workflow.version} changed since a worker registered it: ${parts.join('; ')}. ` +
        'A released version never changes: declare the change as a new version (bump `version`, run `ledgerflow codegen` and `ledgerflow migrate`).',
    );
  }
  migrated.add(id);
}
