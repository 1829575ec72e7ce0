import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { StepDefinition } from '../../dsl/workflow.js';
import type { LedgerflowDatabase } from '../store/tables.js';
import { millis } from '../store/millis.js';
import { assertRunTransition } from '../store/state-machines.js';
import { finishExhausted, lockFencedRun, type ExhaustedOutcome, type FailureParams } from './failure-commits.js';
import type { Lease } from './lease.js';
import { backoffDelayMs, crashLimit } from './retry.js';
import type { SerializedError } from './step-errors.js';

/*
 * The commit of a run taken over from a step that crashed its worker again (a poison step: the
 * claim opened no attempt): back off (`running -> pending` after the step's backoff), or, at the
 * crash limit, end the step as failure-commits.ts ends an exhausted one. One transaction that
 * first locks the run and checks the fencing token, so a zombie records nothing. Stateless.
 */

export type CrashOutcome =
  | { readonly kind: 'retry'; readonly retryAt: Date; readonly crashes: number }
  | (ExhaustedOutcome & { readonly crashes: number });

export interface CrashParams {
  readonly lease: Lease;
  readonly step: StepDefinition;
  /** `LeaseExpired` attempts of the step, the one the claim just closed included. */
  readonly crashes: number;
  readonly canReconcile: boolean;
  /** As for {@link FailureParams.compensateFrom}. */
  readonly compensateFrom?: number | undefined;
  /** As for {@link FailureParams.stepCompensated}. */
  readonly stepCompensated?: boolean;
  readonly random?: () => number;
}

/**
 * A run taken over from a step that crashed its worker again (poison step): the claim opened
 * no attempt. Below {@link crashLimit} the run goes back to `pending` after a backoff (the
 * step's own policy, counted in crashes); at the limit the step is over — the run fails with
 * an error naming the crashes, or parks if an `external` intent is open (as for exhausted
 * attempts). The abandoned attempts stay in the history with their `LeaseExpired` errors.
 * One fenced transaction.
 */
export async function commitCrash(db: Kysely<LedgerflowDatabase>, p: CrashParams): Promise<CrashOutcome> {
  const { lease, step, crashes } = p;
  const limit = crashLimit(step.retry);
  return db.transaction().execute(async (trx) => {
    const run = await lockFencedRun(trx, lease, step.name, 'its crash');
    if (crashes < limit) {
      // The first crash waited one lease before anyone took over; later ones back off further.
      const delayMs = backoffDelayMs(step.retry, crashes - 1, p.random);
      const { rows: retried } = await crashRetryStatement(lease, delayMs).execute(trx);
      return { kind: 'retry', retryAt: retried[0]!.retry_at, crashes };
    }
    const error: SerializedError = {
      name: 'StepCrashedWorker',
      message:
        `step "${step.name}" crashed its worker ${crashes} times: each time the lease expired before the attempt finished ` +
        '(the worker process died, hung, or lost the database); it is not tried again',
      step: step.name,
      crashes,
    };
    const end = await finishExhausted(trx, {
      lease,
      step,
      attempt: undefined,
      error,
      why: `crash limit reached (${crashes}/${limit})`,
      openIntent: run.open_intent,
      conflict: false,
      canReconcile: p.canReconcile,
      compensateFrom: p.compensateFrom,
      stepCompensated: p.stepCompensated,
    });
    return { ...end, crashes };
  });
}

/** A backoff after a repeated crash (inside the crash commit): the run `pending` until `statement_timestamp() + delayMs`. */
export function crashRetryStatement(lease: Lease, delayMs: number): RawBuilder<{ retry_at: Date }> {
  assertRunTransition('running', 'pending');
  return sql<{ retry_at: Date }>`
        UPDATE ledgerflow.workflow_run
           SET status = 'pending', lease_owner = NULL, lease_expires_at = NULL, updated_at = statement_timestamp(),
               run_after = statement_timestamp() + ${millis(delayMs)}
         WHERE id = ${lease.runId}
        RETURNING run_after AS retry_at`;
}
