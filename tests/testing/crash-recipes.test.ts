import { z } from 'zod';
import { event, shapeHash, workflow, type AnyWorkflow } from 'ledgerflow/dsl';
import {
  bindHandlers,
  found,
  notFound,
  unknownOutcome,
  type WorkflowHandlers,
  type WorkflowRegistration,
} from 'ledgerflow/runtime';
import { createTestEnvironment, type FaultPointName, type TestEnvironment } from 'ledgerflow/testing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';

/**
 * The crash recipe of docs/crash-recipes.md, proven for every flavour of `external` step: a
 * provider that dedupes by key (`idempotentByKey`), with or without a `reconcile` too; a provider
 * that does not dedupe, settled by `reconcile` (and a `performTimeoutMs` of its own, so the
 * horizon is not the default); and a compensation of each kind. The worker dies after the
 * provider answered and before the answer is recorded; the same recovery completes the run with
 * exactly one effect at the provider.
 */

// #region providers
/** A provider that dedupes by key, as Stripe does: a key it has seen gets the first answer again. */
class DedupingProvider {
  readonly applied = new Map<string, string>();
  calls = 0;
  constructor(private readonly prefix: string) {}
  apply(key: string): string {
    this.calls += 1;
    const id = this.applied.get(key) ?? `${this.prefix}_${this.applied.size + 1}`;
    this.applied.set(key, id);
    return id;
  }
}

/** A provider that applies every call, but can be searched by the reference (our key) sent with it. */
class LookupProvider {
  readonly applied: Array<{ reference: string; id: string }> = [];
  constructor(private readonly prefix: string) {}
  apply(reference: string): string {
    const id = `${this.prefix}_${this.applied.length + 1}`;
    this.applied.push({ reference, id });
    return id;
  }
  find(reference: string): string | undefined {
    return this.applied.find((a) => a.reference === reference)?.id;
  }
}
// #endregion providers

const input = z.object({ orderId: z.string() });
const charged = z.object({ chargeId: z.string() });
const refunded = z.object({ refundId: z.string() });
const shipped = event('recipe.shipped', z.object({ orderId: z.string() }));

// #region flavours
/** The provider dedupes: a crashed attempt's intent is taken over and the call is sent again with its key. */
const dedupedCharge = workflow('recipe-deduped', { version: 1, input }).external('charge', {
  output: charged,
  key: ({ input }) => `charge:${input.orderId}`,
  idempotentByKey: true,
});

/** The provider dedupes and can be searched too: the key still decides, `reconcile` is there for operators. */
const dedupedLookupCharge = workflow('recipe-deduped-lookup', { version: 1, input }).external('charge', {
  output: charged,
  key: ({ input }) => `charge:${input.orderId}`,
  idempotentByKey: true,
});

/** The provider does not dedupe: after the intent's horizon, `reconcile` looks the key up. */
const lookedUpCharge = workflow('recipe-looked-up', { version: 1, input }).external('charge', {
  output: charged,
  key: ({ input }) => `charge:${input.orderId}`,
  performTimeoutMs: 10 * 60_000, // a slow provider: the horizon is the lease + ten minutes
});
// #endregion flavours

/** A charge and its refund (a compensation of each flavour), with a wait between: the run is cancelled while it waits. */
function refundable<TIdempotent extends boolean>(name: string, refundIdempotentByKey: TIdempotent) {
  return workflow(name, { version: 1, input, compensateOnCancel: true })
    .external('charge', {
      output: charged,
      key: ({ input }) => `charge:${input.orderId}`,
      idempotentByKey: true,
      compensate: {
        name: 'refund',
        key: ({ steps }) => `refund:${steps.charge.chargeId}`,
        output: refunded,
        idempotentByKey: refundIdempotentByKey,
      },
    })
    .waitFor('shipped', { event: shipped, match: ({ input }) => input.orderId });
}
const refundByKey = refundable('recipe-refund-deduped', true);
const refundLookedUp = refundable('recipe-refund-looked-up', false);

let deduping: DedupingProvider;
let lookup: LookupProvider;
let dedupingRefunds: DedupingProvider;
let refunds: LookupProvider;
let lookupAnswer: 'look' | 'cannot tell' = 'look';
let answerLost = false;

function bind<W extends AnyWorkflow>(w: W, handlers: WorkflowHandlers<W>): WorkflowRegistration<W> {
  return bindHandlers(w, handlers, shapeHash(w));
}
const chargeByKey = { perform: async ({ key }: { key: string }) => ({ chargeId: deduping.apply(key) }) };

const registrations: WorkflowRegistration[] = [
  bind(dedupedCharge, { charge: chargeByKey }),
  bind(dedupedLookupCharge, {
    charge: {
      ...chargeByKey,
      reconcile: async ({ key }) => {
        const id = deduping.applied.get(key);
        return id === undefined ? notFound() : found({ chargeId: id });
      },
    },
  }),
  // #region reconcile
  bind(lookedUpCharge, {
    charge: {
      perform: async ({ key }) => {
        const chargeId = lookup.apply(key);
        if (answerLost) throw new Error('socket hang up'); // applied, but the answer never came back
        return { chargeId };
      },
      reconcile: async ({ key }) => {
        if (lookupAnswer === 'cannot tell') return unknownOutcome('the provider search is down');
        const id = lookup.find(key);
        return id === undefined ? notFound() : found({ chargeId: id });
      },
    },
  }),
  // #endregion reconcile
  bind(refundByKey, {
    charge: chargeByKey,
    refund: { perform: async ({ key }) => ({ refundId: dedupingRefunds.apply(key) }) },
  }),
  bind(refundLookedUp, {
    charge: chargeByKey,
    refund: {
      perform: async ({ key }) => ({ refundId: refunds.apply(key) }),
      reconcile: async ({ key }) => {
        const id = refunds.find(key);
        return id === undefined ? notFound() : found({ refundId: id });
      },
    },
  }),
];

/** The keys refunded, one entry per refund applied, at either desk. */
function refundsApplied(): string[] {
  return [...dedupingRefunds.applied.keys(), ...refunds.applied.map((r) => r.reference)];
}

let env: TestEnvironment;
beforeAll(async () => {
  env = await createTestEnvironment({ workflows: registrations });
}, 60_000);
afterAll(() => env?.close());
beforeEach(async () => {
  await env.reset();
  deduping = new DedupingProvider('ch');
  dedupingRefunds = new DedupingProvider('re');
  lookup = new LookupProvider('ch');
  refunds = new LookupProvider('re');
  lookupAnswer = 'look';
  answerLost = false;
});

// #region recipe
/**
 * The worker dies after the provider answered and before the answer is recorded; then a new
 * worker recovers the run. The same four lines for every kind of external step.
 */
async function crashAfterTheCallAndRecover(runId: string, point: FaultPointName = 'after-perform'): Promise<void> {
  env.crashAt(point); // the provider applied the call; the worker dies before recording it
  expect(await env.runUntilIdle()).toMatchObject({ crashedAt: point, heldByCrashedWorker: [runId] });
  await env.advancePastHorizons(); // the dead worker's lease and its intent's horizon are over
  await env.runUntilIdle(); // a new worker takes the run over and settles the intent
}
// #endregion recipe

const afterTheCall: FaultPointName[] = ['after-perform', 'before-result-commit'];

describe('the crash recipe, for each flavour of external step', () => {
  it.each(afterTheCall)(
    'idempotentByKey, crash at %s: the call is sent again with its key; the provider applies it once',
    async (point) => {
      // #region deduped
      const { runId } = await env.client.start(dedupedCharge, { orderId: 'o-1' });
      await crashAfterTheCallAndRecover(runId, point);
      expect(await env.client.getRun(runId)).toMatchObject({
        status: 'completed',
        output: { charge: { chargeId: 'ch_1' } },
      });
      expect(deduping.calls).toBe(2); // two calls, one charge: the provider deduped the second
      expect([...deduping.applied.keys()]).toEqual(['charge:o-1']);
      await env.assertLedger(runId, { recorded: { charge: ['charge:o-1'] } });
      // #endregion deduped
    },
  );

  it.each(afterTheCall)('idempotentByKey with reconcile, crash at %s: the same recovery, one charge', async (point) => {
    const { runId } = await env.client.start(dedupedLookupCharge, { orderId: 'o-2' });
    await crashAfterTheCallAndRecover(runId, point);
    expect(await env.client.getRun(runId)).toMatchObject({
      status: 'completed',
      output: { charge: { chargeId: 'ch_1' } },
    });
    expect([...deduping.applied]).toEqual([['charge:o-2', 'ch_1']]);
    await env.assertLedger(runId, { recorded: { charge: ['charge:o-2'] } });
  });

  it.each(afterTheCall)(
    'reconcile, crash at %s: the key is looked up past the horizon and the one charge recorded, never sent again',
    async (point) => {
      // #region looked-up
      const { runId } = await env.client.start(lookedUpCharge, { orderId: 'o-3' });
      await crashAfterTheCallAndRecover(runId, point);
      expect(await env.client.getRun(runId)).toMatchObject({
        status: 'completed',
        output: { charge: { chargeId: 'ch_1' } },
      });
      expect(lookup.applied).toEqual([{ reference: 'charge:o-3', id: 'ch_1' }]); // called once, found by reconcile
      await env.assertLedger(runId, { recorded: { charge: ['charge:o-3'] } });
      // #endregion looked-up
    },
  );

  it.each([refundByKey, refundLookedUp])(
    'a compensation ($name): the crashed refund is settled the same way, one refund',
    async (refundFlow) => {
      // #region compensation
      const { runId } = await env.client.start(refundFlow, { orderId: 'o-4' });
      await env.runUntilIdle(); // charged; waits for the shipment
      await env.client.cancel(runId); // the customer withdrew: the charge is refunded
      await crashAfterTheCallAndRecover(runId);
      expect(await env.client.getRun(runId)).toMatchObject({ status: 'compensated' });
      expect(refundsApplied()).toEqual(['refund:ch_1']); // one refund, whichever desk it went to
      await env.assertLedger(runId, { recorded: { charge: ['charge:o-4'], refund: ['refund:ch_1'] } });
      // #endregion compensation
    },
  );
});

describe('when the lease alone is not enough', () => {
  it('reconcile: one lease later the run only waits for its horizon, which advancePastHorizons passes', async () => {
    const { runId } = await env.client.start(lookedUpCharge, { orderId: 'o-5' });
    env.crashAt('after-perform');
    await env.runUntilIdle();
    await env.advanceTime(env.leaseMs);
    await env.runUntilIdle(); // taken over, but the call may still be in flight: rescheduled to the horizon
    expect(await env.client.getRun(runId)).toMatchObject({ status: 'pending' });
    const [intent] = await env.ledger(runId);
    expect(intent).toMatchObject({ status: 'intent' });

    const now = await env.advancePastHorizons();
    expect(now.getTime()).toBeGreaterThanOrEqual(intent!.reconcile_after!.getTime());
    await env.runUntilIdle();
    expect(await env.client.getRun(runId)).toMatchObject({ status: 'completed' });
    expect(lookup.applied).toHaveLength(1);
  });

  it('moves nothing when no lease is held and no intent is open', async () => {
    const before = await env.now();
    const after = await env.advancePastHorizons();
    expect(after.getTime() - before.getTime()).toBeLessThan(60_000);
  });

  it('reconcile cannot tell: the run parks for a person, and resolving the intent completes it', async () => {
    // #region cannot-tell
    lookupAnswer = 'cannot tell';
    const { runId } = await env.client.start(lookedUpCharge, { orderId: 'o-6' });
    await crashAfterTheCallAndRecover(runId);
    expect(await env.client.getRun(runId)).toMatchObject({ status: 'needs_reconciliation' });
    // A person looked the charge up at the provider and found it:
    await env.client.resolveEffect(
      runId,
      'charge',
      { found: { chargeId: 'ch_1' } },
      { actor: 'test', reason: 'seen at the provider' },
    );
    await env.runUntilIdle();
    expect(await env.client.getRun(runId)).toMatchObject({ status: 'completed' });
    expect(lookup.applied).toHaveLength(1);
    await env.assertLedger(runId, { recorded: { charge: ['charge:o-6'] } });
    // #endregion cannot-tell
  });

  it('a call whose answer was lost (no crash): the retry waits for the horizon, then reconcile finds the one charge', async () => {
    // #region answer-lost
    answerLost = true;
    const { runId } = await env.client.start(lookedUpCharge, { orderId: 'o-7' });
    await env.runUntilIdle();
    expect(await env.client.getRun(runId)).toMatchObject({ status: 'pending' }); // retried at the horizon
    answerLost = false;
    await env.advancePastHorizons();
    await env.runUntilIdle();
    expect(await env.client.getRun(runId)).toMatchObject({
      status: 'completed',
      output: { charge: { chargeId: 'ch_1' } },
    });
    expect(lookup.applied).toHaveLength(1);
    // #endregion answer-lost
  });
});
