import { afterAll, beforeAll, expect, it } from 'vitest';
import { sql } from 'kysely';
import {
  ConflictError,
  createClient,
  createWorker,
  DuplicateEventError,
  RunNotFoundError,
  ValidationError,
  type Client,
  type Worker,
} from 'ledgerflow/runtime';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { waitUntil } from './fixtures/run-helpers.js';
import {
  approval,
  awaitApproval,
  awaitPayment,
  conditional,
  deadlined,
  fanOut,
  napper,
  paymentSettled,
  shortWait,
  WAIT_WORKFLOWS,
  waitHandlers,
  withChild,
} from './fixtures/wait-workflows.js';

/**
 * Conformance suite (PostgreSQL and PGlite) of the steps that wait, branch and compose:
 * conditions, durable sleep, events and signals, child workflows, fan-out, deadlines and
 * cancellation, driven by a real worker.
 */
describeStores('waits, conditions and children', (getStore) => {
  let client: Client;
  let worker: Worker;
  beforeAll(async () => {
    await migrateForTest(getStore(), WAIT_WORKFLOWS);
    client = createClient({ store: getStore(), workflows: WAIT_WORKFLOWS });
    worker = createWorker({
      store: getStore(),
      workflows: waitHandlers(),
      pollIntervalMs: 25,
      reconcileIntervalMs: 0,
      concurrency: 8,
    });
    await worker.start();
  });
  afterAll(async () => {
    await worker.stop();
  });

  it('skips a step whose condition says no: recorded as skipped, no ledger row, later steps see undefined', async () => {
    const standard = await client.start(conditional, { express: false });
    const express = await client.start(conditional, { express: true });
    const a = await client.getRun((await client.waitForRun(standard.runId, { timeoutMs: 20_000, pollMs: 20 })).id);
    const b = await client.getRun((await client.waitForRun(express.runId, { timeoutMs: 20_000, pollMs: 20 })).id);
    expect(a.status).toBe('completed');
    expect(a.steps.map((s) => [s.step_name, s.skipped, s.output])).toEqual([
      ['expressFee', true, null],
      ['summary', false, { text: 'standard' }],
    ]);
    expect(a.effects).toEqual([]);
    expect(a.output).toEqual({ summary: { text: 'standard' } });
    expect(b.output).toEqual({ expressFee: { feeCents: 500 }, summary: { text: 'express +500' } });
    expect(b.effects.map((e) => e.status)).toEqual(['recorded']);
  });

  it('sleeps without a lease until a wake-up time fixed once on database time', async () => {
    const { runId } = await client.start(napper, { ms: 700 });
    const waiting = await waitUntil('the run to sleep', async () => {
      const run = await client.getRun(runId);
      return run.status === 'waiting' ? run : undefined;
    });
    expect(waiting.lease_owner).toBeNull();
    expect(waiting.waiting_for).toMatchObject({ kind: 'sleep', step: 'nap' });
    const fixed = waiting.waits[0]!.until!;
    expect(waiting.attempts.map((a) => a.status)).toEqual(['suspended']);
    const done = await client.getRun((await client.waitForRun(runId, { timeoutMs: 20_000, pollMs: 20 })).id);
    expect(done.status).toBe('completed');
    expect(done.waits[0]!.until!.getTime()).toBe(fixed.getTime());
    expect((done.output as { nap: { until: string } }).nap.until).toBe(fixed.toISOString());
    expect(done.finished_at!.getTime()).toBeGreaterThanOrEqual(fixed.getTime());
  });

  it('delivers an event sent before the run reaches the wait, and one sent after; each is taken once', async () => {
    // Sent before any run waits: kept until a step takes it.
    await client.sendEvent(paymentSettled, 'early-1', { orderId: 'early-1', paid: true });
    const early = await client.start(awaitPayment, { orderId: 'early-1', timeoutMs: 60_000 });
    const late = await client.start(awaitPayment, { orderId: 'late-1', timeoutMs: 60_000 });
    await waitUntil('the late run to wait', async () => (await client.getRun(late.runId)).status === 'waiting');
    const sent = await client.sendEvent(
      paymentSettled,
      'late-1',
      { orderId: 'late-1', paid: false },
      { dedupeKey: 'psp-1' },
    );
    expect(sent).toMatchObject({ created: true, woke: 1 });
    const again = await client.sendEvent(
      paymentSettled,
      'late-1',
      { orderId: 'late-1', paid: false },
      { dedupeKey: 'psp-1' },
    );
    expect(again).toEqual({ eventId: sent.eventId, created: false, woke: 0 });
    await expect(
      client.sendEvent(paymentSettled, 'late-1', { orderId: 'late-1', paid: true }, { dedupeKey: 'psp-1' }),
    ).rejects.toThrow(DuplicateEventError);
    const a = await client.getRun((await client.waitForRun(early.runId, { timeoutMs: 20_000, pollMs: 20 })).id);
    const b = await client.getRun((await client.waitForRun(late.runId, { timeoutMs: 20_000, pollMs: 20 })).id);
    expect(a.output).toMatchObject({ outcome: { status: 'paid=true' } });
    expect(b.output).toMatchObject({
      outcome: { status: 'paid=false' },
      settled: { status: 'received', eventId: sent.eventId },
    });
    const { rows } = await sql<{ consumed_by_run: string; n: number }>`
      SELECT consumed_by_run, count(*)::int AS n FROM ledgerflow.event
       WHERE name = 'wt.payment.settled' AND correlation_key IN ('early-1', 'late-1') GROUP BY consumed_by_run`.execute(
      getStore().db,
    );
    expect(rows.map((r) => [r.consumed_by_run, r.n]).sort()).toEqual(
      [
        [early.runId, 1],
        [late.runId, 1],
      ].sort(),
    );
  });

  it('validates the payload before writing anything', async () => {
    await expect(client.sendEvent(paymentSettled, 'bad-1', { orderId: 'bad-1', paid: 'yes' } as never)).rejects.toThrow(
      ValidationError,
    );
    const { rows } = await sql`SELECT 1 FROM ledgerflow.event WHERE correlation_key = 'bad-1'`.execute(getStore().db);
    expect(rows).toEqual([]);
  });

  it('times out into a typed output instead of throwing', async () => {
    const { runId } = await client.start(shortWait, { orderId: 'never-1' });
    const run = await client.getRun((await client.waitForRun(runId, { timeoutMs: 20_000, pollMs: 20 })).id);
    expect(run.status).toBe('completed');
    expect(run.output).toMatchObject({ settled: { status: 'timeout' }, outcome: { status: 'timeout' } });
  });

  it('sends a signal to a run it knows, inside the caller transaction too', async () => {
    const { runId } = await client.start(awaitApproval, {});
    await waitUntil('the run to wait', async () => (await client.getRun(runId)).status === 'waiting');
    await expect(client.signal('00000000-0000-4000-8000-00000000dead', approval, { by: 'x' })).rejects.toThrow(
      RunNotFoundError,
    );
    await client.signal(runId, approval, { by: 'ops' });
    const run = await client.getRun((await client.waitForRun(runId, { timeoutMs: 20_000, pollMs: 20 })).id);
    expect(run.output).toMatchObject({ done: { by: 'ops' } });

    const other = await client.start(awaitPayment, { orderId: 'tx-1', timeoutMs: 60_000 });
    await getStore()
      .db.transaction()
      .execute(async (trx) => {
        await client.sendEventInTransaction(trx, paymentSettled, 'tx-1', { orderId: 'tx-1', paid: true });
      });
    expect((await client.waitForRun(other.runId, { timeoutMs: 20_000, pollMs: 20 })).status).toBe('completed');
  });

  it('starts a child once, waits for it and takes its last step output; a failed child fails the step', async () => {
    const ok = await client.start(withChild, { id: 'c-ok', n: 21, fail: false });
    const bad = await client.start(withChild, { id: 'c-bad', n: 1, fail: true });
    const a = await client.getRun((await client.waitForRun(ok.runId, { timeoutMs: 20_000, pollMs: 20 })).id);
    const b = await client.getRun((await client.waitForRun(bad.runId, { timeoutMs: 20_000, pollMs: 20 })).id);
    expect(a.status).toBe('completed');
    expect(a.output).toMatchObject({ doubled: { value: 42 }, report: { value: 42 } });
    expect(a.children).toEqual([
      expect.objectContaining({ workflowName: 'wt-w-doubler', step: 'doubled', index: 0, status: 'completed' }),
    ]);
    expect(b.status).toBe('failed');
    expect(b.error).toMatchObject({ name: 'ChildFailedError' });
  });

  it('fans out one child per item under a concurrency limit and resumes with outputs in item order', async () => {
    const { runId } = await client.start(fanOut, { id: 'f-1', count: 10, failAt: -1 });
    let maxOpen = 0;
    const watcher = setInterval(() => {
      void sql<{ n: number }>`SELECT count(*)::int AS n FROM ledgerflow.workflow_run WHERE parent_run_id = ${runId}
                               AND status NOT IN ('completed', 'failed', 'cancelled')`
        .execute(getStore().db)
        .then(({ rows }) => (maxOpen = Math.max(maxOpen, rows[0]!.n)))
        .catch(() => {});
    }, 5);
    const run = await client.getRun((await client.waitForRun(runId, { timeoutMs: 30_000, pollMs: 20 })).id);
    clearInterval(watcher);
    expect(run.status).toBe('completed');
    expect((run.output as { double: Array<{ value: number }> }).double.map((r) => r.value)).toEqual([
      2, 4, 6, 8, 10, 12, 14, 16, 18, 20,
    ]);
    expect(run.output).toMatchObject({ sum: { total: 110 } });
    expect(run.children.map((c) => c.index)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(maxOpen).toBeLessThanOrEqual(3);
    expect(run.children_open).toBe(0);
  });

  it('a deadline cancels the run, its waits and its children', async () => {
    const { runId } = await client.start(deadlined, { id: 'd-1' });
    const run = await client.getRun((await client.waitForRun(runId, { timeoutMs: 20_000, pollMs: 20 })).id);
    expect(run.status).toBe('cancelled');
    expect(run.error).toMatchObject({ name: 'DeadlineExceeded' });
    expect(run.children).toHaveLength(2);
    for (const child of run.children) {
      expect((await client.getRun(child.id)).status).toBe('cancelled');
    }
  });

  it('cancelling a parent cancels its waiting children', async () => {
    // A per-start deadline far away overrides the workflow's; the children wait for signals forever.
    const { runId } = await client.start(deadlined, { id: 'cancel-1' }, { timeoutMs: 600_000 });
    const parent = await waitUntil('the parent to wait for its children', async () => {
      const r = await client.getRun(runId);
      return r.status === 'waiting' && r.children.length === 2 ? r : undefined;
    });
    expect(parent.waiting_for).toMatchObject({ kind: 'children', step: 'children', total: 2 });
    await waitUntil('the children to wait', async () => {
      const states = await Promise.all(parent.children.map(async (c) => (await client.getRun(c.id)).status));
      return states.every((s) => s === 'waiting');
    });
    expect(await client.cancel(runId)).toBe(true);
    const after = await client.getRun(runId);
    expect(after.status).toBe('cancelled');
    for (const child of after.children) {
      const c = await client.getRun(child.id);
      expect(c.status).toBe('cancelled');
      expect(c.waiting_for).toBeNull();
      expect(c.error).toMatchObject({ name: 'Cancelled' });
    }
    // A signal to a cancelled child is refused: nothing would ever take it.
    await expect(client.signal(after.children[0]!.id, approval, { by: 'late' })).rejects.toThrow(ConflictError);
  });
});
