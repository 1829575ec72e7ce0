import type { StepEffectRow } from '../store/tables.js';

/**
 * Ledger assertions for tests of your own workflows, framework-agnostic: each throws a plain
 * `Error` whose message lists the offending rows, and returns nothing when the ledger is right.
 */

/** What {@link assertLedger} checks besides "each key once" (always checked). */
export interface LedgerExpectation {
  /** The (step, key) pairs recorded, in any order; e.g. `{ refundCharge: ['refund:o-1'] }`. Unchecked when absent. */
  readonly recorded?: Readonly<Record<string, readonly string[]>>;
  /** How many rows may still be an open `intent` (an effect whose outcome nobody knows yet). Default 0. */
  readonly openIntents?: number;
}

/**
 * Throws unless every (step, idempotency key) pair of `rows` that is recorded or still an open
 * intent appears in one row only — across runs too: two runs that recorded the same refund key
 * performed, as far as the ledger knows, the same effect twice. Released rows (a retry may
 * perform again with the same key) do not count.
 *
 * @example
 * expectEachKeyOnce(await env.ledger());
 */
export function expectEachKeyOnce(rows: readonly StepEffectRow[]): void {
  const byKey = new Map<string, StepEffectRow[]>();
  for (const row of rows) {
    if (row.status === 'released') continue;
    const id = `${row.step_name} ${row.idempotency_key}`;
    byKey.set(id, [...(byKey.get(id) ?? []), row]);
  }
  const repeated = [...byKey.values()].filter((same) => same.length > 1);
  if (repeated.length > 0) {
    throw new Error(
      `Expected each idempotency key once in the ledger, but ${repeated.length} key(s) appear more than once:\n` +
        repeated
          .map(
            (same) =>
              `  step "${same[0]!.step_name}" key "${same[0]!.idempotency_key}": ${same.map((r) => `run ${r.workflow_id} (${r.status})`).join(', ')}`,
          )
          .join('\n'),
    );
  }
}

/**
 * Throws unless the ledger `rows` hold each key once ({@link expectEachKeyOnce}), no more open
 * intents than `openIntents` (default none), and — when `recorded` is given — exactly those
 * recorded (step, key) pairs.
 *
 * @example
 * assertLedger(await env.ledger(runId), { recorded: { refundCharge: ['refund:o-1'], markRefunded: ['refunded:re_1'] } });
 */
export function assertLedger(rows: readonly StepEffectRow[], expected: LedgerExpectation = {}): void {
  expectEachKeyOnce(rows);
  const problems: string[] = [];
  const open = rows.filter((r) => r.status === 'intent');
  const allowed = expected.openIntents ?? 0;
  if (open.length !== allowed) {
    problems.push(
      `expected ${allowed} open intent(s), found ${open.length}` +
        (open.length > 0
          ? `: ${open.map((r) => `step "${r.step_name}" key "${r.idempotency_key}" (run ${r.workflow_id})`).join(', ')}`
          : ''),
    );
  }
  if (expected.recorded !== undefined) {
    const actual = rows.filter((r) => r.status === 'recorded').map((r) => `${r.step_name}: ${r.idempotency_key}`);
    const wanted = Object.entries(expected.recorded).flatMap(([step, keys]) => keys.map((key) => `${step}: ${key}`));
    const missing = wanted.filter((w) => !actual.includes(w));
    const extra = actual.filter((a) => !wanted.includes(a));
    if (missing.length > 0) problems.push(`not recorded: ${missing.join(', ')}`);
    if (extra.length > 0) problems.push(`recorded but not expected: ${extra.join(', ')}`);
  }
  if (problems.length > 0) throw new Error(`The ledger is not as expected: ${problems.join('; ')}.`);
}
