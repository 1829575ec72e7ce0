/*
 * The `child` and `forEach` step kinds: start the step's children in item order, a batch per
 * commit, park the run `waiting` until the `run_settled` trigger wakes it, fail the step on a
 * failed child, complete it with the children's outputs. The state is the database's: how many
 * children the step started, how many are unfinished or failed (`children_open`,
 * `children_failed`); each attempt reads it again (see {@link executeChildren}).
 */
import { randomUUID } from 'node:crypto';
import { MAX_DEDUPE_KEY_LENGTH, parseStartInput } from '../../client/validate-input.js';
import { ConflictError, NonRetryableError, PayloadTooLargeError, ValidationError } from '../../errors.js';
import { faultPoint } from '../../faults/fault-points.js';
import { SQLSTATE, sqlStateOf } from '../../store/sqlstate.js';
import type { WaitingFor } from '../../store/tables.js';
import { leaseLost } from '../lease.js';
import { evaluateStepFunction, StepFailure } from '../step-errors.js';
import {
  childrenState,
  childResults,
  firstFailedChild,
  prunedChildren,
  startChildren,
  suspendRun,
  type ChildToStart,
} from '../wait-commits.js';
import {
  commitKnowingOutcome,
  commitOutput,
  keyContext,
  validateOutput,
  type StepExecution,
  type StepExecutor,
} from './step-execution.js';

/** Children started per commit unless `WorkerOptions.childrenPerCommit` says otherwise; each such commit also renews the parent's lease. */
export const DEFAULT_CHILDREN_PER_COMMIT = 500;

/** A child of this step failed or was cancelled: the step fails, and the run with it (retrying would find the same child). */
export class ChildFailedError extends NonRetryableError {
  override readonly name = 'ChildFailedError';
}

/**
 * A child this step started was pruned, so its output is gone: the step fails rather than complete
 * with fewer results than items (retryRun refuses a run whose children were pruned; this is the
 * run that got past it, racing the prune).
 */
export class ChildPrunedError extends NonRetryableError {
  override readonly name = 'ChildPrunedError';
}

/**
 * `child` and `forEach` (a `child` step is a list of one). Each attempt recomputes the item list,
 * keys and inputs (pure functions of the checkpointed context), then looks at what the database
 * says — how many children this step started, how many are unfinished, whether one failed — and
 * does the next thing:
 * - starts the next children (at most `childrenPerCommit` per commit, in item order, and
 *   no more than `concurrency` unfinished at once). A child already started by a crashed attempt
 *   is skipped by its (parent, step, index), so none is started twice;
 * - fails the step if a child failed or was cancelled ({@link ChildFailedError});
 * - completes the step with the children's outputs in item order when all are done — every
 *   item's child, or the step fails ({@link ChildPrunedError}): a child started and then pruned is
 *   never taken for "no child";
 * - otherwise parks the run `waiting` until the `run_settled` trigger wakes it: when all are
 *   done, when a slot frees up (`concurrency`), or when one fails.
 */
export const executeChildren: StepExecutor = async (s) => {
  const children = await plannedChildren(s);
  const fanOut = s.step.fanOut!;
  const child = fanOut.workflow;
  const lastStep = child.steps.at(-1)?.name;
  if (lastStep === undefined)
    throw new StepFailure(new NonRetryableError(`Child workflow "${child.name}" v${child.version} has no steps.`));
  for (;;) {
    const state = await commitKnowingOutcome(s, () => childrenState(s.db, s.lease, s.step.name), { retry: true });
    if (!state.fenced) throw leaseLost(s.lease, 'the children step');
    if (state.failed > 0) {
      const failed = await firstFailedChild(s.db, s.run.id, s.step.name);
      const why =
        failed?.error !== null && typeof failed?.error === 'object' && !Array.isArray(failed.error)
          ? ` (${String(failed.error['message'] ?? '')})`
          : '';
      throw new StepFailure(
        new ChildFailedError(
          failed === undefined
            ? `a child of step "${s.step.name}" failed or was cancelled`
            : `child ${failed.index} of step "${s.step.name}" (run ${failed.id}, workflow "${child.name}") ${failed.status}${why}`,
        ),
      );
    }
    const done = state.started - state.open;
    const allowed = Math.min(
      children.length,
      fanOut.concurrency === Infinity ? children.length : done + fanOut.concurrency,
    );
    if (state.started < allowed) {
      const batch = children.slice(state.started, Math.min(allowed, state.started + s.childrenPerCommit));
      const started = await commitKnowingOutcome(s, () => startBatch(s, batch), { retry: true });
      if (!started.fenced) throw leaseLost(s.lease, 'the children step');
      await faultPoint('after-child-batch');
      continue;
    }
    if (state.started >= children.length && state.open === 0) {
      const results = await childResults(s.db, s.run.id, s.step.name, lastStep);
      const missing = children.findIndex((c, i) => results[i]?.index !== c.index);
      if (missing !== -1) throw new StepFailure(new ChildPrunedError(prunedMessage(s, `child ${missing}`)));
      const outputs = results.map((r) => r.result);
      const output = validateOutput(s, s.step.kind === 'child' ? (outputs[0] ?? null) : outputs);
      await faultPoint('before-wait-commit');
      return commitKnowingOutcome(s, () => commitOutput(s, output), { retry: true });
    }
    const remaining = state.started < children.length;
    const waitingFor: WaitingFor = {
      kind: 'children',
      step: s.step.name,
      open: state.open,
      total: children.length,
      // Wake when a slot frees up while children remain to start; otherwise when all are done.
      wakeBelow: remaining ? fanOut.concurrency : 1,
    };
    const suspended = await commitKnowingOutcome(
      s,
      () => suspendRun(s.db, { lease: s.lease, stepName: s.step.name, attempt: s.attempt, waitingFor, until: null }),
      { retry: true },
    );
    if (!suspended.fenced) throw leaseLost(s.lease, 'the children step');
    return { kind: 'suspended', waitingFor, due: suspended.due };
  }
};

async function startBatch(
  s: StepExecution,
  batch: readonly ChildToStart[],
): Promise<{ fenced: boolean; started: number }> {
  const child = s.step.fanOut!.workflow;
  try {
    return await startChildren(s.db, {
      lease: s.lease,
      stepName: s.step.name,
      child: { name: child.name, version: child.version, timeoutMs: child.timeoutMs },
      children: batch,
      traceContext: s.trace.carrier(),
    });
  } catch (error) {
    if (sqlStateOf(error) === SQLSTATE.FOREIGN_KEY_VIOLATION) {
      throw new StepFailure(
        new NonRetryableError(
          `Step "${s.step.name}" starts workflow "${child.name}" v${child.version}, which is not migrated in this database. ` +
            'Run `ledgerflow codegen` and `ledgerflow migrate`.',
        ),
      );
    }
    if (sqlStateOf(error) === SQLSTATE.UNIQUE_VIOLATION) {
      // The key may name this step's own child, started by an earlier attempt and pruned since.
      const pruned = await prunedChildren(
        s.db,
        s.run.id,
        child.name,
        batch.map((c) => c.key),
      );
      if (pruned.length > 0) {
        const index = batch.find((c) => c.key === pruned[0]!.key)!.index;
        throw new StepFailure(new ChildPrunedError(prunedMessage(s, `child ${index} (run ${pruned[0]!.id})`)));
      }
      throw new StepFailure(
        new ConflictError(
          `A dedupe key of step "${s.step.name}" already names a run of workflow "${child.name}" that this step did not start ` +
            `(keys ${batch[0]!.key} … ${batch.at(-1)!.key}). Child keys must be unique to their parent: derive them from the parent's input.`,
        ),
      );
    }
    throw error;
  }
}

function prunedMessage(s: StepExecution, which: string): string {
  return (
    `${which} of step "${s.step.name}" was pruned: its output is gone, so the step cannot complete (it never completes with ` +
    'fewer results than items). Prune keeps the children of a failed or cancelled run while the run stays; this run was retried ' +
    'while a prune removed them. Start a new run if the work must be done.'
  );
}

/** The step's children, computed from the checkpointed context: item list, keys (unique) and validated inputs. */
async function plannedChildren(s: StepExecution): Promise<ChildToStart[]> {
  const fanOut = s.step.fanOut!;
  const context = keyContext(s);
  const items =
    fanOut.items === undefined
      ? [null]
      : evaluateStepFunction(() => fanOut.items!(context), `The items of step "${s.step.name}"`);
  if (!Array.isArray(items)) {
    throw new StepFailure(
      new NonRetryableError(`The items of step "${s.step.name}" must be an array (got ${typeof items}).`),
    );
  }
  const seen = new Map<string, number>();
  const planned: ChildToStart[] = [];
  for (let index = 0; index < items.length; index += 1) {
    const itemContext = { ...context, item: items[index] as unknown, index };
    const key = evaluateStepFunction(() => fanOut.key(itemContext), `The key of step "${s.step.name}" (item ${index})`);
    if (typeof key !== 'string' || key === '' || key.length > MAX_DEDUPE_KEY_LENGTH) {
      throw new StepFailure(
        new NonRetryableError(
          `The key of step "${s.step.name}" must return a non-empty string of at most ${MAX_DEDUPE_KEY_LENGTH} characters (item ${index}: ${JSON.stringify(key)}).`,
        ),
      );
    }
    const twin = seen.get(key);
    if (twin !== undefined) {
      throw new StepFailure(
        new NonRetryableError(
          `Items ${twin} and ${index} of step "${s.step.name}" have the same key "${key}": each item's key must be unique (derive it from the item).`,
        ),
      );
    }
    seen.set(key, index);
    const input = evaluateStepFunction(
      () => fanOut.input(itemContext),
      `The input of step "${s.step.name}" (item ${index})`,
    );
    let json: string;
    try {
      json = parseStartInput(fanOut.workflow, input, s.limits);
    } catch (error) {
      if (error instanceof PayloadTooLargeError) throw new StepFailure(error);
      if (!(error instanceof ValidationError)) throw error;
      throw new StepFailure(
        new NonRetryableError(
          `The input of step "${s.step.name}" for item ${index} does not fit workflow "${fanOut.workflow.name}": ${error.message}`,
        ),
      );
    }
    planned.push({ index, id: randomUUID(), key, input: json });
  }
  return planned;
}
