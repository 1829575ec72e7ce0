import { sql } from 'kysely';
import { z } from 'zod';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { event, workflow } from 'ledgerflow/dsl';
import {
  bindHandlers,
  createClient,
  createWorker,
  found,
  NonRetryableError,
  NotAppliedError,
  notFound,
  unknownOutcome,
  type Worker,
  type WorkerOptions,
} from 'ledgerflow/runtime';
import { runReconcilePass } from 'ledgerflow/operator';
import { shapeHash } from '../../dsl/workflow-shape.js';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { runState, startTestRun, waitUntil } from './fixtures/run-helpers.js';
import { doubler, waitHandlers } from './fixtures/wait-workflows.js';

/*
 * Compensations (issue 17): a run that fails for good, passes its deadline or is cancelled with
 * `compensate` undoes the effects that are recorded — in reverse order, each exactly once — and
 * ends `compensated` (or `compensation_failed`). Counters are a fake provider's, which dedupes
 * by key like Stripe, and the ledger's rows.
 */

class Provider {
  /** Every request that reached the provider, in order (repeats of a key included). */
  readonly requests: string[] = [];
  readonly applied = new Map<string, string>();
  /** Keys whose next request is applied and then answered with an error (an unknown outcome). */
  readonly lose = new Set<string>();
  /** Keys whose requests fail before anything is applied, with an error that does not say so (an unknown outcome). */
  readonly refuse = new Set<string>();
  /** Keys whose next request fails like `refuse`, once. */
  readonly refuseOnce = new Set<string>();
  /** Keys the provider declines, saying nothing was applied (`NotAppliedError`). */
  readonly decline = new Set<string>();

  async call(key: string): Promise<{ id: string }> {
    this.requests.push(key);
    if (this.refuseOnce.delete(key) || this.refuse.has(key)) throw new Error(`provider refused ${key}`);
    if (this.decline.has(key)) throw new NotAppliedError(`provider declined ${key}`);
    const id = this.applied.get(key) ?? `fx_${this.applied.size + 1}`;
    this.applied.set(key, id);
    if (this.lose.delete(key)) throw new Error(`provider answered 502 after applying ${key}`);
    return { id };
  }

  count(prefix: string): number {
    return [...this.applied.keys()].filter((k) => k.startsWith(prefix)).length;
  }
}

const Input = z.object({ orderId: z.string() });
const Id = z.object({ id: z.string() });

/** Four effects, three of them compensated; `ship` gives up after one attempt. */
const fourEffects = workflow('comp-four', { version: 1, input: Input })
  .transactional('reserve', {
    output: z.object({ reserved: z.string() }),
    key: ({ input }) => `reserve:${input.orderId}`,
    compensate: {
      name: 'unreserve',
      key: ({ input }) => `unreserve:${input.orderId}`,
      output: z.object({ released: z.string() }),
    },
  })
  .external('charge', {
    output: Id,
    key: ({ input }) => `charge:${input.orderId}`,
    retry: { maxAttempts: 1 },
    compensate: {
      name: 'refund',
      key: ({ steps }) => `refund:${steps.charge.id}`,
      output: Id,
      idempotentByKey: true,
      retry: { maxAttempts: 2, initialDelayMs: 10 },
    },
  })
  .external('ship', {
    output: Id,
    key: ({ input }) => `ship:${input.orderId}`,
    idempotentByKey: true,
    retry: { maxAttempts: 1 },
    compensate: { name: 'unship', key: ({ input }) => `unship:${input.orderId}`, output: Id, idempotentByKey: true },
  })
  .external('email', { output: Id, key: ({ input }) => `email:${input.orderId}`, idempotentByKey: true });

const go = event('comp-go', z.object({}));

/** Reserves, then starts a child that fails: the run compensates with its failed child left behind. */
const withFailingChild = workflow('comp-child', { version: 1, input: Input })
  .transactional('reserve', {
    output: z.object({ reserved: z.string() }),
    key: ({ input }) => `reserve:${input.orderId}`,
    compensate: {
      name: 'unreserve',
      key: ({ input }) => `unreserve:${input.orderId}`,
      output: z.object({ released: z.string() }),
      retry: { maxAttempts: 1 },
    },
  })
  .child('doubled', doubler, {
    key: ({ input }) => `comp-child:${input.orderId}`,
    input: () => ({ n: 1, fail: true }),
    retry: { maxAttempts: 1 },
  });
/** Whether comp-child's `unreserve` refuses (a compensation that fails for good). */
let unreserveRefused = false;

/** Charges, then waits for a signal: a run to cancel after its effect is recorded. */
const chargeThenWait = (compensateOnCancel: boolean, version: number) =>
  workflow('comp-wait', { version, input: Input, compensateOnCancel })
    .external('charge', {
      output: Id,
      key: ({ input }) => `charge:${input.orderId}`,
      idempotentByKey: true,
      compensate: { name: 'refund', key: ({ input }) => `refund:${input.orderId}`, output: Id, idempotentByKey: true },
    })
    .waitFor('go', { event: go })
    .external('ship', { output: Id, key: ({ input }) => `ship:${input.orderId}`, idempotentByKey: true });
const waitV1 = chargeThenWait(false, 1);
const waitV2 = chargeThenWait(true, 2);

/** A charge whose refund can be left with an unknown outcome that reconcile cannot settle: parked at the compensation. */
const parkedRefund = workflow('comp-parked-refund', { version: 1, input: Input })
  .external('charge', {
    output: Id,
    key: ({ input }) => `charge:${input.orderId}`,
    idempotentByKey: true,
    compensate: {
      name: 'refund',
      key: ({ input }) => `refund:${input.orderId}`,
      output: Id,
      retry: { maxAttempts: 1 },
    },
  })
  .step('confirm', { output: z.object({}), retry: { maxAttempts: 1 } });

const log: string[] = [];
let provider = new Provider();
const perform = (prefix: string) => ({
  perform: ({ key }: { key: string }) => (log.push(`${prefix}`), provider.call(key)),
});
/** Keys the provider's lookup cannot tell about (`unknownOutcome`). */
let mute = new Set<string>();
const lookup = async ({ key }: { key: string }) => {
  if (mute.has(key)) return unknownOutcome(`the provider cannot tell about ${key}`);
  const id = provider.applied.get(key);
  return id === undefined ? notFound() : found({ id });
};

const fourHandlers = () =>
  bindHandlers(
    fourEffects,
    {
      reserve: async (ctx) => (log.push('reserve'), ctx.record({ reserved: ctx.input.orderId })),
      unreserve: async (ctx) => (log.push('unreserve'), ctx.record({ released: ctx.steps.reserve.reserved })),
      charge: { ...perform('charge'), reconcile: lookup },
      refund: perform('refund'),
      ship: perform('ship'),
      unship: perform('unship'),
      email: perform('email'),
    },
    shapeHash(fourEffects),
  );
const childHandlers = () => [
  bindHandlers(
    withFailingChild,
    {
      reserve: async (ctx) => ctx.record({ reserved: ctx.input.orderId }),
      unreserve: async (ctx) => {
        if (unreserveRefused) throw new NonRetryableError('the stock service refuses');
        log.push('unreserve');
        return ctx.record({ released: ctx.steps.reserve.reserved });
      },
    },
    shapeHash(withFailingChild),
  ),
  ...waitHandlers().filter((r) => r.workflow === doubler),
];
const chargeWaitHandlers = (w: typeof waitV1) =>
  bindHandlers(w, { charge: perform('charge'), refund: perform('refund'), ship: perform('ship') }, shapeHash(w));

const parkedRefundHandlers = () =>
  bindHandlers(
    parkedRefund,
    {
      charge: perform('charge'),
      refund: { ...perform('refund'), reconcile: async () => unknownOutcome('the refund desk cannot tell') },
      confirm: () => {
        throw new NonRetryableError('the order cannot be confirmed');
      },
    },
    shapeHash(parkedRefund),
  );

const FAST: Partial<WorkerOptions> = { pollIntervalMs: 20, leaseMs: 5_000, reconcileIntervalMs: 0 };
const LATER = (): Date => new Date(Date.now() + 3_600_000);

describeStores('compensations', (getStore) => {
  const workers: Worker[] = [];
  const drain = async (timeoutMs?: number): Promise<void> => {
    const w = createWorker({
      store: getStore(),
      ...FAST,
      workflows: [
        fourHandlers(),
        chargeWaitHandlers(waitV1),
        chargeWaitHandlers(waitV2),
        parkedRefundHandlers(),
        ...childHandlers(),
      ],
    });
    workers.push(w);
    await w.drain(timeoutMs === undefined ? {} : { timeoutMs });
  };
  const client = () => createClient({ store: getStore() });
  const results = async (runId: string) =>
    (await runState(getStore(), runId)).results.map((r) => `${r.step_name}${r.skipped ? ' (skipped)' : ''}`);

  beforeAll(() =>
    migrateForTest(getStore(), [fourEffects, waitV1, waitV2, withFailingChild, doubler, parkedRefund]).then(
      () => undefined,
    ),
  );
  afterEach(async () => {
    log.length = 0;
    provider = new Provider();
    mute = new Set();
    await Promise.all(workers.splice(0).map((w) => w.stop({ timeoutMs: 200 })));
  });

  it('a failure after 2 of 4 effects compensates exactly those 2, in reverse order, and keeps the error', async () => {
    provider.decline.add('ship:o-1');
    const runId = await startTestRun(getStore(), fourEffects, { orderId: 'o-1' });
    await drain();

    const { run, effects } = await runState(getStore(), runId);
    expect(run.status).toBe('compensated');
    expect(run.compensation).toBe('failure');
    expect(run.finished_at).not.toBeNull();
    expect(run.error).toMatchObject({ step: 'ship', message: 'provider declined ship:o-1' });
    expect(log).toEqual(['reserve', 'charge', 'ship', 'refund', 'unreserve']);
    expect(provider.count('charge:')).toBe(1);
    expect(provider.requests.filter((k) => k.startsWith('refund:'))).toEqual([
      `refund:${provider.applied.get('charge:o-1')}`,
    ]);
    expect(provider.count('unship:')).toBe(0);
    expect(await results(runId)).toEqual(['reserve', 'charge', 'unship (skipped)', 'refund', 'unreserve']);
    expect(
      effects
        .filter((e) => e.status === 'recorded')
        .map((e) => e.step_name)
        .sort(),
    ).toEqual(['charge', 'refund', 'reserve', 'unreserve']);
  });

  it('waitForRun returns a run once it is compensated, not while it compensates', async () => {
    provider.decline.add('ship:o-6');
    const runId = await startTestRun(getStore(), fourEffects, { orderId: 'o-6' });
    const waited = client().waitForRun(runId, { timeoutMs: 20_000 });
    await drain();
    expect(await waited).toMatchObject({ id: runId, status: 'compensated' });
    expect((await client().getRun(runId)).compensation).toBe('failure');
  });

  it('a compensation that fails for good ends the run compensation_failed, parked for an operator, before the next one', async () => {
    provider.decline.add('ship:o-2');
    const runId = await startTestRun(getStore(), fourEffects, { orderId: 'o-2' });
    // The charge is the provider's first effect (fx_1): refuse its refund.
    provider.refuse.add('refund:fx_1');
    await drain();

    const { run, attempts } = await runState(getStore(), runId);
    expect(run.status).toBe('compensation_failed');
    expect(run.finished_at).not.toBeNull();
    expect(run.error).toMatchObject({ step: 'refund', message: 'provider refused refund:fx_1' });
    expect(attempts.filter((a) => a.step_name === 'refund').map((a) => a.status)).toEqual(['failed', 'failed']);
    expect(log).toEqual(['reserve', 'charge', 'ship', 'refund', 'refund']);
    expect(await client().listRuns({ status: 'compensation_failed' })).toEqual([
      expect.objectContaining({ id: runId }),
    ]);
  });

  it('an operator retry of a compensation_failed run resumes at the failed compensation, then the rest, audited', async () => {
    provider.decline.add('ship:o-5');
    const runId = await startTestRun(getStore(), fourEffects, { orderId: 'o-5' });
    provider.refuse.add('refund:fx_1');
    await drain();
    expect((await runState(getStore(), runId)).run.status).toBe('compensation_failed');

    // No worker left that could take the retried run before it is looked at.
    await Promise.all(workers.splice(0).map((w) => w.stop()));
    provider.refuse.delete('refund:fx_1');
    const note = { actor: 'ops', reason: 'refund desk back up' };
    expect(await client().retryRun(runId, note)).toEqual({
      runId,
      fromStep: 'refund',
      previousStatus: 'compensation_failed',
    });
    expect(await client().getRun(runId)).toMatchObject({
      status: 'pending',
      compensation: 'failure',
      error: null,
      finished_at: null,
    });
    await drain();

    const { run } = await runState(getStore(), runId);
    expect(run).toMatchObject({ status: 'compensated', compensation: 'failure' });
    expect(log).toEqual(['reserve', 'charge', 'ship', 'refund', 'refund', 'refund', 'unreserve']);
    expect(provider.count('refund:')).toBe(1);
    expect(await results(runId)).toEqual(['reserve', 'charge', 'unship (skipped)', 'refund', 'unreserve']);
    expect(await client().listAudit({ runId })).toEqual([
      expect.objectContaining({
        action: 'retry',
        actor: 'ops',
        target: 'refund',
        detail: expect.objectContaining({ previousStatus: 'compensation_failed', fromStep: 'refund' }),
      }),
    ]);
    // A compensated run is over: no retry.
    await expect(client().retryRun(runId, note)).rejects.toThrow(
      /is compensated: only a failed, cancelled or compensation_failed run can be retried/,
    );
  });

  it('a compensation_failed run with a failed child is retried all the same: its compensation reads no children', async () => {
    unreserveRefused = true;
    const runId = await startTestRun(getStore(), withFailingChild, { orderId: 'k-1' });
    await drain();
    expect((await runState(getStore(), runId)).run).toMatchObject({
      status: 'compensation_failed',
      compensation: 'failure',
    });
    expect((await client().listRuns({ parentRunId: runId })).map((c) => c.status)).toEqual(['failed']);

    await Promise.all(workers.splice(0).map((w) => w.stop()));
    unreserveRefused = false;
    expect(await client().retryRun(runId, { actor: 'ops', reason: 'stock service fixed' })).toMatchObject({
      fromStep: 'unreserve',
    });
    await drain();
    expect((await runState(getStore(), runId)).run.status).toBe('compensated');
    expect(log).toEqual(['unreserve']);
  });

  it('an open intent at failure is reconciled first: not found, the charge is not refunded', async () => {
    // The charge fails with an unknown outcome on its only attempt, before anything reached the provider.
    provider.refuse.add('charge:o-3');
    const runId = await startTestRun(getStore(), fourEffects, { orderId: 'o-3' });
    await drain();
    expect((await runState(getStore(), runId)).run.status).toBe('needs_reconciliation');

    await runReconcilePass({ store: getStore(), workflows: [fourHandlers()], now: LATER() });
    await drain();
    const { run } = await runState(getStore(), runId);
    expect(run.status).toBe('compensated');
    expect(log).toEqual(['reserve', 'charge', 'unreserve']);
    expect(provider.count('refund:')).toBe(0);
    expect(await results(runId)).toEqual(['reserve', 'unship (skipped)', 'refund (skipped)', 'unreserve']);
  });

  it("an operator's resolve of a compensating run's open intent settles it in the ledger only; the compensation then skips it", async () => {
    provider.refuse.add('charge:o-7');
    const runId = await startTestRun(getStore(), fourEffects, { orderId: 'o-7' });
    await drain();
    expect((await runState(getStore(), runId)).run.status).toBe('needs_reconciliation');
    // No worker left that could take the compensating run before the operator settles the intent.
    await Promise.all(workers.splice(0).map((w) => w.stop()));
    expect(await client().cancel(runId, { compensate: true })).toBe(true);

    const note = { actor: 'ops', reason: 'no charge at the provider' };
    const resolved = await createClient({ store: getStore(), workflows: [fourEffects] }).resolveEffect(
      runId,
      'charge',
      { notFound: true },
      note,
    );
    expect(resolved).toMatchObject({ status: 'released', runStatus: 'pending' });
    expect((await runState(getStore(), runId)).run).toMatchObject({ status: 'pending', compensation: 'cancel' });
    await drain();

    expect((await runState(getStore(), runId)).run.status).toBe('compensated');
    expect(provider.count('refund:')).toBe(0);
    expect(await results(runId)).toEqual(['reserve', 'unship (skipped)', 'refund (skipped)', 'unreserve']);
  });

  describe('a compensation waiting on an intent no lookup could settle', () => {
    /** A charge applied with its answer lost, that the provider cannot tell about: the run parks, then is cancelled with compensate. */
    const cancelledWithUnsettledCharge = async (orderId: string): Promise<string> => {
      provider.lose.add(`charge:${orderId}`);
      mute.add(`charge:${orderId}`);
      const runId = await startTestRun(getStore(), fourEffects, { orderId });
      await drain();
      expect((await runState(getStore(), runId)).run).toMatchObject({
        status: 'needs_reconciliation',
        error: expect.objectContaining({ step: 'charge' }),
      });
      // The reconciler asks; the provider cannot tell.
      const asked = await runReconcilePass({ store: getStore(), workflows: [fourHandlers()], now: LATER() });
      expect(asked.items.filter((i) => i.runId === runId)).toEqual([
        expect.objectContaining({ step: 'charge', outcome: 'parked' }),
      ]);
      await Promise.all(workers.splice(0).map((w) => w.stop()));
      expect(await client().cancel(runId, { compensate: true })).toBe(true);
      // (Rescheduled instead of parked, the run would stay due again and again: the drain would time out.)
      await drain(15_000);
      // Parked, visibly, for the reconciler or an operator — not pending on a backoff nobody sees.
      const { run } = await runState(getStore(), runId);
      expect(run).toMatchObject({
        status: 'needs_reconciliation',
        compensation: 'cancel',
        error: expect.objectContaining({
          name: 'NeedsReconciliation',
          step: 'charge',
          key: `charge:${orderId}`,
          awaitedBy: 'refund',
          cause: expect.objectContaining({ name: 'Cancelled' }),
        }),
      });
      expect((run.error as { message: string }).message).toMatch(new RegExp(`ledgerflow resolve ${runId} charge`));
      // No worker left to take the run the moment it wakes: the test looks at it first.
      await Promise.all(workers.splice(0).map((w) => w.stop()));
      return runId;
    };

    it('parks the run; the reconciler still cannot tell: it stays parked; once it finds the charge, the run wakes and refunds it once', async () => {
      const runId = await cancelledWithUnsettledCharge('o-11');
      const still = await runReconcilePass({ store: getStore(), workflows: [fourHandlers()], now: LATER() });
      expect(still.items.filter((i) => i.runId === runId)).toEqual([
        expect.objectContaining({ step: 'charge', outcome: 'deferred' }),
      ]);
      await drain();
      expect((await runState(getStore(), runId)).run.status).toBe('needs_reconciliation');
      await Promise.all(workers.splice(0).map((w) => w.stop()));

      mute.delete('charge:o-11');
      const settled = await runReconcilePass({ store: getStore(), workflows: [fourHandlers()], now: LATER() });
      expect(settled.items.filter((i) => i.runId === runId)).toEqual([
        expect.objectContaining({ step: 'charge', outcome: 'recorded' }),
      ]);
      expect((await runState(getStore(), runId)).run).toMatchObject({
        status: 'pending',
        compensation: 'cancel',
        error: expect.objectContaining({ name: 'Cancelled' }),
      });
      await drain();

      const { run } = await runState(getStore(), runId);
      expect(run).toMatchObject({
        status: 'compensated',
        compensation: 'cancel',
        error: expect.objectContaining({ name: 'Cancelled' }),
      });
      expect(provider.count('charge:')).toBe(1);
      expect(provider.requests.filter((k) => k.startsWith('refund:'))).toEqual([
        `refund:${provider.applied.get('charge:o-11')}`,
      ]);
      // The charge is recorded in the ledger only (the run does not go back to it): no step result.
      expect(await results(runId)).toEqual(['reserve', 'unship (skipped)', 'refund', 'unreserve']);
      expect((await runState(getStore(), runId)).effects.find((e) => e.step_name === 'charge')).toMatchObject({
        status: 'recorded',
      });
    });

    it("an operator's resolve wakes it: not found, the charge is not refunded", async () => {
      const runId = await cancelledWithUnsettledCharge('o-12');
      // The charge's answer was lost after it applied; the operator says otherwise, and is believed.
      const operator = createClient({ store: getStore(), workflows: [fourEffects] });
      const resolved = await operator.resolveEffect(
        runId,
        'charge',
        { notFound: true },
        { actor: 'ops', reason: 'no charge in the provider dashboard' },
      );
      expect(resolved).toMatchObject({ status: 'released', runStatus: 'pending' });
      await drain();

      const { run } = await runState(getStore(), runId);
      expect(run).toMatchObject({
        status: 'compensated',
        compensation: 'cancel',
        error: expect.objectContaining({ name: 'Cancelled' }),
      });
      expect(provider.count('refund:')).toBe(0);
      expect(await results(runId)).toEqual(['reserve', 'unship (skipped)', 'refund (skipped)', 'unreserve']);
    });
  });

  it('an open intent at failure is reconciled first: found, the run goes on, and fails later with the charge refunded once', async () => {
    provider.lose.add('charge:o-4');
    provider.decline.add('ship:o-4');
    const runId = await startTestRun(getStore(), fourEffects, { orderId: 'o-4' });
    await drain();
    expect((await runState(getStore(), runId)).run.status).toBe('needs_reconciliation');

    await runReconcilePass({ store: getStore(), workflows: [fourHandlers()], now: LATER() });
    await drain();
    const { run } = await runState(getStore(), runId);
    expect(run.status).toBe('compensated');
    expect(provider.count('charge:')).toBe(1);
    expect(provider.count('refund:')).toBe(1);
    expect(log).toEqual(['reserve', 'charge', 'ship', 'refund', 'unreserve']);
  });

  it('a step whose provider dedupes by key, without reconcile, failing for good with an unknown outcome is taken over by its compensation: the effect it had is undone once', async () => {
    // ship is applied, but its answer is lost (502): the only way to know is to send its key again.
    provider.lose.add('ship:o-8');
    const runId = await startTestRun(getStore(), fourEffects, { orderId: 'o-8' });
    await drain();

    const { run, effects } = await runState(getStore(), runId);
    expect(run.status).toBe('compensated');
    expect(provider.requests.filter((k) => k.startsWith('ship:'))).toEqual(['ship:o-8', 'ship:o-8']);
    expect(provider.count('ship:')).toBe(1);
    expect(provider.count('unship:')).toBe(1);
    expect(log).toEqual(['reserve', 'charge', 'ship', 'ship', 'unship', 'refund', 'unreserve']);
    expect(await results(runId)).toEqual(['reserve', 'charge', 'unship', 'refund', 'unreserve']);
    const ship = effects.find((e) => e.step_name === 'ship')!;
    expect(ship).toMatchObject({ status: 'recorded', effect: { id: provider.applied.get('ship:o-8') } });
    expect(ship.resolution).toMatch(
      /^recorded by compensation "unship" \(attempt 1\), which sent key "ship:o-8" again/,
    );
  });

  it('… and when its call never reached the provider, the take-over applies it and the compensation undoes it: never an effect left standing', async () => {
    provider.refuseOnce.add('ship:o-9');
    const runId = await startTestRun(getStore(), fourEffects, { orderId: 'o-9' });
    await drain();

    expect((await runState(getStore(), runId)).run.status).toBe('compensated');
    expect(provider.count('ship:')).toBe(1);
    expect(provider.count('unship:')).toBe(1);
    expect(await results(runId)).toEqual(['reserve', 'charge', 'unship', 'refund', 'unreserve']);
  });

  it('… and when the provider declines the key sent again (NotAppliedError), the intent is released and the compensation skipped', async () => {
    provider.refuseOnce.add('ship:o-10');
    provider.decline.add('ship:o-10');
    const runId = await startTestRun(getStore(), fourEffects, { orderId: 'o-10' });
    await drain();

    const { run, effects } = await runState(getStore(), runId);
    expect(run.status).toBe('compensated');
    expect(provider.count('ship:')).toBe(0);
    expect(provider.requests.filter((k) => k.startsWith('unship:'))).toEqual([]);
    expect(await results(runId)).toEqual(['reserve', 'charge', 'unship (skipped)', 'refund', 'unreserve']);
    expect(effects.find((e) => e.step_name === 'ship')).toMatchObject({
      status: 'released',
      resolution: expect.stringMatching(/^released: the provider refused key "ship:o-10" when compensation "unship"/),
    });
  });

  it('cancel with compensate while such a step has an open intent: the reconciler leaves it open, the compensation takes it over and refunds the charge it finds', async () => {
    provider.lose.add('charge:c-3');
    const runId = await startTestRun(getStore(), waitV1, { orderId: 'c-3' });
    const w = createWorker({ store: getStore(), ...FAST, workflows: [chargeWaitHandlers(waitV1)] });
    workers.push(w);
    await w.start();
    await waitUntil('the charge failed with its intent open', async () => {
      const { attempts, effects } = await runState(getStore(), runId);
      return (
        attempts.some((a) => a.step_name === 'charge' && a.status === 'failed') &&
        effects.some((e) => e.step_name === 'charge' && e.status === 'intent')
      );
    });
    await w.stop();
    expect(await client().cancel(runId, { compensate: true })).toBe(true);

    const pass = await runReconcilePass({ store: getStore(), workflows: [chargeWaitHandlers(waitV1)], now: LATER() });
    expect(pass.items).toEqual([
      expect.objectContaining({
        runId,
        step: 'charge',
        outcome: 'deferred',
        detail: expect.stringMatching(/^left open for compensation "refund"/),
      }),
    ]);
    expect((await runState(getStore(), runId)).effects.find((e) => e.step_name === 'charge')!.status).toBe('intent');

    await drain();
    expect((await runState(getStore(), runId)).run).toMatchObject({ status: 'compensated', compensation: 'cancel' });
    expect(provider.count('charge:')).toBe(1);
    expect(provider.requests.filter((k) => k.startsWith('refund:'))).toEqual(['refund:c-3']);
  });

  it("an operator resolves a compensation's own open intent: found, the run ends compensated with that refund", async () => {
    // The refund is applied but its answer lost; reconcile cannot tell: parked at the compensation.
    provider.lose.add('refund:p-1');
    const runId = await startTestRun(getStore(), parkedRefund, { orderId: 'p-1' });
    await drain();
    await runReconcilePass({ store: getStore(), workflows: [parkedRefundHandlers()], now: LATER() });
    expect((await runState(getStore(), runId)).run).toMatchObject({
      status: 'needs_reconciliation',
      compensation: 'failure',
    });

    const operator = createClient({ store: getStore(), workflows: [parkedRefund] });
    const note = { actor: 'ops', reason: 'refund seen at the desk' };
    const refundId = provider.applied.get('refund:p-1')!;
    await expect(operator.resolveEffect(runId, 'nope', { notFound: true }, note)).rejects.toThrow(
      'has no step "nope"; its steps: charge, confirm; its compensations: refund. Nothing was done.',
    );
    expect(await operator.resolveEffect(runId, 'refund', { found: { id: refundId } }, note)).toMatchObject({
      status: 'recorded',
      runStatus: 'compensated',
    });

    const { run, effects } = await runState(getStore(), runId);
    expect(run).toMatchObject({ status: 'compensated', compensation: 'failure' });
    expect(run.finished_at).not.toBeNull();
    expect(effects.find((e) => e.step_name === 'refund')).toMatchObject({
      status: 'recorded',
      effect: { id: refundId },
      resolution: 'operator:found',
    });
    expect(provider.count('refund:')).toBe(1);
    expect(await results(runId)).toEqual(['charge', 'refund']);
  });

  it('cancel with compensate undoes the recorded charge; without it the run is just cancelled', async () => {
    const compensated = await startTestRun(getStore(), waitV1, { orderId: 'c-1' });
    const plain = await startTestRun(getStore(), waitV1, { orderId: 'c-2' });
    await drain();
    await waitUntil(
      'both waiting',
      async () =>
        (await client().getRun(plain)).status === 'waiting' &&
        (await client().getRun(compensated)).status === 'waiting',
    );

    expect(await client().cancel(compensated, { compensate: true })).toBe(true);
    expect((await client().getRun(compensated)).compensation).toBe('cancel');
    expect(await client().cancel(plain)).toBe(true);
    // A run being compensated is not cancelled again.
    expect(await client().cancel(compensated)).toBe(false);
    await drain();

    expect((await client().getRun(compensated)).status).toBe('compensated');
    expect((await client().getRun(plain)).status).toBe('cancelled');
    expect(provider.requests).toEqual(expect.arrayContaining(['charge:c-1', 'charge:c-2', 'refund:c-1']));
    expect(provider.count('refund:')).toBe(1);
  });

  it('a run that starts compensating is announced: a polling worker starts its compensations at once, not at its next poll', async () => {
    // A poll far longer than the test waits: only a NOTIFY can wake the worker in time.
    const w = createWorker({
      store: getStore(),
      pollIntervalMs: 120_000,
      leaseMs: 5_000,
      reconcileIntervalMs: 0,
      workflows: [fourHandlers(), chargeWaitHandlers(waitV1)],
    });
    workers.push(w);
    await w.start();
    // A failure commit that turns the run to its compensations.
    provider.decline.add('ship:n-1');
    const failing = await client().start(fourEffects, { orderId: 'n-1' });
    await waitUntil(
      'the failed run compensated',
      async () => (await client().getRun(failing.runId)).status === 'compensated',
      20_000,
    );
    // A cancel with compensate, from a client.
    const waiting = await client().start(waitV1, { orderId: 'n-2' });
    await waitUntil('the run waiting', async () => (await client().getRun(waiting.runId)).status === 'waiting', 20_000);
    expect(await client().cancel(waiting.runId, { compensate: true })).toBe(true);
    await waitUntil(
      'the cancelled run compensated',
      async () => (await client().getRun(waiting.runId)).status === 'compensated',
      20_000,
    );
    expect(provider.count('refund:')).toBe(2);
  });

  it("cancel follows the workflow's compensateOnCancel unless it says otherwise", async () => {
    const byDefault = await startTestRun(getStore(), waitV2, { orderId: 'd-1' });
    const optedOut = await startTestRun(getStore(), waitV2, { orderId: 'd-2' });
    await drain();
    expect(await client().cancel(byDefault)).toBe(true);
    expect(await client().cancel(optedOut, { compensate: false, actor: 'ops', reason: 'test' })).toBe(true);
    await drain();

    expect((await client().getRun(byDefault)).status).toBe('compensated');
    expect((await client().getRun(optedOut)).status).toBe('cancelled');
    expect(provider.requests.filter((k) => k.startsWith('refund:'))).toEqual(['refund:d-1']);
  });

  it('the database refuses a compensation row that names itself or a non-effect kind', async () => {
    await expect(
      sql`INSERT INTO ledgerflow.workflow_step_def (workflow_name, version, step_name, position, kind, compensates)
          VALUES ('comp-four', 1, 'x', 99, 'step', 'reserve')`.execute(getStore().db),
    ).rejects.toThrow(/workflow_step_def_compensates_check/);
  });
});
