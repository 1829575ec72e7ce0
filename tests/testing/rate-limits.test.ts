import { z } from 'zod';
import { queue, shapeHash, workflow } from 'ledgerflow/dsl';
import { bindHandlers } from 'ledgerflow/runtime';
import { createTestEnvironment, type TestEnvironment } from 'ledgerflow/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';

/**
 * A queue's rate window on the test clock: `queue_grant` dates grants with `clock_timestamp()`
 * read under the queue's lock (core 0018), so the kit moves that clock too — the next grant falls
 * due when the test advances time by the period, not a moment earlier.
 */
const HOUR = 3_600_000;
const hourly = queue('kit-once-an-hour', { rateLimit: { limit: 1, periodMs: HOUR } });
const call = workflow('kit-rated', { version: 1, input: z.object({ id: z.string() }) }).step('call', {
  output: z.object({ ok: z.boolean() }),
  queue: { queue: hourly },
});

let env: TestEnvironment;
beforeAll(async () => {
  env = await createTestEnvironment({
    workflows: [bindHandlers(call, { call: () => ({ ok: true }) }, shapeHash(call))],
  });
}, 60_000);
afterAll(() => env?.close());

it('grants the next slot of a rate-limited queue when the clock has moved by the period, not before', async () => {
  const first = await env.client.start(call, { id: 'r-1' });
  const second = await env.client.start(call, { id: 'r-2' });
  await env.runUntilIdle();
  const statuses = async () =>
    [(await env.client.getRun(first.runId)).status, (await env.client.getRun(second.runId)).status].sort();
  expect(await statuses()).toEqual(['completed', 'waiting']);

  await env.advanceTime(HOUR - 60_000);
  await env.runUntilIdle();
  expect(await statuses()).toEqual(['completed', 'waiting']);

  await env.advanceTime(60_000);
  await env.runUntilIdle({ timeoutMs: 10_000 });
  expect(await statuses()).toEqual(['completed', 'completed']);
});
