import type { StepEffectRow } from 'ledgerflow/runtime';
import { assertLedger, expectEachKeyOnce } from 'ledgerflow/testing';
import { describe, expect, it } from 'vitest';

/** The ledger assertions are pure functions over rows: checked here without a database. */
function row(runId: string, step: string, key: string, status: StepEffectRow['status']): StepEffectRow {
  const at = new Date('2026-01-01T00:00:00Z');
  return {
    workflow_id: runId,
    step_name: step,
    idempotency_key: key,
    effect: null,
    created_at: at,
    status,
    kind: 'external',
    request_hash: 'h',
    attempt: 1,
    fencing_token: 1,
    intent_at: at,
    recorded_at: status === 'recorded' ? at : null,
    resolution: null,
    reconcile_after: status === 'intent' ? at : null,
    reconcile_attempts: 0,
  };
}

describe('expectEachKeyOnce', () => {
  it('passes when each (step, key) appears once, released rows aside', () => {
    expect(() =>
      expectEachKeyOnce([
        row('r1', 'charge', 'k1', 'recorded'),
        row('r2', 'charge', 'k2', 'recorded'),
        row('r3', 'charge', 'k1', 'released'),
      ]),
    ).not.toThrow();
  });

  it('names the key and the runs that recorded it twice', () => {
    expect(() =>
      expectEachKeyOnce([row('r1', 'charge', 'k1', 'recorded'), row('r2', 'charge', 'k1', 'intent')]),
    ).toThrow(
      'Expected each idempotency key once in the ledger, but 1 key(s) appear more than once:\n' +
        '  step "charge" key "k1": run r1 (recorded), run r2 (intent)',
    );
  });
});

describe('assertLedger', () => {
  const done = [row('r1', 'charge', 'charge:o-1', 'recorded'), row('r1', 'note', 'note:ch_1', 'recorded')];

  it('passes for exactly the recorded effects and no open intent', () => {
    expect(() => assertLedger(done, { recorded: { charge: ['charge:o-1'], note: ['note:ch_1'] } })).not.toThrow();
    expect(() => assertLedger(done)).not.toThrow();
  });

  it('reports open intents, missing and unexpected effects in one message', () => {
    const rows = [row('r1', 'charge', 'charge:o-1', 'intent'), row('r1', 'note', 'note:ch_9', 'recorded')];
    expect(() => assertLedger(rows, { recorded: { charge: ['charge:o-1'] } })).toThrow(
      'The ledger is not as expected: expected 0 open intent(s), found 1: step "charge" key "charge:o-1" (run r1); ' +
        'not recorded: charge: charge:o-1; recorded but not expected: note: note:ch_9.',
    );
  });

  it('accepts the open intents a test expects', () => {
    expect(() => assertLedger([row('r1', 'charge', 'k', 'intent')], { openIntents: 1 })).not.toThrow();
  });
});
