import type { AttemptStatus, EffectStatus, RunStatus } from '../store/tables.js';

/**
 * The three status machines the worker and the reconciler drive, as data, with assertions that
 * every write calls before it builds its SQL. The SQL itself also guards each transition with
 * `WHERE status = …`, so a transition the code did not intend cannot happen silently.
 *
 * Run (workflow_run.status), as seen by the runtime:
 *   pending  --claim (worker or reconciler)-->  running
 *   running  --step committed, lease held-->  running
 *   running  --step committed, lease released (worker stopping, reconciler found)-->  pending
 *   running  --last step committed-->  completed
 *   running  --retryable failure / intent not yet due / stop()-->  pending
 *   running  --exhausted, non-retryable, conflict, crash limit-->  failed
 *   running (taken over after a repeated crash, no attempt open)  --backoff-->  pending
 *   running  --intent outcome unknown (reconcile: unknown, or exhausted with an open intent)-->  needs_reconciliation
 *   needs_reconciliation  --reconciler claims it-->  running
 *   running (lease expired)  --claim by another owner, fencing_token + 1-->  running
 * completed, failed and cancelled are final; `cancelled` is written only by the client.
 *
 * Ledger (step_effect.status):
 *   (none)    --transactional: inserted in the step's own commit-->  recorded
 *   (none)    --external: intent commit-->  intent
 *   intent    --result commit (perform returned, or reconcile found it)-->  recorded
 *   intent    --same owner re-takes it (idempotentByKey retry, or reconcile: not found)-->  intent
 *   intent    --reconcile: not found / definitive refusal / exhausted with provider dedupe-->  released
 *   released  --a new attempt re-takes the same key and request-->  intent
 * recorded is final: referenced by step_result, never rewritten.
 *
 * Attempt (step_attempt.status):
 *   (none)   --claim, or the previous step's commit under a held lease-->  running
 *   running  --step committed-->  succeeded
 *   running  --handler/perform/validation failed-->  failed        (counts toward maxAttempts)
 *   running  --lease expired (`LeaseExpired`: the worker crashed or hung)-->  abandoned  (counts toward the crash limit)
 *   running  --worker stopped, intent not yet due, parked-->  abandoned  (does not count)
 * The crash limit is max(maxAttempts, 5) per step (retry.ts `crashLimit`); from a step's second
 * crash on, the claim opens no attempt and the run backs off, or fails (parks, with an open intent).
 */
export const RUN_TRANSITIONS: Readonly<Record<RunStatus, readonly RunStatus[]>> = {
  pending: ['running'],
  running: ['running', 'pending', 'completed', 'failed', 'needs_reconciliation'],
  needs_reconciliation: ['running'],
  completed: [],
  failed: [],
  cancelled: [],
};

export const EFFECT_TRANSITIONS: Readonly<Record<EffectStatus | 'none', readonly EffectStatus[]>> = {
  none: ['intent', 'recorded'],
  intent: ['recorded', 'intent', 'released'],
  released: ['intent'],
  recorded: [],
};

export const ATTEMPT_TRANSITIONS: Readonly<Record<AttemptStatus | 'none', readonly AttemptStatus[]>> = {
  none: ['running'],
  running: ['succeeded', 'failed', 'abandoned'],
  succeeded: [],
  failed: [],
  abandoned: [],
};

export class IllegalTransitionError extends Error {
  override readonly name = 'IllegalTransitionError';
}

export function assertRunTransition(from: RunStatus, to: RunStatus): void {
  if (!RUN_TRANSITIONS[from].includes(to)) {
    throw new IllegalTransitionError(`Illegal run transition ${from} -> ${to}`);
  }
}

export function assertEffectTransition(from: EffectStatus | 'none', to: EffectStatus): void {
  if (!EFFECT_TRANSITIONS[from].includes(to)) {
    throw new IllegalTransitionError(`Illegal ledger transition ${from} -> ${to}`);
  }
}

export function assertAttemptTransition(from: AttemptStatus | 'none', to: AttemptStatus): void {
  if (!ATTEMPT_TRANSITIONS[from].includes(to)) {
    throw new IllegalTransitionError(`Illegal attempt transition ${from} -> ${to}`);
  }
}
