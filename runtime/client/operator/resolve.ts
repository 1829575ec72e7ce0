import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { AnyWorkflow, StepDefinition } from '../../../dsl/workflow.js';
import type { WorkflowRegistration } from '../../contracts/registration.js';
import { ConflictError, UnknownWorkflowError, ValidationError } from '../../errors.js';
import type { PayloadLimitsCache } from '../../limits/limits-cache.js';
import type { PayloadLimits } from '../../limits/payload-limits.js';
import { checkRecordedOutput } from '../../limits/recorded-output.js';
import {
  afterRelease,
  claimForReconcile,
  releaseIntent,
  settleFinishedRunIntent,
  type IntentRef,
} from '../../reconciler/reconcile-commits.js';
import { RUNS_CHANNEL } from '../../store/channels.js';
import { ENDED_UNCOMPLETED_RUN_STATUSES, runStatusIn } from '../../store/state-machines.js';
import type { Json, LedgerflowDatabase, RunStatus } from '../../store/tables.js';
import { advanceRun } from '../../worker/step-commits.js';
import { assertRunId, describeIssues } from '../validate-input.js';
import { audit, checkNote, lockRun, type LockedRun, type OperatorNote } from './operator-action.js';

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

/** How long an operator's claim of a run lasts; the claim is released by the same transaction. */
const OPERATOR_LEASE_MS = 30_000;

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
      const has =
        rows.length === 0 ? 'no ledger row' : rows.map((r) => `key "${r.idempotency_key}" ${r.status}`).join(', ');
      throw new ConflictError(
        `Step "${stepName}" of run ${runId} has no open intent to resolve (${has}). Nothing was done.`,
      );
    }
    const intent: IntentRef = {
      run_id: runId,
      step_name: stepName,
      idempotency_key: effect.idempotency_key,
      attempt: effect.attempt,
    };
    const status = output === undefined ? 'released' : 'recorded';
    const resolutionText = output === undefined ? 'operator:not-found' : 'operator:found';
    const runStatus = await settle(trx, run, step, intent, output, resolutionText);
    await audit(trx, checked, {
      action: output === undefined ? 'resolve-not-found' : 'resolve-found',
      runId,
      target: effect.idempotency_key,
      detail: {
        step: stepName,
        intentAttempt: effect.attempt,
        previousStatus: run.status,
        runStatus,
        ...(output !== undefined ? { output } : {}),
      },
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
  if (
    runStatusIn(ENDED_UNCOMPLETED_RUN_STATUSES, run.status) ||
    (run.compensation !== null && step.compensates === undefined)
  ) {
    const settled = await settleFinishedRunIntent(
      trx,
      intent,
      output === undefined ? { resolution } : { output, resolution },
    );
    if (!settled)
      throw new ConflictError(`The intent of step "${step.name}" of ${where} changed meanwhile. Nothing was done.`);
    // A compensation parked until this intent was settled is pending now (woken by the settle).
    if (run.status !== 'needs_reconciliation') return run.status;
    const woken = await trx
      .selectFrom('ledgerflow.workflow_run')
      .select('status')
      .where('id', '=', run.id)
      .executeTakeFirstOrThrow();
    return woken.status;
  }
  if (run.leased) {
    throw new ConflictError(
      `A worker holds ${where} under a live lease right now (it is working on it): resolve the intent once the run is parked, ` +
        'pending or over. Nothing was done.',
    );
  }
  if (run.status === 'waiting' || run.status === 'completed') {
    throw new ConflictError(
      `${where} is ${run.status}; an intent is resolved while its run is pending, parked or over. Nothing was done.`,
    );
  }
  if (run.current_step !== step.position) {
    throw new ConflictError(
      `${where} is at step ${run.current_step}, not at "${step.name}" (step ${step.position}). Nothing was done.`,
    );
  }
  const claim = await claimForReconcile(trx, run.id, step, `operator:${randomUUID()}`, OPERATOR_LEASE_MS);
  if (claim === undefined)
    throw new ConflictError(`${where} could not be taken over (it changed meanwhile). Nothing was done.`);
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
        ? {
            kind: 'complete',
            runOutput: { ...claim.outputs, [step.name]: output },
            ...(step.compensates !== undefined ? { compensated: true as const } : {}),
          }
        : { kind: 'release' },
    });
    if (!advanced.fenced) throw new ConflictError(`Lost ${where} while recording the effect. Nothing was done.`);
  } else {
    const released = await releaseIntent(trx, claim, intent, afterRelease(claim, 0), resolution);
    if (!released)
      throw new ConflictError(`The intent of step "${step.name}" of ${where} changed meanwhile. Nothing was done.`);
  }
  const after = await trx
    .selectFrom('ledgerflow.workflow_run')
    .select('status')
    .where('id', '=', run.id)
    .executeTakeFirstOrThrow();
  // Due now: wake idle workers at commit, as a start does.
  if (after.status === 'pending') await sql`SELECT pg_notify(${RUNS_CHANNEL}, ${run.id})`.execute(trx);
  return after.status;
}

function checkResolution(resolution: EffectResolution): { readonly value: unknown } | undefined {
  const r = resolution as { found?: unknown; notFound?: unknown } | null;
  const hasFound = r !== null && typeof r === 'object' && 'found' in r;
  const notFound = r !== null && typeof r === 'object' && r.notFound === true;
  if (hasFound === notFound) {
    throw new ValidationError(
      'The resolution must be either { found: <output> } or { notFound: true }. Nothing was done.',
      ['resolution: exactly one of found, notFound'],
    );
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
  const step =
    workflow.steps.find((s) => s.name === stepName) ?? workflow.compensations.find((s) => s.name === stepName);
  if (step === undefined) {
    const compensations =
      workflow.compensations.length > 0
        ? `; its compensations: ${workflow.compensations.map((s) => s.name).join(', ')}`
        : '';
    throw new ValidationError(
      `Workflow ${workflow.name} v${workflow.version} has no step "${stepName}"; its steps: ${workflow.steps.map((s) => s.name).join(', ')}${compensations}. Nothing was done.`,
      [`step: unknown ${stepName}`],
    );
  }
  // The last of its phase: recording the last step completes the run, the last compensation compensates it.
  const end =
    step.compensates === undefined ? workflow.steps.length : workflow.steps.length + workflow.compensations.length;
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
      throw new ValidationError(
        `The output for step "${step.name}" cannot be recorded: ${checked.reason}. Nothing was done.`,
        [`(output): ${checked.reason}`],
      );
  }
}
