import { sql } from 'kysely';
import { afterEach, beforeAll, expect, it } from 'vitest';
import {
  ConflictError,
  createClient,
  createWorker,
  QueueNotFoundError,
  RunNotFoundError,
  UnknownWorkflowError,
  ValidationError,
  type Client,
  type OperatorNote,
  type Worker,
} from 'ledgerflow/runtime';
import { registerSchedules } from '../../runtime/schedules/register-schedules.js';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { runState, waitUntil } from './fixtures/run-helpers.js';
import { SCHEDULE_WORKFLOWS, scheduleOf } from './fixtures/schedule-workflows.js';
import {
  OPERATOR_WORKFLOWS,
  operatorHandlers,
  operatorProvider,
  packOrder,
  pay,
  payOnce,
  queued,
  type OperatorProvider,
} from './fixtures/operator-workflows.js';

const NOTE: OperatorNote = { actor: 'ana', reason: 'provider fixed (INC-42)' };

/**
 * Operator actions on PostgreSQL and PGlite: retry, resolve an intent by hand, pause a queue —
 * each audited in its own transaction, and refused with nothing written when it may not act.
 */
describeStores('operator actions', (getStore) => {
  let client: Client;
  const workers: Worker[] = [];
  beforeAll(async () => {
    await migrateForTest(getStore(), [...OPERATOR_WORKFLOWS, ...SCHEDULE_WORKFLOWS]);
    client = createClient({ store: getStore(), workflows: OPERATOR_WORKFLOWS });
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop({ timeoutMs: 200 })));
  });
  const worker = (provider: OperatorProvider): Worker => {
    const w = createWorker({
      store: getStore(),
      workflows: operatorHandlers(provider),
      pollIntervalMs: 20,
      leaseMs: 5_000,
      reconcileIntervalMs: 0,
    });
    workers.push(w);
    return w;
  };
  const drain = async (provider: OperatorProvider): Promise<void> => {
    const w = worker(provider);
    await w.drain({ timeoutMs: 20_000 });
    await w.stop();
  };
  const auditCount = async (): Promise<number> => (await client.listAudit({ limit: 10_000 })).length;

  it('retries a failed run from its step with a fresh attempt budget; the recorded charge is not performed again', async () => {
    const provider = operatorProvider();
    provider.shipFailures = 3;
    const { runId } = await client.start(pay, { id: 'retry-1' });
    await drain(provider);
    const failed = await runState(getStore(), runId);
    expect(failed.run.status).toBe('failed');
    expect(failed.attempts.filter((a) => a.step_name === 'ship').map((a) => a.status)).toEqual(['failed', 'failed']);

    const retried = await client.retryRun(runId, NOTE);
    expect(retried).toEqual({ runId, fromStep: 'ship', previousStatus: 'failed' });
    const pending = await runState(getStore(), runId);
    expect(pending.run).toMatchObject({
      status: 'pending',
      finished_at: null,
      error: null,
      budget_step: 'ship',
      budget_base: 2,
    });
    expect(pending.run.fencing_token).toBe(failed.run.fencing_token + 1);

    // One more failure (the third in history, the first of the new budget of two), then success.
    await drain(provider);
    const { run, attempts, effects } = await runState(getStore(), runId);
    expect(run.status).toBe('completed');
    expect(attempts.filter((a) => a.step_name === 'ship').map((a) => `${a.attempt}:${a.status}`)).toEqual([
      '1:failed',
      '2:failed',
      '3:failed',
      '4:succeeded',
    ]);
    expect(provider.performed).toEqual(['op-charge:retry-1']);
    expect(effects).toEqual([expect.objectContaining({ status: 'recorded', attempt: 1 })]);

    const [row, ...rest] = await client.listAudit({ runId });
    expect(rest).toEqual([]);
    expect(row).toMatchObject({ actor: 'ana', action: 'retry', run_id: runId, target: 'ship', reason: NOTE.reason });
    expect(row!.detail).toMatchObject({ previousStatus: 'failed', fromStep: 'ship' });
  });

  it('refuses to retry a run that is not failed or cancelled, and writes nothing', async () => {
    const { runId } = await client.start(pay, { id: 'retry-refused' });
    const before = await auditCount();
    await expect(client.retryRun(runId, NOTE)).rejects.toThrow(ConflictError);
    await expect(client.retryRun(runId, NOTE)).rejects.toThrow(
      /is pending: only a failed, cancelled or compensation_failed run can be retried/,
    );
    await drain(operatorProvider());
    await expect(client.retryRun(runId, NOTE)).rejects.toThrow(/is completed/);
    await expect(client.retryRun('00000000-0000-4000-8000-00000000beef', NOTE)).rejects.toThrow(RunNotFoundError);
    await expect(client.retryRun(runId, { actor: '', reason: 'x' })).rejects.toThrow(ValidationError);
    await expect(client.retryRun(runId, { actor: 'ana', reason: 'x'.repeat(2_001) })).rejects.toThrow(
      /reason: at most 2000 characters/,
    );
    expect((await runState(getStore(), runId)).run.status).toBe('completed');
    expect(await auditCount()).toBe(before);
  });

  it('cancels with an audit row, and a retry of the cancelled run completes it', async () => {
    const { runId } = await client.start(pay, { id: 'cancel-retry' });
    expect(await client.cancel(runId, { actor: 'bo', reason: 'customer asked to hold' })).toBe(true);
    expect(await client.cancel(runId, { actor: 'bo', reason: 'again' })).toBe(false);
    expect((await client.listAudit({ runId })).map((a) => `${a.actor}:${a.action}`)).toEqual(['bo:cancel']);
    expect(await client.retryRun(runId, NOTE)).toEqual({ runId, fromStep: 'charge', previousStatus: 'cancelled' });
    await drain(operatorProvider());
    expect((await runState(getStore(), runId)).run.status).toBe('completed');
    expect((await client.listAudit({ runId })).map((a) => a.action)).toEqual(['retry', 'cancel']);
  });

  it('refuses to retry a parent while its child failed; the child first, then the parent completes', async () => {
    const provider = operatorProvider();
    provider.packBroken = true;
    const { runId } = await client.start(packOrder, { id: 'parent-1' });
    await drain(provider);
    expect((await runState(getStore(), runId)).run.status).toBe('failed');
    const [child] = await client.listRuns({ parentRunId: runId });
    expect(child).toMatchObject({ status: 'failed', dedupe_key: 'op-pack:parent-1' });

    await expect(client.retryRun(runId, NOTE)).rejects.toThrow(
      new RegExp(`children that did not complete: ${child!.id} \\(failed\\)`),
    );
    provider.packBroken = false;
    await client.retryRun(child!.id, NOTE);
    await drain(provider);
    expect((await runState(getStore(), child!.id)).run.status).toBe('completed');
    // The parent was over when its child settled again: its counters are recounted by its retry.
    expect((await runState(getStore(), runId)).run).toMatchObject({ status: 'failed', children_failed: 1 });

    await client.retryRun(runId, NOTE);
    expect((await runState(getStore(), runId)).run).toMatchObject({
      status: 'pending',
      children_open: 0,
      children_failed: 0,
    });
    await drain(provider);
    const { run } = await runState(getStore(), runId);
    expect(run).toMatchObject({
      status: 'completed',
      output: { packed: { packed: 'parent-1' }, report: { packed: 'parent-1' } },
    });
  });

  it('refuses to retry a parent whose child compensated: the child cannot be retried, and the step would fail on it again', async () => {
    const provider = operatorProvider();
    provider.packBroken = true;
    const { runId } = await client.start(packOrder, { id: 'parent-2' });
    await drain(provider);
    const [child] = await client.listRuns({ parentRunId: runId });
    // As if the child had compensated its effects after failing (what a child with compensations does).
    await sql`UPDATE ledgerflow.workflow_run SET status = 'compensated', compensation = 'failure' WHERE id = ${child!.id}`.execute(
      getStore().db,
    );
    const before = await auditCount();
    await expect(client.retryRun(runId, NOTE)).rejects.toThrow(
      new RegExp(
        `children that did not complete: ${child!.id} \\(compensated\\).*a compensated child has undone its effects and cannot be retried`,
      ),
    );
    expect((await runState(getStore(), runId)).run.status).toBe('failed');
    expect(await auditCount()).toBe(before);
  });

  /** A payOnce run parked in needs_reconciliation: its charge threw ECONNRESET, its intent is open. */
  const parkedRun = async (id: string): Promise<{ runId: string; provider: OperatorProvider }> => {
    const provider = operatorProvider();
    provider.chargeMode = 'unknown';
    const { runId } = await client.start(payOnce, { id });
    await drain(provider);
    const parked = await runState(getStore(), runId);
    expect(parked.run.status).toBe('needs_reconciliation');
    expect(parked.effects.map((e) => e.status)).toEqual(['intent']);
    provider.chargeMode = 'ok';
    provider.performed.splice(0);
    return { runId, provider };
  };

  it('resolves a parked intent as found: the output is checked, recorded, and the run completes without calling perform again', async () => {
    const { runId, provider } = await parkedRun('found-1');
    const before = await auditCount();
    await expect(client.resolveEffect(runId, 'charge', { found: { chargeId: 42 } }, NOTE)).rejects.toThrow(
      ValidationError,
    );
    await expect(client.resolveEffect(runId, 'charge', { found: { chargeId: 42 } }, NOTE)).rejects.toThrow(
      /chargeId: Invalid input: expected string/,
    );
    await expect(client.resolveEffect(runId, 'refund', { notFound: true }, NOTE)).rejects.toThrow(
      /has no step "refund"/,
    );
    await expect(
      createClient({ store: getStore() }).resolveEffect(runId, 'charge', { notFound: true }, NOTE),
    ).rejects.toThrow(UnknownWorkflowError);
    const untouched = await runState(getStore(), runId);
    expect(untouched.run.status).toBe('needs_reconciliation');
    expect(untouched.effects[0]).toMatchObject({ status: 'intent', resolution: null });
    expect(await auditCount()).toBe(before);

    const resolved = await client.resolveEffect(runId, 'charge', { found: { chargeId: 'ch_by_hand' } }, NOTE);
    expect(resolved).toEqual({
      runId,
      stepName: 'charge',
      idempotencyKey: 'op-charge:found-1',
      status: 'recorded',
      runStatus: 'pending',
    });
    await drain(provider);
    const { run, effects, results } = await runState(getStore(), runId);
    expect(run.status).toBe('completed');
    expect(run.output).toEqual({ charge: { chargeId: 'ch_by_hand' }, ship: { shipped: true } });
    expect(effects[0]).toMatchObject({
      status: 'recorded',
      resolution: 'operator:found',
      effect: { chargeId: 'ch_by_hand' },
    });
    expect(results.find((r) => r.step_name === 'charge')).toMatchObject({
      attempt: 1,
      output: { chargeId: 'ch_by_hand' },
    });
    expect(provider.performed).toEqual([]);

    await expect(client.resolveEffect(runId, 'charge', { notFound: true }, NOTE)).rejects.toThrow(
      /has no open intent to resolve \(key "op-charge:found-1" recorded\)/,
    );
    const [row] = await client.listAudit({ runId });
    expect(row).toMatchObject({ action: 'resolve-found', target: 'op-charge:found-1', actor: 'ana' });
    expect(row!.detail).toMatchObject({
      previousStatus: 'needs_reconciliation',
      runStatus: 'pending',
      output: { chargeId: 'ch_by_hand' },
    });
    expect(await auditCount()).toBe(before + 1);
  });

  it('resolves an intent as not found: the next attempt performs with the same key', async () => {
    const provider = operatorProvider();
    provider.chargeMode = 'unknown';
    const { runId } = await client.start(pay, { id: 'not-found-1' });
    const w = worker(provider);
    await w.start();
    // Attempt 1 threw: its intent stays open until its horizon, and the retry waits for it.
    const waiting = await waitUntil('the failed first attempt', async () => {
      const s = await runState(getStore(), runId);
      return s.run.status === 'pending' && s.attempts.some((a) => a.status === 'failed') ? s : undefined;
    });
    await w.stop();
    expect(waiting.run.run_after.getTime()).toBeGreaterThan(Date.now() + 1_000);

    const resolved = await client.resolveEffect(
      runId,
      'charge',
      { notFound: true },
      { actor: 'cy', reason: 'not in the PSP dashboard' },
    );
    expect(resolved).toMatchObject({ status: 'released', runStatus: 'pending' });
    const released = await runState(getStore(), runId);
    expect(released.effects[0]).toMatchObject({ status: 'released', resolution: 'operator:not-found' });
    expect(released.run.run_after.getTime()).toBeLessThanOrEqual(Date.now() + 100);

    provider.chargeMode = 'ok';
    await drain(provider);
    const { run, effects } = await runState(getStore(), runId);
    expect(run.status).toBe('completed');
    expect(provider.performed).toEqual(['op-charge:not-found-1', 'op-charge:not-found-1']);
    expect(effects).toEqual([
      expect.objectContaining({ idempotency_key: 'op-charge:not-found-1', status: 'recorded', attempt: 2 }),
    ]);
    expect((await client.listAudit({ runId })).map((a) => `${a.actor}:${a.action}`)).toEqual(['cy:resolve-not-found']);
  });

  it('not found on a run parked after its attempts were exhausted fails it, as the reconciler would; a retry then performs the same key', async () => {
    const { runId, provider } = await parkedRun('exhausted-1');
    expect(await client.resolveEffect(runId, 'charge', { notFound: true }, NOTE)).toMatchObject({
      status: 'released',
      runStatus: 'failed',
    });
    await client.retryRun(runId, NOTE);
    await drain(provider);
    expect((await runState(getStore(), runId)).run.status).toBe('completed');
    expect(provider.performed).toEqual(['op-charge:exhausted-1']);
  });

  it("settles a cancelled run's intent in the ledger only; its retry reuses the recorded effect", async () => {
    const { runId, provider } = await parkedRun('cancelled-found');
    await client.cancel(runId);
    const resolved = await client.resolveEffect(runId, 'charge', { found: { chargeId: 'ch_seen' } }, NOTE);
    expect(resolved).toMatchObject({ status: 'recorded', runStatus: 'cancelled' });
    expect((await runState(getStore(), runId)).results).toEqual([]);
    await client.retryRun(runId, NOTE);
    await drain(provider);
    const { run } = await runState(getStore(), runId);
    expect(run).toMatchObject({
      status: 'completed',
      output: { charge: { chargeId: 'ch_seen' }, ship: { shipped: true } },
    });
    expect(provider.performed).toEqual([]);
  });

  it('refuses to resolve the intent of a run a worker holds under a live lease, and writes nothing', async () => {
    const { runId } = await parkedRun('leased-1');
    await sql`UPDATE ledgerflow.workflow_run SET status = 'running', lease_owner = 'worker-x',
                     lease_expires_at = statement_timestamp() + interval '1 hour' WHERE id = ${runId}`.execute(
      getStore().db,
    );
    const before = await auditCount();
    await expect(client.resolveEffect(runId, 'charge', { found: { chargeId: 'ch_x' } }, NOTE)).rejects.toThrow(
      /live lease/,
    );
    expect((await runState(getStore(), runId)).effects[0]!.status).toBe('intent');
    expect(await auditCount()).toBe(before);
    await client.cancel(runId);
  });

  it('a paused queue grants no slot — its runs wait, a worker registering it leaves it paused — and a resume lets them run', async () => {
    await expect(client.pauseQueue('op-no-such-queue', NOTE)).rejects.toThrow(QueueNotFoundError);
    const provider = operatorProvider();
    const registering = worker(provider);
    await registering.start();
    expect(await client.pauseQueue('op-q', NOTE)).toBe(true);
    expect(await client.pauseQueue('op-q', NOTE)).toBe(false);
    const ids = [(await client.start(queued, { id: 'q-1' })).runId, (await client.start(queued, { id: 'q-2' })).runId];
    await waitUntil('both runs in line', async () => {
      const runs = await Promise.all(ids.map((id) => runState(getStore(), id)));
      return runs.every((s) => s.run.status === 'waiting');
    });
    await registering.stop();
    // A new worker registers the queue again: still paused, nothing granted.
    const again = worker(provider);
    await again.start();
    await new Promise((resolve) => setTimeout(resolve, 200));
    const [summary] = await client.listQueues({ queue: 'op-q' });
    expect(summary).toMatchObject({ paused: true, inFlight: 0, waiting: 2 });
    await again.stop();

    expect(await client.resumeQueue('op-q', { actor: 'ana', reason: 'carrier back' })).toBe(true);
    await drain(provider);
    for (const id of ids) expect((await runState(getStore(), id)).run.status).toBe('completed');
    const trail = (await client.listAudit({ limit: 2 })).map((a) => `${a.action}:${a.target}:${a.reason}`);
    expect(trail).toEqual(['resume-queue:op-q:carrier back', `pause-queue:op-q:${NOTE.reason}`]);
  });

  it('audits a schedule pause and resume given a note; without one, or when nothing changed, writes no row', async () => {
    await registerSchedules(getStore().db, [scheduleOf('op-nightly', '0 2 * * *')]);
    const before = await auditCount();
    expect(await client.pauseSchedule('op-nightly', { actor: 'ana', reason: 'month-end freeze' })).toBe(true);
    expect(await client.pauseSchedule('op-nightly', { actor: 'ana', reason: 'again' })).toBe(false);
    expect(await client.resumeSchedule('op-nightly')).toBe(true);
    await expect(client.pauseSchedule('op-nightly', { actor: 'ana', reason: '' })).rejects.toThrow(ValidationError);
    expect((await client.listSchedules()).find((x) => x.name === 'op-nightly')?.paused).toBe(false);
    expect(await auditCount()).toBe(before + 1);
    expect((await client.listAudit({ limit: 1 }))[0]).toMatchObject({
      action: 'pause-schedule',
      target: 'op-nightly',
      run_id: null,
      reason: 'month-end freeze',
    });
  });

  it('lists runs by dedupe key, with or without the workflow', async () => {
    const { runId } = await client.start(pay, { id: 'dk-1' }, { dedupeKey: 'order-dk-1' });
    await client.start(payOnce, { id: 'dk-2' }, { dedupeKey: 'order-dk-1' });
    expect((await client.listRuns({ dedupeKey: 'order-dk-1', workflow: 'op-pay' })).map((r) => r.id)).toEqual([runId]);
    expect((await client.listRuns({ dedupeKey: 'order-dk-1' })).map((r) => r.workflow_name).sort()).toEqual([
      'op-pay',
      'op-pay-once',
    ]);
    expect(await client.listRuns({ dedupeKey: 'no-such-key' })).toEqual([]);
    await Promise.all((await client.listRuns({ dedupeKey: 'order-dk-1' })).map((r) => client.cancel(r.id)));
  });
});
