import type { Kysely, RawBuilder } from 'kysely';
import { describe, expect, it } from 'vitest';
import { DeferredStart } from '../../runtime/client/deferred-start.js';
import type { LeasedRunRow } from '../../runtime/store/leased-run.js';
import type { LedgerflowDatabase } from '../../runtime/store/tables.js';

/**
 * The `PendingStart` state machine (client/deferred-start.ts) on its own: one insert at a time,
 * a transaction's end deciding, a flight's end giving the run back only once no insert is on its
 * way. The statements are stand-ins that record where they were sent; the database paths are in
 * deferred-start.test.ts.
 */
function harness() {
  const sent: string[] = [];
  const gates: Array<{ where: string; release: (ok: boolean, rows?: readonly unknown[]) => void }> = [];
  const db = { name: 'db' } as unknown as Kysely<LedgerflowDatabase>;
  const trx = { name: 'trx' } as unknown as Kysely<LedgerflowDatabase>;
  let unclaimed = 0;
  const start = new DeferredStart(
    (msAgo, completion) =>
      ({
        execute: (on: { name: string }) => {
          sent.push(
            `${on.name} ${msAgo >= 0 ? 'back-dated' : 'ahead?'}${completion ? ` completed by ${completion.stepName}` : ''}`,
          );
          return new Promise((resolve, reject) =>
            gates.push({
              where: on.name,
              release: (ok, rows = []) => (ok ? resolve({ rows }) : reject(new Error('lost'))),
            }),
          );
        },
      }) as unknown as RawBuilder<LeasedRunRow>,
    async () => {
      unclaimed += 1;
    },
  );
  return { start, db, trx, sent, gates, unclaimed: () => unclaimed };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('a deferred start', () => {
  it('inserted alone: one statement however many ask at once; inserted for good once it committed', async () => {
    const h = harness();
    const a = h.start.insertAlone(h.db);
    const b = h.start.insertAlone(h.db);
    await tick();
    expect(h.sent).toEqual(['db back-dated']);
    h.gates[0]!.release(true);
    await Promise.all([a, b]);
    expect(h.start.inserted).toBe(true);
    expect(await h.start.takeForTransaction()).toBe(false);
    expect(h.sent).toHaveLength(1);
    expect(await h.start.outcome).toBe('inserted');
  });

  it('taken for a transaction: pending again when it rolls back, inserted when it commits; an insert alone meanwhile waits for its end', async () => {
    const h = harness();
    expect(await h.start.takeForTransaction()).toBe(true);
    // Taken before the transaction has a connection: an insert alone waits, holding none.
    expect(h.start.inTransaction).toBe(true);
    const within = (await h.start.insertWithin()).execute(h.trx);
    await tick();
    h.gates[0]!.release(true);
    await within;
    const alone = h.start.insertAlone(h.db);
    await tick();
    expect(h.sent).toEqual(['trx back-dated']);
    h.start.transactionEnded(false);
    await tick();
    expect(h.sent).toEqual(['trx back-dated', 'db back-dated']);
    h.gates[1]!.release(true);
    await alone;
    expect(h.start.inserted).toBe(true);
    h.start.transactionEnded(true); // a late answer changes nothing
    expect(h.start.inserted).toBe(true);
  });

  it('an insert alone that fails leaves it pending (it may be tried again); a flight that ends then gives the run back', async () => {
    const h = harness();
    const alone = h.start.insertAlone(h.db);
    await tick();
    h.gates[0]!.release(false);
    await expect(alone).rejects.toThrow('lost');
    expect(h.start.inserted).toBe(false);
    h.start.flightEnded();
    expect(await h.start.outcome).toBe('given-up');
    await h.start.insertUnclaimed();
    expect(h.unclaimed()).toBe(1);
    // Given up: a renewal that raced the flight's end inserts nothing.
    await h.start.insertAlone(h.db);
    expect(h.sent).toHaveLength(1);
  });

  it('a transaction that takes it while an insert alone is on its way waits, then finds it inserted', async () => {
    const h = harness();
    const keeper = h.start.insertAlone(h.db);
    await tick();
    const taking = h.start.takeForTransaction();
    h.gates[0]!.release(true);
    await keeper;
    expect(await taking).toBe(false);
    expect(h.sent).toEqual(['db back-dated']);
  });

  it('inserted completed: one statement; inserted once it wrote the run, pending when it found the row or failed; an insert alone meanwhile waits', async () => {
    const completion = {
      stepName: 'total',
      stepKind: 'step',
      attempt: 1,
      output: '{}',
      runOutput: '{}',
      toPosition: 2,
    };
    const h = harness();
    const completing = h.start.insertCompleted(h.db, completion);
    await tick();
    expect(h.start.inTransaction).toBe(true);
    const alone = h.start.insertAlone(h.db);
    await tick();
    expect(h.sent).toEqual(['db back-dated completed by total']);
    h.gates[0]!.release(true, [{ id: 'run' }]);
    expect(await completing).toBe('completed');
    await alone;
    expect(h.sent).toHaveLength(1);
    expect(h.start.inserted).toBe(true);
    expect(await h.start.outcome).toBe('inserted');

    // The row was there (an earlier insert whose outcome was unknown): nothing written, still pending.
    const found = harness();
    const finding = found.start.insertCompleted(found.db, completion);
    await tick();
    found.gates[0]!.release(true, []);
    expect(await finding).toBe('not-written');
    expect(found.start.inserted).toBe(false);

    // It failed: pending, and the error goes to the caller.
    const failing = harness();
    const failed = failing.start.insertCompleted(failing.db, completion);
    await tick();
    failing.gates[0]!.release(false);
    await expect(failed).rejects.toThrow('lost');
    expect(failing.start.inserted).toBe(false);
    expect(failing.start.inTransaction).toBe(false);
  });

  it('a completion that finds the run inserted by the lease keeper meanwhile sends nothing: the caller commits as usual', async () => {
    const h = harness();
    const keeper = h.start.insertAlone(h.db);
    await tick();
    const completing = h.start.insertCompleted(h.db, {
      stepName: 'load',
      stepKind: 'step',
      attempt: 1,
      output: '{}',
      runOutput: '{}',
      toPosition: 1,
    });
    h.gates[0]!.release(true);
    await keeper;
    expect(await completing).toBe('inserted-before');
    expect(h.sent).toEqual(['db back-dated']);
  });

  it('a flight that ends while the lease keeper’s insert is on its way waits for its answer', async () => {
    const h = harness();
    const keeper = h.start.insertAlone(h.db);
    await tick();
    h.start.flightEnded();
    let settled: string | undefined;
    void h.start.outcome.then((o) => (settled = o));
    await tick();
    expect(settled).toBeUndefined();
    h.gates[0]!.release(true);
    await keeper;
    await tick();
    expect(settled).toBe('inserted');
  });
});
