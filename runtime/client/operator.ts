import { randomUUID } from 'node:crypto';
import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { AnyWorkflow, StepDefinition } from '../../dsl/workflow.js';
import type { WorkflowRegistration } from '../contracts/registration.js';
import { ConflictError, QueueNotFoundError, RunPrunedError, UnknownWorkflowError, ValidationError } from '../errors.js';
import type { PayloadLimitsCache } from '../limits/limits-cache.js';
import { checkRecordedOutput } from '../limits/recorded-output.js';
import { CHILDREN_READ_ON_RETRY } from '../retention/prune.js';
import { missingRunError } from '../retention/missing-run-error.js';
import {
  afterRelease,
  claimForReconcile,
  releaseIntent,
  settleFinishedRunIntent,
  type IntentRef,
} from '../reconciler/reconcile-commits.js';
import type { CompensationReason, Json, LedgerflowDatabase, OperatorActionKind, OperatorActionRow, RunStatus } from '../store/tables.js';
import { RUNS_CHANNEL } from '../store/channels.js';
import { assertRunTransition } from '../store/state-machines.js';
import { advanceRun } from '../worker/step-commits.js';
import { cancelRunStatement, compensatingCancelStatement } from './cancel-run.js';
import type { PayloadLimits } from '../limits/payload-limits.js';
import { pauseSchedule, resumeScheduleIn } from './schedules.js';
import { assertRunId, describeIssues } from './validate-input.js';

/*
 * Operator actions: what a person does to a run, an effect, a queue or a schedule when the
 * runtime cannot decide alone — retry a failed or cancelled run, say whether an effect whose
 * outcome is unknown happened, pause a queue. Each is ONE transaction that locks what it acts on,
 * refuses (ConflictError, nothing written) anything that is not in a state it may act on, reuses
 * the fenced statements of the worker and the reconciler, and writes its audit row
 * (`ledgerflow.operator_action`: who, when, why) in that same transaction — an action that is
 * refused or changes nothing leaves no row.
 */

/** Who acts and why; both required for an audited action. */
export interface OperatorNote {
  /** Who: a user name, an email. 1 to 200 characters. */
  readonly actor: string;
  /** Why: shown in the audit trail. 1 to 2 000 characters. */
  readonly reason: string;
}

/** What {@link Client.retryRun} did. */
export interface RetriedRun {
  readonly runId: string;
  /** The step the run resumes at, with a fresh attempt budget. */
  readonly fromStep: string;
  /**
   * `compensation_failed`: the run resumes its compensation at the one that failed, with the
   * remaining ones after it (core 0013; `compensation` stays as it was).
   */
  readonly previousStatus: 'failed' | 'cancelled' | 'compensation_failed';
}

/** What the operator found at the provider for an open intent. */
export type EffectResolution = { readonly found: unknown } | { readonly notFound: true };

/** What {@link Client.resolveEffect} did. */
export interface ResolvedEffect {
  readonly runId: string;
  readonly stepName: string;
  readonly idempotencyKey: string;
  /** `recorded`: the effect happened, with the given output; `released`: the key may be performed again. */
  readonly status: 'recorded' | 'released';
  /** The run's status after the action. */
  readonly runStatus: RunStatus;
}

export interface AuditFilter {
  /** Only the actions on this run. */
  readonly runId?: string;
  /** Newest first; default 50, at most 10 000. */
  readonly limit?: number;
}

export type { OperatorActionRow };

const MAX_ACTOR_LENGTH = 200;
const MAX_REASON_LENGTH = 2_000;
/** How long an operator's claim of a run lasts; the claim is released by the same transaction. */
const OPERATOR_LEASE_MS = 30_000;
const FINAL: readonly RunStatus[] = ['completed', 'failed', 'cancelled', 'compensated', 'compensation_failed'];
/** The statuses a retry takes a run from. */
const RETRYABLE = ['failed', 'cancelled', 'compensation_failed'] as const;
/** Runs whose open intents are settled in the ledger only (the run does not move): the reconciler's rule. */
const SETTLED_IN_LEDGER: readonly RunStatus[] = ['failed', 'cancelled', 'compensated', 'compensation_failed'];
/** {@link RETRYABLE} as a literal SQL list. */
const RETRYABLE_SQL = sql.raw(RETRYABLE.map((s) => `'${s}'`).join(', '));
/** Final statuses, and those of them the parent counts as failed children (core 0003, 0013). */
const FINAL_SQL = sql.raw(FINAL.map((s) => `'${s}'`).join(', '));
/** The statuses a parent counts as failed children (core 0003, 0013): its child step fails on any of them. */
const CHILD_FAILED: readonly RunStatus[] = ['failed', 'cancelled', 'compensated', 'compensation_failed'];
const CHILD_FAILED_SQL = sql.raw(CHILD_FAILED.map((s) => `'${s}'`).join(', '));

/** Checks a note (ValidationError, nothing written); `undefined` passes when the action may go unaudited. */
export function checkNote(note: OperatorNote | undefined, required: boolean): OperatorNote | undefined {
  if (note === undefined) {
    if (!required) return undefined;
    throw new ValidationError('This action needs a note: { actor, reason } — who does it and why (kept in the audit trail).', [
      'note: required',
    ]);
  }
  const issues: string[] = [];
  const check = (field: 'actor' | 'reason', max: number): void => {
    const value: unknown = note[field];
    if (typeof value !== 'string' || value.trim() === '') issues.push(`${field}: must be a non-empty string`);
    else if (value.length > max) issues.push(`${field}: at most ${max} characters (got ${value.length})`);
  };
  check('actor', MAX_ACTOR_LENGTH);
  check('reason', MAX_REASON_LENGTH);
  if (issues.length > 0) {
    throw new ValidationError(`Invalid operator note:\n${issues.map((i) => `  - ${i}`).join('\n')}\nNothing was done.`, issues);
  }
  return note;
}

interface AuditEntry {
  readonly action: OperatorActionKind;
  readonly runId: string | null;
  readonly target: string | null;
  readonly detail: Json;
}

/** The audit row of an action, inserted by the action's own transaction. */
export function auditStatement(note: OperatorNote, entry: AuditEntry): RawBuilder<unknown> {
  return sql`
    INSERT INTO ledgerflow.operator_action (actor, action, run_id, target, reason, detail)
    VALUES (${note.actor}, ${entry.action}, ${entry.runId}::uuid, ${entry.target}, ${note.reason}, ${JSON.stringify(entry.detail)}::jsonb)`;
}

async function audit(trx: Kysely<LedgerflowDatabase>, note: OperatorNote | undefined, entry: AuditEntry): Promise<void> {
  if (note !== undefined) await auditStatement(note, entry).execute(trx);
}

/**
 * {@link Client.cancel}: one statement; the run_settled trigger closes the run's running attempt
 * (the worker that held the lease can no longer finish it: fenced out) and cancels its children.
 * With a note, the run is locked first (its previous status goes into the audit row), and the
 * audit row is written in the same transaction.
 */
/**
 * What `cancel` takes: whether to compensate (default: the workflow's `compensateOnCancel`) and an
 * optional note (`actor` and `reason` together) for the audit trail.
 */
export interface CancelOptions extends Partial<OperatorNote> {
  /** Undo the run's recorded effects (its steps' compensations) instead of just stopping it. */
  readonly compensate?: boolean;
}

/** The cancel itself: one that compensates if it is to, else the plain one. */
async function cancelStatements(db: Kysely<LedgerflowDatabase>, runId: string, compensate: boolean | undefined): Promise<boolean> {
  if (compensate !== false && (await compensatingCancelStatement(runId, compensate).execute(db)).rows.length > 0) return true;
  return (await cancelRunStatement(db, runId).executeTakeFirst()) !== undefined;
}

async function cancelLiveRun(db: Kysely<LedgerflowDatabase>, runId: string, options?: CancelOptions): Promise<boolean> {
  assertRunId(runId);
  const note = options?.actor === undefined && options?.reason === undefined ? undefined : (options as OperatorNote);
  const checked = checkNote(note, false);
  const compensate = options?.compensate;
  if (compensate !== undefined && typeof compensate !== 'boolean') {
    throw new ValidationError(`cancel: compensate must be true or false (got ${JSON.stringify(compensate)}).`, ['compensate: not a boolean']);
  }
  if (checked === undefined) {
    if (await cancelStatements(db, runId, compensate)) return true;
    const exists = await db.selectFrom('ledgerflow.workflow_run').select('id').where('id', '=', runId).executeTakeFirst();
    if (exists === undefined) throw await missingRunError(db, runId);
    return false;
  }
  return db.transaction().execute(async (trx) => {
    const run = await lockRun(trx, runId);
    if (!(await cancelStatements(trx, runId, compensate))) return false;
    await audit(trx, checked, {
      action: 'cancel',
      runId,
      target: null,
      detail: { previousStatus: run.status, ...(compensate !== undefined ? { compensate } : {}) },
    });
    return true;
  });
}

/** Cancel of a run that is gone: a pruned run was final (nothing to cancel, `false`); otherwise not found. */
export async function cancelRun(db: Kysely<LedgerflowDatabase>, runId: string, options?: CancelOptions): Promise<boolean> {
  try {
    return await cancelLiveRun(db, runId, options);
  } catch (error) {
    if (error instanceof RunPrunedError) return false;
    throw error;
  }
}

/** The run row an action locks first (`FOR NO KEY UPDATE`: waits for a commit in progress). */
interface LockedRun {
  id: string;
  workflow_name: string;
  workflow_version: number;
  status: RunStatus;
  current_step: number;
  parent_run_id: string | null;
  leased: boolean;
  deadline_at: Date | null;
  step_name: string | null;
  compensation: CompensationReason | null;
}

async function lockRun(trx: Kysely<LedgerflowDatabase>, runId: string): Promise<LockedRun> {
  const { rows } = await sql<LockedRun>`
    SELECT r.id, r.workflow_name, r.workflow_version, r.status, r.current_step, r.parent_run_id,
           COALESCE(r.status = 'running' AND r.lease_expires_at > statement_timestamp(), false) AS leased,
           r.deadline_at, d.step_name, r.compensation
      FROM ledgerflow.workflow_run r
      LEFT JOIN ledgerflow.workflow_step_def d
        ON d.workflow_name = r.workflow_name AND d.version = r.workflow_version AND d.position = r.current_step
     WHERE r.id = ${runId}
       FOR NO KEY UPDATE OF r`.execute(trx);
  const run = rows[0];
  if (run === undefined) throw await missingRunError(trx, runId, '; nothing was done');
  return run;
}

/**
 * The retry: the run `pending` and due now at the step it stopped at, `finished_at` and `error`
 * cleared, its fencing token moved on, a deadline that has passed dropped, and the step's
 * attempts so far put behind its budget (`budget_step`, `budget_base` = the step's last attempt).
 * Its children counters are recounted from the children themselves: a child retried on its own
 * while this run was over settled without moving them. Notifies the workers at commit.
 *
 * A `compensation_failed` run keeps `compensation`: it is pending at the compensation that failed
 * (its `current_step`), and goes on with the remaining compensations, to `compensated`.
 */
export function retryRunStatement(runId: string, stepName: string): RawBuilder<{ deadline_at: Date | null }> {
  for (const from of RETRYABLE) assertRunTransition(from, 'pending');
  return sql<{ deadline_at: Date | null }>`
    WITH retried AS (
      UPDATE ledgerflow.workflow_run r
         SET status = 'pending', run_after = statement_timestamp(), updated_at = statement_timestamp(),
             finished_at = NULL, error = NULL, output = NULL, waiting_for = NULL, lease_owner = NULL, lease_expires_at = NULL,
             fencing_token = r.fencing_token + 1,
             deadline_at = CASE WHEN r.deadline_at <= statement_timestamp() THEN NULL ELSE r.deadline_at END,
             budget_step = ${stepName},
             budget_base = (SELECT COALESCE(max(a.attempt), 0) FROM ledgerflow.step_attempt a
                             WHERE a.run_id = r.id AND a.step_name = ${stepName}),
             children_open = (SELECT count(*) FROM ledgerflow.workflow_run c
                               WHERE c.parent_run_id = r.id AND c.status NOT IN (${FINAL_SQL})),
             children_failed = (SELECT count(*) FROM ledgerflow.workflow_run c
                                 WHERE c.parent_run_id = r.id AND c.status IN (${CHILD_FAILED_SQL}))
       WHERE r.id = ${runId} AND r.status IN (${RETRYABLE_SQL})
      RETURNING r.id, r.deadline_at
    )
    SELECT deadline_at, pg_notify(${RUNS_CHANNEL}, id::text) AS notified FROM retried`;
}

/** {@link Client.retryRun}. */
export async function retryRun(db: Kysely<LedgerflowDatabase>, runId: string, note: OperatorNote): Promise<RetriedRun> {
  assertRunId(runId);
  const checked = checkNote(note, true)!;
  return db.transaction().execute(async (trx) => {
    const run = await lockRun(trx, runId);
    if (!isRetryable(run.status)) {
      throw new ConflictError(`Run ${runId} is ${run.status}: only a failed, cancelled or compensation_failed run can be retried. Nothing was done.`);
    }
    if (run.step_name === null) {
      throw new ConflictError(`Run ${runId} stopped after its last step (step ${run.current_step}): there is no step to retry. Nothing was done.`);
    }
    if (run.parent_run_id !== null) {
      const parent = await trx.selectFrom('ledgerflow.workflow_run').select('status').where('id', '=', run.parent_run_id).executeTakeFirst();
      if (parent !== undefined && !FINAL.includes(parent.status)) {
        throw new ConflictError(
          `Run ${runId} is a child of run ${run.parent_run_id}, which is still ${parent.status} and will fail or be cancelled ` +
            'because this child did: retry this child once its parent is over, then the parent. Nothing was done.',
        );
      }
    }
    // Its step reads its children again: one that was pruned would be missing from its output.
    // Prune keeps them while this run stays; a pass stopped between a child and this run (or one
    // before that rule) leaves them archived (core 0019 indexes them by parent).
    if (CHILDREN_READ_ON_RETRY.includes(run.status)) {
      const pruned = await trx.selectFrom('ledgerflow.run_archive').select('id').where('parent_run_id', '=', runId).limit(6).execute();
      if (pruned.length > 0) {
        const listed = pruned.slice(0, 5).map((c) => c.id);
        throw new ConflictError(
          `Run ${runId} cannot be retried: its children were pruned (${listed.join(', ')}${pruned.length > 5 ? ', …' : ''}). ` +
            `Its step "${run.step_name}" would read them again and find them gone; the run's outcome stands — start a new run ` +
            'if the work must be done. Nothing was done.',
        );
      }
    }
    // A compensation reads no children: a compensation_failed run resumes whatever became of them.
    const stopped =
      run.status === 'compensation_failed'
        ? []
        : await trx
            .selectFrom('ledgerflow.workflow_run')
            .select(['id', 'status'])
            .where('parent_run_id', '=', runId)
            .where('status', 'in', CHILD_FAILED)
            .orderBy('parent_index')
            .limit(6)
            .execute();
    if (stopped.length > 0) {
      const listed = stopped.slice(0, 5).map((c) => `${c.id} (${c.status})`);
      const compensated = stopped.some((c) => c.status === 'compensated');
      throw new ConflictError(
        `Run ${runId} has children that did not complete: ${listed.join(', ')}${stopped.length > 5 ? ', …' : ''}. ` +
          'Its step would find them again and fail: retry them first (`ledgerflow retry <child-id>`), then this run' +
          (compensated ? '; a compensated child has undone its effects and cannot be retried, so this run cannot go on from that step' : '') +
          '. Nothing was done.',
      );
    }
    const { rows } = await retryRunStatement(runId, run.step_name).execute(trx);
    if (rows.length !== 1) throw new ConflictError(`Run ${runId} changed while it was being retried. Nothing was done.`);
    const previousStatus: RetriedRun['previousStatus'] = run.status;
    await audit(trx, checked, {
      action: 'retry',
      runId,
      target: run.step_name,
      detail: { previousStatus, fromStep: run.step_name, deadlineDropped: run.deadline_at !== null && rows[0]!.deadline_at === null },
    });
    return { runId, fromStep: run.step_name, previousStatus };
  });
}

function isRetryable(status: RunStatus): status is (typeof RETRYABLE)[number] {
  return (RETRYABLE as readonly RunStatus[]).includes(status);
}

/** Every workflow version a client knows, child workflows included, by `name@version`. */
export function workflowVersions(entries: ReadonlyArray<AnyWorkflow | WorkflowRegistration>): Map<string, AnyWorkflow> {
  const byVersion = new Map<string, AnyWorkflow>();
  const visit = (workflow: AnyWorkflow): void => {
    const id = `${workflow.name}@${workflow.version}`;
    if (byVersion.has(id)) return;
    byVersion.set(id, workflow);
    for (const step of workflow.steps) if (step.fanOut !== undefined) visit(step.fanOut.workflow);
  };
  for (const entry of entries) visit('handlers' in entry ? entry.workflow : entry);
  return byVersion;
}

/** {@link Client.resolveEffect}. */
export async function resolveEffect(
  db: Kysely<LedgerflowDatabase>,
  workflows: ReadonlyMap<string, AnyWorkflow>,
  limits: PayloadLimitsCache,
  runId: string,
  stepName: string,
  resolution: EffectResolution,
  note: OperatorNote,
): Promise<ResolvedEffect> {
  assertRunId(runId);
  const checked = checkNote(note, true)!;
  const found = checkResolution(resolution);
  return db.transaction().execute(async (trx) => {
    const run = await lockRun(trx, runId);
    const step = findStep(workflows, run, stepName);
    const output = found === undefined ? undefined : parseOutput(run, step, found.value, await limits.current(trx));
    const effect = await trx
      .selectFrom('ledgerflow.step_effect')
      .select(['idempotency_key', 'attempt'])
      .where('workflow_id', '=', runId)
      .where('step_name', '=', stepName)
      .where('status', '=', 'intent')
      .forNoKeyUpdate()
      .executeTakeFirst();
    if (effect === undefined) {
      const rows = await trx
        .selectFrom('ledgerflow.step_effect')
        .select(['idempotency_key', 'status'])
        .where('workflow_id', '=', runId)
        .where('step_name', '=', stepName)
        .execute();
      const has = rows.length === 0 ? 'no ledger row' : rows.map((r) => `key "${r.idempotency_key}" ${r.status}`).join(', ');
      throw new ConflictError(`Step "${stepName}" of run ${runId} has no open intent to resolve (${has}). Nothing was done.`);
    }
    const intent: IntentRef = { run_id: runId, step_name: stepName, idempotency_key: effect.idempotency_key, attempt: effect.attempt };
    const status = output === undefined ? 'released' : 'recorded';
    const resolutionText = output === undefined ? 'operator:not-found' : 'operator:found';
    const runStatus = await settle(trx, run, step, intent, output, resolutionText);
    await audit(trx, checked, {
      action: output === undefined ? 'resolve-not-found' : 'resolve-found',
      runId,
      target: effect.idempotency_key,
      detail: { step: stepName, intentAttempt: effect.attempt, previousStatus: run.status, runStatus, ...(output !== undefined ? { output } : {}) },
    });
    return { runId, stepName, idempotencyKey: effect.idempotency_key, status, runStatus };
  });
}

/**
 * Settles the intent as the reconciler would for the same answer: a run that is over, in the
 * ledger only; a run nobody holds, taken over (`claimForReconcile`: token moved on, a dead
 * owner's attempt abandoned) and advanced, or released for a same-key attempt due now — or failed,
 * if it had been parked because its attempts were exhausted. Returns the run's status after.
 */
async function settle(
  trx: Kysely<LedgerflowDatabase>,
  run: LockedRun,
  step: ResolvedStep,
  intent: IntentRef,
  output: Json | undefined,
  resolution: string,
): Promise<RunStatus> {
  const where = `run ${run.id}`;
  // A run that is over, or compensating (it does not go back to the step: core 0013), settles in
  // the ledger only — as the reconciler does.
  if (SETTLED_IN_LEDGER.includes(run.status) || (run.compensation !== null && step.compensates === undefined)) {
    const settled = await settleFinishedRunIntent(trx, intent, output === undefined ? { resolution } : { output, resolution });
    if (!settled) throw new ConflictError(`The intent of step "${step.name}" of ${where} changed meanwhile. Nothing was done.`);
    // A compensation parked until this intent was settled is pending now (woken by the settle).
    if (run.status !== 'needs_reconciliation') return run.status;
    const woken = await trx.selectFrom('ledgerflow.workflow_run').select('status').where('id', '=', run.id).executeTakeFirstOrThrow();
    return woken.status;
  }
  if (run.leased) {
    throw new ConflictError(
      `A worker holds ${where} under a live lease right now (it is working on it): resolve the intent once the run is parked, ` +
        'pending or over. Nothing was done.',
    );
  }
  if (run.status === 'waiting' || run.status === 'completed') {
    throw new ConflictError(`${where} is ${run.status}; an intent is resolved while its run is pending, parked or over. Nothing was done.`);
  }
  if (run.current_step !== step.position) {
    throw new ConflictError(`${where} is at step ${run.current_step}, not at "${step.name}" (step ${step.position}). Nothing was done.`);
  }
  const claim = await claimForReconcile(trx, run.id, step, `operator:${randomUUID()}`, OPERATOR_LEASE_MS);
  if (claim === undefined) throw new ConflictError(`${where} could not be taken over (it changed meanwhile). Nothing was done.`);
  if (output !== undefined) {
    const workflow = { name: run.workflow_name, version: run.workflow_version };
    const advanced = await advanceRun(trx, {
      lease: claim.lease,
      workflowName: workflow.name,
      workflowVersion: workflow.version,
      step,
      attempt: undefined,
      resultAttempt: intent.attempt,
      output,
      effect: { key: intent.idempotency_key, mode: 'record-intent', attempt: intent.attempt, resolution },
      continuation: step.last
        ? { kind: 'complete', runOutput: { ...claim.outputs, [step.name]: output }, ...(step.compensates !== undefined ? { compensated: true as const } : {}) }
        : { kind: 'release' },
    });
    if (!advanced.fenced) throw new ConflictError(`Lost ${where} while recording the effect. Nothing was done.`);
  } else {
    const released = await releaseIntent(trx, claim, intent, afterRelease(claim, 0), resolution);
    if (!released) throw new ConflictError(`The intent of step "${step.name}" of ${where} changed meanwhile. Nothing was done.`);
  }
  const after = await trx.selectFrom('ledgerflow.workflow_run').select('status').where('id', '=', run.id).executeTakeFirstOrThrow();
  // Due now: wake idle workers at commit, as a start does.
  if (after.status === 'pending') await sql`SELECT pg_notify(${RUNS_CHANNEL}, ${run.id})`.execute(trx);
  return after.status;
}

function checkResolution(resolution: EffectResolution): { readonly value: unknown } | undefined {
  const r = resolution as { found?: unknown; notFound?: unknown } | null;
  const hasFound = r !== null && typeof r === 'object' && 'found' in r;
  const notFound = r !== null && typeof r === 'object' && r.notFound === true;
  if (hasFound === notFound) {
    throw new ValidationError('The resolution must be either { found: <output> } or { notFound: true }. Nothing was done.', [
      'resolution: exactly one of found, notFound',
    ]);
  }
  return hasFound ? { value: r!.found } : undefined;
}

interface ResolvedStep extends StepDefinition {
  /** The last step of its phase: recording it completes the run (a step) or compensates it (a compensation). */
  readonly last: boolean;
}

function findStep(workflows: ReadonlyMap<string, AnyWorkflow>, run: LockedRun, stepName: string): ResolvedStep {
  const workflow = workflows.get(`${run.workflow_name}@${run.workflow_version}`);
  if (workflow === undefined) {
    const known = [...workflows.keys()].sort();
    throw new UnknownWorkflowError(
      `Run ${run.id} is ${run.workflow_name} v${run.workflow_version}, which this client does not know, so the output cannot be ` +
        `checked against the step's schema. ${known.length > 0 ? `Known: ${known.join(', ')}.` : 'No workflows were given.'} ` +
        'Pass that version in createClient({ workflows }) (the CLI: --workflows <module>). Nothing was done.',
    );
  }
  // A compensation's own intent (a refund whose outcome is unknown) is resolved like a step's.
  const step = workflow.steps.find((s) => s.name === stepName) ?? workflow.compensations.find((s) => s.name === stepName);
  if (step === undefined) {
    const compensations = workflow.compensations.length > 0 ? `; its compensations: ${workflow.compensations.map((s) => s.name).join(', ')}` : '';
    throw new ValidationError(
      `Workflow ${workflow.name} v${workflow.version} has no step "${stepName}"; its steps: ${workflow.steps.map((s) => s.name).join(', ')}${compensations}. Nothing was done.`,
      [`step: unknown ${stepName}`],
    );
  }
  // The last of its phase: recording the last step completes the run, the last compensation compensates it.
  const end = step.compensates === undefined ? workflow.steps.length : workflow.steps.length + workflow.compensations.length;
  return { ...step, last: step.position === end - 1 };
}

/**
 * The operator's output, held to what the worker and the reconciler hold one to
 * ({@link checkRecordedOutput}: schema, size limit, JSON): refused with the reason, nothing written.
 */
function parseOutput(run: LockedRun, step: StepDefinition, value: unknown, limits: PayloadLimits): Json {
  const checked = checkRecordedOutput(step, run.workflow_name, value, limits);
  if (checked.ok) return checked.output;
  switch (checked.problem) {
    case 'schema': {
      const issues = describeIssues(checked.issues);
      throw new ValidationError(
        `Invalid output for step "${step.name}" of ${run.workflow_name} v${run.workflow_version}:\n${issues.map((i) => `  - ${i}`).join('\n')}\n` +
          'Nothing was done.',
        issues,
      );
    }
    case 'too-large':
      throw checked.error;
    case 'unstorable':
      throw new ValidationError(`The output for step "${step.name}" cannot be recorded: ${checked.reason}. Nothing was done.`, [
        `(output): ${checked.reason}`,
      ]);
  }
}

/**
 * {@link Client.pauseQueue} / {@link Client.resumeQueue}: the queue's exclusive lock and counter row
 * taken first — what every grant takes — so a grant or fast ask that follows a pause sees it; a resume grants at once
 * what the limits allow. `false` when the queue was already so.
 */
export async function setQueuePaused(db: Kysely<LedgerflowDatabase>, name: string, paused: boolean, note?: OperatorNote): Promise<boolean> {
  const checked = checkNote(note, false);
  return db.transaction().execute(async (trx) => {
    // The queue's exclusive lock first, then its counter row (the order of every grant, core 0022):
    // no fast ask is in progress, and each one after the pause reads it.
    await sql`SELECT ledgerflow.queue_lock(${name})`.execute(trx);
    await sql`SELECT 1 FROM ledgerflow.queue_partition WHERE queue = ${name} AND partition = '' FOR UPDATE`.execute(trx);
    const changed = await trx
      .updateTable('ledgerflow.queue')
      .set({ paused })
      .where('name', '=', name)
      .where('paused', '=', !paused)
      .returning('name')
      .executeTakeFirst();
    if (changed === undefined) {
      const exists = await trx.selectFrom('ledgerflow.queue').select('name').where('name', '=', name).executeTakeFirst();
      if (exists === undefined) {
        throw new QueueNotFoundError(
          `No queue "${name}" is registered in this database. Queues are registered by the workers that serve workflows using them; ` +
            '`ledgerflow queues` lists those that are.',
        );
      }
      return false;
    }
    const granted = paused ? 0 : (await sql<{ granted: number }>`SELECT ledgerflow.queue_grant(${name}) AS granted`.execute(trx)).rows[0]!.granted;
    await audit(trx, checked, { action: paused ? 'pause-queue' : 'resume-queue', runId: null, target: name, detail: paused ? {} : { granted } });
    return true;
  });
}

/** {@link Client.pauseSchedule} / {@link Client.resumeSchedule} with the audit row in the same transaction. */
export async function setSchedulePaused(db: Kysely<LedgerflowDatabase>, name: string, paused: boolean, note?: OperatorNote): Promise<boolean> {
  const checked = checkNote(note, false);
  return db.transaction().execute(async (trx) => {
    const changed = paused ? await pauseSchedule(trx, name) : await resumeScheduleIn(trx, name);
    if (changed) await audit(trx, checked, { action: paused ? 'pause-schedule' : 'resume-schedule', runId: null, target: name, detail: {} });
    return changed;
  });
}

/** {@link Client.listAudit}: newest first. */
export async function listAudit(db: Kysely<LedgerflowDatabase>, filter: AuditFilter, limit: number): Promise<OperatorActionRow[]> {
  let query = db.selectFrom('ledgerflow.operator_action').selectAll();
  if (filter.runId !== undefined) {
    assertRunId(filter.runId);
    query = query.where('run_id', '=', filter.runId);
  }
  return query.orderBy('id', 'desc').limit(limit).execute();
}
