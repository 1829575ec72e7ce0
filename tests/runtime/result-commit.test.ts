import { describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import type { StepDefinition } from '../../dsl/workflow.js';
import { resultCommit, type Continuation, type ResultCommitSource } from '../../runtime/worker/result-commit.js';

/** resultCommit: the common part of every executor's result commit (AdvanceParams). */
describe('resultCommit', () => {
  const step: StepDefinition = {
    name: 'charge',
    kind: 'external',
    position: 2,
    output: z.any(),
    retry: { maxAttempts: 3, initialDelayMs: 1, maxDelayMs: 1, backoffFactor: 1, jitter: 0, nonRetryable: [] },
    idempotentByKey: false,
    performTimeoutMs: 1_000,
    timeoutMs: 1_000,
  };
  const source = (continuation: (output: unknown) => Continuation): ResultCommitSource => ({
    lease: { runId: '00000000-0000-4000-8000-000000000001', fencingToken: 7, workerId: 'w', leaseMs: 30_000 },
    run: { workflowName: 'order-payment', workflowVersion: 1 },
    step,
    attempt: 3,
    continuation,
  });

  it('asks for the continuation once, with the output, and carries the attempt, run and step', () => {
    const continuation = vi.fn((): Continuation => ({ kind: 'hold', nextStep: 'notify' }));
    const params = resultCommit(source(continuation), { ok: true });
    expect(continuation).toHaveBeenCalledTimes(1);
    expect(continuation).toHaveBeenCalledWith({ ok: true });
    expect(params).toEqual({
      lease: { runId: '00000000-0000-4000-8000-000000000001', fencingToken: 7, workerId: 'w', leaseMs: 30_000 },
      workflowName: 'order-payment',
      workflowVersion: 1,
      step,
      attempt: 3,
      resultAttempt: 3,
      output: { ok: true },
      continuation: { kind: 'hold', nextStep: 'notify' },
    });
    expect('effect' in params).toBe(false);
  });

  it('attributes a recorded intent to the attempt that wrote it, any other effect to this attempt', () => {
    const s = source(() => ({ kind: 'release' }));
    expect(resultCommit(s, 1, { key: 'k', mode: 'record-intent', attempt: 1 }).resultAttempt).toBe(1);
    expect(resultCommit(s, 1, { key: 'k', mode: 'reference' }).resultAttempt).toBe(3);
    expect(resultCommit(s, 1, { key: 'k', mode: 'fill-recorded', attempt: 3 }).resultAttempt).toBe(3);
    expect(resultCommit(s, 1, { key: 'k', mode: 'insert-recorded', attempt: 3, requestHash: 'h' })).toMatchObject({
      resultAttempt: 3,
      effect: { key: 'k', mode: 'insert-recorded', attempt: 3, requestHash: 'h' },
    });
  });
});
