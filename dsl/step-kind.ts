/**
 * The step kinds and what each may do. See DESIGN.md "Step kinds and their protocols".
 *
 * - `step`: compute or read; runs at least once, its output is checkpointed.
 * - `transactional`: writes to the same PostgreSQL; exactly once, in one fenced commit
 *   together with its ledger row and the run's transition.
 * - `external`: calls another system; at most one effect per key, given a provider that
 *   dedupes by key (`idempotentByKey`) or a `reconcile` lookup.
 * - `sleep`: waits until a time fixed on database time when the run first reaches it.
 * - `waitFor`: waits for a typed event with a correlation key (or a signal to the run), with a timeout.
 * - `child`: starts one child workflow exactly once (by key) and takes its output.
 * - `forEach`: starts one child per item exactly once (by per-item key) and takes their outputs in order.
 *
 * The last four have no handler: the runtime does all of their work.
 */
export type StepKind = 'step' | 'transactional' | 'external' | 'sleep' | 'waitFor' | 'child' | 'forEach';

export const STEP_KINDS: readonly StepKind[] = [
  'step',
  'transactional',
  'external',
  'sleep',
  'waitFor',
  'child',
  'forEach',
];

/** Kinds whose effects go through the ledger and therefore need a key and a handler's effect. */
export type EffectStepKind = 'transactional' | 'external';

export function isEffectKind(kind: StepKind): kind is EffectStepKind {
  return kind === 'transactional' || kind === 'external';
}

/** Kinds the runtime carries out itself, without a handler. */
export type BuiltInStepKind = 'sleep' | 'waitFor' | 'child' | 'forEach';

export function isBuiltInKind(kind: StepKind): kind is BuiltInStepKind {
  return kind === 'sleep' || kind === 'waitFor' || kind === 'child' || kind === 'forEach';
}

/** Kinds that take a handler in the workflow's generated contract. */
export type HandlerStepKind = Exclude<StepKind, BuiltInStepKind>;
