import type { Kysely } from 'kysely';
import type { LeasedRun, StartCompletion } from '../../store/leased-run.js';
import type { Json, LedgerflowDatabase } from '../../store/tables.js';
import { carryValues } from '../carried-prefix.js';
import { leaseLost } from '../lease.js';
import { resultCommit, type AdvanceParams } from '../result-commit.js';
import { commitResult, type StepExecution, type StepOutcome } from './step-execution.js';

/*
 * A run's insert, when its start handed it over uninserted (client/deferred-start.ts): alone, just
 * before the run's first commit, unless that commit is a transactional step's (step-transaction.ts)
 * or the run's completion (then the insert IS the completion: {@link commitPlainResult}).
 */

/** What inserting a pending start needs of a step's execution. */
interface StartOf {
  readonly run: LeasedRun;
  readonly db: Kysely<LedgerflowDatabase>;
}

/**
 * A run a start of this process handed over uninserted (`PendingStart`, client/deferred-start.ts)
 * gets its row, as its own commit, before any commit but a transactional step's — which inserts
 * it first in its own transaction (step-transaction.ts): the start rides on that commit. (A plain
 * step's commit does not take it into a transaction of its own: BEGIN, insert, commit, COMMIT cost
 * more than the second durable commit they save — measured, DESIGN.md.)
 */
export async function insertStart(s: StartOf): Promise<void> {
  const pending = s.run.pendingStart;
  if (pending !== undefined && !pending.inserted) await pending.insertAlone(s.db);
}

/**
 * A plain step's result commit. When the run has no row yet and this step completes it (the
 * steps before it, if any, carried), the run is inserted already completed: ONE statement and one
 * durable commit for the whole workflow, start included (`PendingStart.insertCompleted`), instead
 * of the insert alone and then the completion. Otherwise the insert, if still to make, goes alone
 * first and the step commits as usual (through the commit queue).
 */
export async function commitPlainResult(s: StepExecution, output: Json): Promise<StepOutcome> {
  const commit = resultCommit(s, output);
  const pending = s.run.pendingStart;
  const continuation = commit.continuation;
  if (pending !== undefined && !pending.inserted && continuation.kind === 'complete') {
    const completion = startCompletion(s, commit, continuation.runOutput, performance.now());
    const written = await pending.insertCompleted(s.db, completion);
    if (written === 'not-written') throw leaseLost(s.lease, 'the completed insert');
    if (written === 'completed') {
      if (s.carry !== undefined) s.carry.written = true;
      return { kind: 'advanced', output, continuation: 'complete', nextAttempt: null, claimed: undefined };
    }
  }
  await insertStart(s);
  return commitResult(s, commit, output);
}

function startCompletion(s: StepExecution, commit: AdvanceParams, runOutput: Json, now: number): StartCompletion {
  const carry = commit.carry;
  const carried =
    carry === undefined
      ? undefined
      : carryValues(s.lease, { name: s.run.workflowName, version: s.run.workflowVersion }, carry, now);
  return {
    stepName: s.step.name,
    stepKind: s.step.kind,
    attempt: s.attempt,
    output: JSON.stringify(commit.output),
    runOutput: JSON.stringify(runOutput),
    toPosition: s.step.position + 1,
    ...(carried !== undefined
      ? { carried: { rows: carried.carriedRows, stepStartAgo: carried.carryingStartAgo } }
      : {}),
  };
}
