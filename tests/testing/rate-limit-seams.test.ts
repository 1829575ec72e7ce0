import { z } from 'zod';
import { queue, shapeHash, workflow } from 'ledgerflow/dsl';
import { bindHandlers } from 'ledgerflow/runtime';
import { createTestEnvironment, type TestEnvironment } from 'ledgerflow/testing';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';

/**
 * A rate limit is about the calls the provider sees, so a grant counts in the window from the
 * moment its run can use it. Two seams, on the test clock:
 * - a slot granted to a run in line is taken up only when a worker claims that run — a minute or
 *   an hour later if no worker was free or the one that would have claimed it died. Counted from
 *   the grant, it left the window before it was used, and the provider saw three calls within a
 *   minute for a limit of two an hour (core 0021: it counts as now until used, then from its use);
 * - a worker killed after the handler called the provider: the attempt that takes the run over
 *   asks again, and the dead attempt's grant still fills the window.
 */
const HOUR = 3_600_000;
const twiceAnHour = queue('kit-twice-an-hour', { rateLimit: { limit: 2, periodMs: HOUR } });
const call = workflow('kit-rated-call', { version: 1, input: z.object({ id: z.string() }) }).step('call', {
  output: z.object({ ok: z.boolean() }),
  queue: { queue: twiceAnHour },
});

const calls: string[] = [];
let env: TestEnvironment;
beforeAll(async () => {
  env = await createTestEnvironment({
    workflows: [
      bindHandlers(
        call,
        {
          call: ({ input }) => {
            calls.push(input.id);
            return { ok: true };
          },
        },
        shapeHash(call),
      ),
    ],
  });
}, 60_000);
beforeEach(async () => {
  calls.length = 0;
  await env.reset();
});
afterAll(() => env?.close());

const statusOf = async (runId: string) => (await env.client.getRun(runId)).status;

it('counts a slot granted to a run in line from when the run takes it up, not from the grant', async () => {
  // A worker registers the queue; the line forms while it is paused; resuming grants the first in line at once.
  await env.runUntilIdle();
  await env.client.pauseQueue(twiceAnHour.name);
  const late = await env.client.start(call, { id: 'late' });
  await env.runUntilIdle();
  expect(await statusOf(late.runId)).toBe('waiting');
  await env.client.resumeQueue(twiceAnHour.name);

  // No worker takes the woken run up for 59 minutes.
  await env.advanceTime(HOUR - 60_000);
  const second = await env.client.start(call, { id: 'second' });
  const third = await env.client.start(call, { id: 'third' });
  await env.runUntilIdle();
  expect(calls.sort()).toEqual(['late', 'second']);
  expect(await statusOf(third.runId)).toBe('waiting');

  // A minute later the grant to `late` would have left a window counted from the grant.
  await env.advanceTime(60_000);
  await env.runUntilIdle();
  expect(calls).toHaveLength(2);
  expect(await statusOf(third.runId)).toBe('waiting');

  await env.advanceTime(HOUR);
  await env.runUntilIdle();
  expect(await statusOf(second.runId)).toBe('completed');
  expect(await statusOf(third.runId)).toBe('completed');
  expect(calls).toHaveLength(3);
});

it('makes the attempt that takes over from a killed one wait for the window the dead one used', async () => {
  const first = await env.client.start(call, { id: 'first' });
  // `first`'s handler calls the provider, then its worker dies before the step's commit.
  env.crashAt('before-step-commit');
  const crashed = await env.runUntilIdle();
  expect(crashed.crashedAt).toBe('before-step-commit');
  expect(calls).toEqual(['first']);
  const other = await env.client.start(call, { id: 'other' });
  await env.advancePastHorizons();
  await env.runUntilIdle();
  // Two calls so far (the dead attempt's included): the take-over waits for the window.
  expect(calls).toHaveLength(2);
  const statuses = [await statusOf(first.runId), await statusOf(other.runId)].sort();
  expect(statuses).toEqual(['completed', 'waiting']);

  await env.advanceTime(HOUR);
  await env.runUntilIdle();
  expect([await statusOf(first.runId), await statusOf(other.runId)]).toEqual(['completed', 'completed']);
  expect(calls).toHaveLength(3);
});
