/**
 * Seeds with which the composition fuzzer found a defect, each replayed on every run of
 * tests/fuzz/fuzz.test.ts (as one batch, before the random compositions). A seed fixes the
 * composition and its actions, not the timing of processes. One replay of this batch on the code
 * before issue 24's fixes hit items 3 and 4 and the failure path (20789007, 20789014, 20789029,
 * 20789054); items 2 and 7 needed the timing of their original batch, and have deterministic tests
 * of their own (tests/runtime/prune.test.ts, tests/property/stored-outputs.property.test.ts).
 */
export interface RegressionSeed {
  readonly seed: number;
  readonly found: string;
}

export const REGRESSION_SEEDS: readonly RegressionSeed[] = [
  {
    seed: 20789108,
    found: 'a retried forEach parent whose child was pruned completed with 2 results for 3 items (item 2)',
  },
  {
    seed: 20789007,
    found: 'a retried parent restarted a pruned child and met its archived key: ConflictError (item 2)',
  },
  {
    seed: 20789014,
    found: 'the reconciler and resolve --found recorded a 4 236-byte output under a 4 096-byte limit (item 3)',
  },
  { seed: 20789054, found: 'a run cancelled with compensate kept its queue slot and place in line (item 4)' },
  {
    seed: 20789029,
    found: 'a run that failed into compensation kept its whole-run queue slot (found by the fuzzer, beside item 4)',
  },
  {
    seed: 20789068,
    found: 'a key over an earlier output changed after a take-over reloaded it: ConflictError (item 7)',
  },
  {
    seed: 20789173,
    found:
      'a run cancelled with compensate waited pending, rescheduled on the reconciler backoff, on an intent whose oversized answer nobody could record: not parked for an operator',
  },
];
