/**
 * The three step kinds and what each may do. See DESIGN.md "Step kinds and their protocols".
 *
 * - `step`: compute or read; runs at least once, its output is checkpointed.
 * - `transactional`: writes to the same PostgreSQL; exactly once, in one fenced commit
 *   together with its ledger row and the run's transition.
 * - `external`: calls another system; at most one effect per key, given a provider that
 *   dedupes by key (`idempotentByKey`) or a `reconcile` lookup.
 */
export type StepKind = 'step' | 'transactional' | 'external';

export const STEP_KINDS: readonly StepKind[] = ['step', 'transactional', 'external'];

/** Kinds whose effects go through the ledger and therefore need a key. */
export type EffectStepKind = Exclude<StepKind, 'step'>;

export function isEffectKind(kind: StepKind): kind is EffectStepKind {
  return kind !== 'step';
}
