import type { CompiledQuery } from 'kysely';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { RUN_STATUSES } from '../../runtime/store/tables.js';
import {
  assertAttemptTransition,
  assertEffectTransition,
  assertRunTransition,
  ATTEMPT_TRANSITIONS,
  EFFECT_TRANSITIONS,
  IllegalTransitionError,
  RUN_TRANSITIONS,
} from '../../runtime/store/state-machines.js';
import { settleOwnIntentStatement } from '../../runtime/worker/failure-commits.js';
import { StepFailure } from '../../runtime/worker/step-errors.js';
import { compileCase, compileOnly, STATEMENT_CASES, type StatementCase } from './fixtures/sql-statements.js';

// The asserts, spied on (and still asserting), so that building a statement tells which
// transitions its builder checked.
vi.mock('../../runtime/store/state-machines.js', async (importOriginal) => {
  const actual = await importOriginal<typeof import('../../runtime/store/state-machines.js')>();
  return {
    ...actual,
    assertRunTransition: vi.fn(actual.assertRunTransition),
    assertEffectTransition: vi.fn(actual.assertEffectTransition),
    assertAttemptTransition: vi.fn(actual.assertAttemptTransition),
  };
});

type Machine = 'run' | 'effect' | 'attempt';

/**
 * What each statement writes, as `machine from->to`, read off its SQL (the `WHERE status = …`
 * and the statuses it sets or inserts; see the snapshot of the same name). Same-status entries
 * are writes that keep the status (a lease extended, an intent's next lookup moved).
 */
const WRITES: Readonly<Record<string, readonly string[]>> = {
  'claim.sql': [
    'run pending->running',
    'run waiting->running',
    'run running->running',
    'attempt running->abandoned',
    'attempt none->running',
  ],
  'claim-taking-queue-slots.sql': [
    'run pending->running',
    'run waiting->running',
    'run running->running',
    'attempt running->abandoned',
    'attempt none->running',
  ],
  // Three runs' result commits in one statement: a transactional step (hold), a recorded intent
  // (released: the worker is stopping), and a last step whose completion carries the fused claim.
  'advance-group.sql': [
    'run running->running',
    'run running->pending',
    'run running->completed',
    'attempt running->succeeded',
    'attempt none->running',
    'effect none->recorded',
    'effect intent->recorded',
    'run pending->running',
    'run waiting->running',
  ],
  'claim-fused-in-completion.sql': [
    'run running->completed',
    'attempt running->succeeded',
    'run pending->running',
    'run waiting->running',
    'attempt none->running',
  ],
  'start-run-claimed.sql': ['run none->running', 'attempt none->running'],
  'start-run-deferred.sql': ['run none->running', 'attempt none->running'],
  'start-run-deferred-completed.sql': ['run none->completed', 'attempt none->succeeded'],
  'start-run-deferred-completed-carried.sql': ['run none->completed', 'attempt none->succeeded'],
  'load-leased-run.sql': [],
  'advance-hold.sql': ['run running->running', 'attempt running->succeeded', 'attempt none->running'],
  // …and the next (external) step's intent (step-commits.ts NextIntent).
  'advance-hold-next-intent.sql': [
    'run running->running',
    'attempt running->succeeded',
    'attempt none->running',
    'effect none->intent',
  ],
  'advance-release.sql': ['run running->pending', 'attempt running->succeeded'],
  // Carried plain steps (carried-prefix.ts): the first attempt closed, the others inserted finished.
  'carry-flush.sql': [
    'run running->running',
    'attempt running->succeeded',
    'attempt none->succeeded',
    'attempt none->running',
  ],
  'advance-carried-complete.sql': ['run running->completed', 'attempt running->succeeded', 'attempt none->succeeded'],
  'advance-complete.sql': ['run running->completed', 'attempt running->succeeded'],
  'advance-effect-reference.sql': ['run running->running', 'attempt running->succeeded', 'attempt none->running'],
  'advance-effect-insert-recorded.sql': [
    'run running->running',
    'attempt running->succeeded',
    'attempt none->running',
    'effect none->recorded',
  ],
  // The row this transaction inserted (openingStatement) gets its output: none -> recorded at commit.
  'advance-effect-fill-recorded.sql': [
    'run running->running',
    'attempt running->succeeded',
    'attempt none->running',
    'effect none->recorded',
  ],
  'advance-effect-record-intent.sql': [
    'run running->running',
    'attempt running->succeeded',
    'attempt none->running',
    'effect intent->recorded',
  ],
  'advance-effect-record-intent-by-reconciler.sql': ['run running->pending', 'effect intent->recorded'],
  'open-intent.sql': ['run running->running', 'effect none->intent', 'effect released->intent'],
  'open-intent-idempotent-by-key.sql': [
    'run running->running',
    'effect none->intent',
    'effect released->intent',
    'effect intent->intent',
  ],
  'retake-intent.sql': ['run running->running', 'effect intent->intent'],
  'open-transactional-effect.sql': ['effect none->recorded'],
  'open-transactional-effect-after-carry.sql': [
    'run running->running',
    'attempt running->succeeded',
    'attempt none->succeeded',
    'attempt none->running',
    'effect none->recorded',
  ],
  'read-effects.sql': [],
  'commit-yield-park.sql': ['run running->needs_reconciliation', 'attempt running->abandoned', 'effect intent->intent'],
  'commit-yield-reschedule.sql': ['run running->pending', 'attempt running->abandoned'],
  // Parked on the compensated step's open intent, or pending now when it was settled meanwhile.
  'commit-yield-await-settlement.sql': [
    'run running->needs_reconciliation',
    'run running->pending',
    'attempt running->abandoned',
  ],
  'wake-awaiting-compensation.sql': ['run needs_reconciliation->pending'],
  'failure-lock-run.sql': [],
  'failure-settle-own-intent.sql': ['effect intent->released'],
  'failure-settle-own-intent-due-now.sql': ['effect intent->intent'],
  'failure-settle-own-intent-left-open.sql': [],
  'failure-retry.sql': ['attempt running->failed', 'run running->pending'],
  'failure-retry-after-intent.sql': ['attempt running->failed', 'run running->pending'],
  'failure-finish-failed.sql': ['attempt running->failed', 'run running->failed'],
  'failure-finish-parked.sql': ['attempt running->failed', 'run running->needs_reconciliation'],
  // Compensations (core 0013): the run goes pending at its first compensation, or a compensation is over.
  'failure-finish-compensating.sql': ['attempt running->failed', 'run running->pending'],
  'failure-finish-compensation-failed.sql': ['attempt running->failed', 'run running->compensation_failed'],
  'compensate-overdue.sql': ['run running->pending', 'attempt running->abandoned'],
  'compensated-effect.sql': [],
  'advance-complete-compensated.sql': ['attempt running->succeeded', 'run running->compensated'],
  'cancel-run-compensating.sql': [
    'run pending->pending',
    'run running->pending',
    'run waiting->pending',
    'run needs_reconciliation->pending',
    'attempt running->abandoned',
  ],
  'failure-finish-released.sql': ['attempt running->failed', 'effect intent->released', 'run running->failed'],
  'crash-retry.sql': ['run running->pending'],
  'crash-finish-failed.sql': ['run running->failed'],
  'attempt-commit-state.sql': [],
  'renew-leases.sql': ['run running->running'],
  'release-leases.sql': ['run running->pending', 'attempt running->abandoned'],
  'claim-due-intents.sql': ['effect intent->intent'],
  'defer-intent.sql': ['effect intent->intent'],
  'settle-finished-run-intent-found.sql': ['effect intent->recorded'],
  'settle-finished-run-intent-not-found.sql': ['effect intent->released'],
  'claim-for-reconcile.sql': [
    'run pending->running',
    'run needs_reconciliation->running',
    'run running->running',
    'attempt running->abandoned',
  ],
  'release-intent-retry.sql': ['run running->pending', 'effect intent->released'],
  'release-intent-fail.sql': [
    'run running->failed',
    'run running->pending',
    'run running->compensation_failed',
    'effect intent->released',
  ],
  'park-run.sql': ['run running->needs_reconciliation'],
  'return-run.sql': ['run running->needs_reconciliation'],
  // The run_settled trigger then closes the run's running attempt and cancels its children (core 0003).
  'cancel-run.sql': [
    'run pending->cancelled',
    'run running->cancelled',
    'run waiting->cancelled',
    'run needs_reconciliation->cancelled',
  ],
  'open-wait-sleep.sql': [],
  'open-wait-event.sql': [],
  'lock-event-key.sql': [],
  'take-event.sql': [],
  'resolve-wait.sql': [],
  'suspend-run-event.sql': ['run running->waiting', 'attempt running->suspended'],
  'suspend-run-children.sql': ['run running->waiting', 'attempt running->suspended'],
  // The parent's lease is extended; the children are inserted pending (the column default).
  'start-children.sql': ['run running->running'],
  'cancel-overdue.sql': ['run running->cancelled'],
  // A waiting run is woken: it stays waiting, due now.
  'send-event.sql': ['run waiting->waiting'],
  'register-queue.sql': [],
  // ledgerflow.queue_acquire → queue_grant wakes granted waiters (waiting -> waiting, due now) in SQL
  // that the statement only calls; the core 0004 functions are covered by queues.test.ts.
  'acquire-slot.sql': [],
  'debounce-find-window.sql': [],
  // A debounced start joins the window (keep 'last') or closes one that is over: the run stays pending.
  'debounce-replace-in-window.sql': ['run pending->pending'],
  'debounce-close-window.sql': ['run pending->pending'],
  // An operator's retry (client/operator.ts); the audit row is written by the same transaction.
  'retry-run.sql': ['run failed->pending', 'run cancelled->pending', 'run compensation_failed->pending'],
  'operator-audit.sql': [],
  // A start inserts its run pending (the column default); prune only archives and deletes finished runs.
  'start-run-guarded.sql': [],
  'start-run-debounced.sql': [],
  // A waiter's mark (core 0011) keeps the status; the settle's trigger only NOTIFYs.
  'start-run-watched.sql': [],
  'watch-run.sql': [],
  'prune-batch.sql': [],
  'prune-archive-batch.sql': [],
  'prune-dry-run-page.sql': [],
  // Events and their tombstones have no status: pruning deletes and archives them (core 0016).
  'prune-events-consumed-batch.sql': [],
  'prune-events-unconsumed-batch.sql': [],
  'prune-event-archive-batch.sql': [],
  'telemetry-database-gauges.sql': [],
};

/** Variants that differ from a snapshot case in parameters only: how a failure's phase settles the attempt's own intent. */
const charge = {
  name: 'charge',
  kind: 'external',
  position: 2,
  output: z.any(),
  retry: { maxAttempts: 3, initialDelayMs: 1_000, maxDelayMs: 60_000, backoffFactor: 2, jitter: 0, nonRetryable: [] },
  idempotentByKey: false,
  performTimeoutMs: 30_000,
  timeoutMs: 30_000,
} as const;
const lease = { runId: '00000000-0000-4000-8000-000000000001', fencingToken: 7, workerId: 'worker-a', leaseMs: 30_000 };
const VARIANTS: readonly StatementCase[] = [
  {
    file: 'failure-settle-own-intent-due-now.sql',
    title: 'perform returned, then the attempt failed: its intent is due for reconciliation at once',
    build: () =>
      settleOwnIntentStatement(lease, charge, 2, new StepFailure(new Error('invalid output'), 'after-perform')),
  },
  {
    file: 'failure-settle-own-intent-left-open.sql',
    title: 'perform threw (outcome unknown): its intent is left open until its horizon',
    build: () => settleOwnIntentStatement(lease, charge, 2, new StepFailure(new Error('ECONNRESET'), 'perform')),
  },
];
const CASES = [...STATEMENT_CASES, ...VARIANTS];

const TABLE_MACHINE: Readonly<Record<string, Machine>> = {
  workflow_run: 'run',
  step_effect: 'effect',
  step_attempt: 'attempt',
};
const STATUSES: Readonly<Record<Machine, readonly string[]>> = {
  run: RUN_STATUSES,
  effect: Object.keys(EFFECT_TRANSITIONS).filter((s) => s !== 'none'),
  attempt: Object.keys(ATTEMPT_TRANSITIONS).filter((s) => s !== 'none'),
};

/**
 * The statuses a compiled statement writes, as `machine status`: each `UPDATE … SET status = …`
 * (a literal, a parameter, or the THEN branches of a `CASE WHEN $n::boolean` whose parameter is
 * true) and each status literal an `INSERT` writes — skipping an UPDATE that its parameters
 * switch off (`AND $n::boolean`, or `AND ($a::boolean OR $b::boolean)`, all false; or a
 * `column = $n` whose parameter is NULL).
 */
function writtenStatuses(compiled: CompiledQuery): Set<string> {
  const text = compiled.sql;
  const param = (n: string): unknown => compiled.parameters[Number(n) - 1];
  const writes = [...text.matchAll(/\b(UPDATE|INSERT\s+INTO)\s+"?ledgerflow"?\."?(\w+)"?/gi)];
  const written = new Set<string>();
  writes.forEach((write, i) => {
    const machine = TABLE_MACHINE[write[2]!];
    if (machine === undefined) return;
    const segment = text.slice(write.index, writes[i + 1]?.index ?? text.length);
    const body = segment.split(/\bRETURNING\b|\bON CONFLICT\b/i)[0]!;
    if (/^INSERT/i.test(write[1]!)) {
      for (const [, literal] of body.matchAll(/'(\w+)'/g))
        if (STATUSES[machine].includes(literal!)) written.add(`${machine} ${literal}`);
      return;
    }
    const set = /\bSET\b([\s\S]*?)(\bWHERE\b|\bFROM\b|$)/i.exec(body);
    if (set === null) return;
    const where = body.slice(set.index + set[0].length);
    const guard = /AND\s+\$(\d+)::boolean(?!\s*(?:OR\b|THEN\b|\)))/i.exec(where);
    if (guard !== null && param(guard[1]!) !== true) return;
    const either = /AND\s+\(\s*\$(\d+)::boolean\s+OR\s+\$(\d+)::boolean\s*\)/i.exec(where);
    if (either !== null && param(either[1]!) !== true && param(either[2]!) !== true) return;
    // `column = NULL` matches no row (the crash limit's failure commit has no attempt to close).
    if ([...where.matchAll(/=\s*\$(\d+)\b/g)].some((m) => param(m[1]!) === null)) return;
    const status = /(?:^|[\s,])"?status"?\s*=\s*(CASE\b[\s\S]*?\bEND|'\w+'|\$\d+)/i.exec(set[1]!);
    if (status === null) return;
    const expr = status[1]!;
    const targets = expr.startsWith("'")
      ? [expr.slice(1, -1)]
      : expr.startsWith('$')
        ? [String(param(expr.slice(1)))]
        : /^CASE\s+\w+\.\w+\s+WHEN\b/i.test(expr)
          ? // A status per row of the statement's input (a group commit): every branch may be written.
            [...expr.matchAll(/WHEN\s+'\w+'\s+THEN\s+'(\w+)'/gi)].map((m) => m[1]!)
          : /^CASE\s+WHEN\s+(?!\$)/i.test(expr)
            ? // Decided by the database from what it reads (e.g. the version's compensations): every branch may be written.
              [...expr.matchAll(/(?:THEN|ELSE)\s+'(\w+)'/gi)].map((m) => m[1]!)
            : [...expr.matchAll(/WHEN\s+\$(\d+)::boolean\s+THEN\s+'(\w+)'/gi)]
                .filter((m) => param(m[1]!) === true)
                .map((m) => m[2]!);
    for (const target of targets) written.add(`${machine} ${target}`);
  });
  return written;
}

/** The transitions the asserts were asked about while the statement was built. */
function assertedWhileBuilding(c: StatementCase): { readonly asserted: string[]; readonly compiled: CompiledQuery } {
  vi.clearAllMocks();
  const compiled = compileCase(c, compileOnly());
  const calls = (machine: Machine, fn: (from: never, to: never) => void): string[] =>
    vi.mocked(fn).mock.calls.map(([from, to]) => `${machine} ${from}->${to}`);
  const asserted = [
    ...calls('run', assertRunTransition),
    ...calls('effect', assertEffectTransition),
    ...calls('attempt', assertAttemptTransition),
  ];
  return { asserted: [...new Set(asserted)].sort(), compiled };
}

const allTransitions = (): string[] =>
  [
    ...Object.entries(RUN_TRANSITIONS).flatMap(([from, tos]) => tos.map((to) => `run ${from}->${to}`)),
    ...Object.entries(EFFECT_TRANSITIONS).flatMap(([from, tos]) => tos.map((to) => `effect ${from}->${to}`)),
    ...Object.entries(ATTEMPT_TRANSITIONS).flatMap(([from, tos]) => tos.map((to) => `attempt ${from}->${to}`)),
  ].sort();

describe('state machines: every statement checks the transitions it makes', () => {
  beforeEach(() => vi.clearAllMocks());

  it('lists what every statement writes', () => {
    expect(CASES.map((c) => c.file).sort()).toEqual(Object.keys(WRITES).sort());
  });

  for (const c of CASES) {
    it(`${c.file}: asserts exactly the transitions it writes, and its SQL writes no status it did not assert`, () => {
      const { asserted, compiled } = assertedWhileBuilding(c);
      expect(asserted).toEqual([...WRITES[c.file]!].sort());
      const written = writtenStatuses(compiled);
      // Each status the SQL sets or inserts is the target of an asserted transition of its machine …
      for (const w of written) {
        const [machine, to] = w.split(' ') as [Machine, string];
        expect(
          asserted.filter((a) => a.startsWith(`${machine} `) && a.endsWith(`->${to}`)),
          `${c.file} writes ${w}`,
        ).not.toEqual([]);
      }
      // … and each asserted status change is one the SQL makes.
      for (const a of asserted) {
        const [machine, change] = a.split(' ') as [Machine, string];
        const [from, to] = change.split('->');
        if (from !== to)
          expect(written.has(`${machine} ${to}`), `${c.file} asserts ${a} but writes no ${machine} ${to}`).toBe(true);
      }
    });
  }

  it('uses every transition of the tables, and no other', () => {
    const used = [...new Set(Object.values(WRITES).flat())].sort();
    expect(used).toEqual(allTransitions());
  });
});

describe('state machine tables', () => {
  it("are the runtime's, the reconciler's and the client's transitions", () => {
    expect(allTransitions()).toEqual(
      [
        'run none->running',
        'run none->completed',
        'run pending->running',
        'run pending->pending',
        'run pending->cancelled',
        'run running->compensated',
        'run running->compensation_failed',
        'run waiting->pending',
        'run needs_reconciliation->pending',
        'run running->running',
        'run running->pending',
        'run running->completed',
        'run running->failed',
        'run running->needs_reconciliation',
        'run running->cancelled',
        'run running->waiting',
        'run waiting->running',
        'run waiting->waiting',
        'run waiting->cancelled',
        'run needs_reconciliation->running',
        'run needs_reconciliation->cancelled',
        'run failed->pending',
        'run cancelled->pending',
        'run compensation_failed->pending',
        'effect none->intent',
        'effect none->recorded',
        'effect intent->recorded',
        'effect intent->intent',
        'effect intent->released',
        'effect released->intent',
        'attempt none->running',
        'attempt none->succeeded',
        'attempt running->succeeded',
        'attempt running->failed',
        'attempt running->abandoned',
        'attempt running->suspended',
      ].sort(),
    );
  });

  const finals: ReadonlyArray<readonly [string, () => void]> = [
    ...(['completed', 'failed', 'cancelled', 'compensated', 'compensation_failed'] as const).flatMap((from) =>
      RUN_STATUSES.filter((to) => from === 'completed' || from === 'compensated' || to !== 'pending').map(
        (to) => [`run ${from}->${to}`, () => assertRunTransition(from, to)] as const,
      ),
    ),
    ...(['intent', 'recorded', 'released'] as const).map(
      (to) => [`effect recorded->${to}`, () => assertEffectTransition('recorded', to)] as const,
    ),
    ...(['succeeded', 'failed', 'abandoned'] as const).flatMap((from) =>
      (['running', 'succeeded', 'failed', 'abandoned'] as const).map(
        (to) => [`attempt ${from}->${to}`, () => assertAttemptTransition(from, to)] as const,
      ),
    ),
    ['run cancelled->running (a cancelled run is never claimed)', () => assertRunTransition('cancelled', 'running')],
    ['run pending->completed (only a running run completes)', () => assertRunTransition('pending', 'completed')],
    [
      'run needs_reconciliation->running except by a claim: compensated->pending (final)',
      () => assertRunTransition('compensated', 'pending'),
    ],
    ['effect none->released', () => assertEffectTransition('none', 'released')],
    [
      'effect released->recorded (a released key is re-taken as an intent first)',
      () => assertEffectTransition('released', 'recorded'),
    ],
  ];
  it.each(finals)('refuses %s', (_, attempt) => {
    expect(attempt).toThrow(IllegalTransitionError);
  });

  it('lets an operator retry a failed, cancelled or compensation_failed run (back to pending), never a completed or compensated one', () => {
    const final = ['failed', 'cancelled', 'completed', 'compensated', 'compensation_failed'];
    const retryable = RUN_STATUSES.filter((s) => final.includes(s) && RUN_TRANSITIONS[s].length > 0);
    expect(retryable).toEqual(['failed', 'cancelled', 'compensation_failed']);
    for (const from of retryable) expect(RUN_TRANSITIONS[from]).toEqual(['pending']);
  });

  it('lets the client cancel any run that is not final', () => {
    const cancellable = RUN_STATUSES.filter((s) => RUN_TRANSITIONS[s].includes('cancelled'));
    expect(cancellable).toEqual(['pending', 'running', 'waiting', 'needs_reconciliation']);
    for (const from of cancellable) expect(() => assertRunTransition(from, 'cancelled')).not.toThrow();
  });
});
