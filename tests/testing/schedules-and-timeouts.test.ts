import { createTestEnvironment, type TestEnvironment } from 'ledgerflow/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { nightly, nightlySchedule, scheduleRegistrations, stuck } from './kit-workflows.js';

/** Schedules on the test clock, and what runUntilIdle says when work does not end. */
let env: TestEnvironment;
let open!: () => void;
const gate = new Promise<void>((resolve) => (open = resolve));

beforeAll(async () => {
  env = await createTestEnvironment({ workflows: scheduleRegistrations(gate), schedules: [nightlySchedule] });
}, 60_000);
afterAll(async () => {
  open();
  await env?.close();
});

it('a schedule tick falls due when the clock reaches it, and starts one run for it', async () => {
  expect((await env.runUntilIdle()).runs).toEqual([]); // registers the schedule; its first tick is ahead
  const [registered] = await env.client.listSchedules();
  const tick = registered!.nextTicks[0]!;
  expect(tick.getUTCHours()).toBe(3);

  await env.advanceTime(tick.getTime() - (await env.now()).getTime() - 60_000);
  expect((await env.runUntilIdle()).runs).toEqual([]); // a minute early: nothing
  await env.advanceTime(60_000);
  const report = await env.runUntilIdle();
  expect(report.runs).toEqual([{ id: expect.any(String), workflow: 'kit-nightly@1', status: 'completed' }]);
  expect(await env.client.getRun(report.runs[0]!.id)).toMatchObject({
    workflow_name: nightly.name,
    output: { echo: { night: tick.toISOString() } },
  });
  expect((await env.client.listSchedules())[0]!.nextTicks[0]).toEqual(new Date(tick.getTime() + 24 * 3_600_000));
});

it('rejects after timeoutMs naming what is left, and releases the run it could not finish', async () => {
  const { runId } = await env.client.start(stuck, { id: 's-1' });
  await expect(env.runUntilIdle({ timeoutMs: 300 })).rejects.toThrow(
    /^runUntilIdle\(\) timed out after 300 ms with 1 run\(s\) still in flight \(a handler that never returns\?\)\.$/,
  );
  expect((await env.client.getRun(runId)).status).toBe('pending');
  open();
  await env.runUntilIdle();
  expect(await env.client.getRun(runId)).toMatchObject({ status: 'completed', output: { wait: { ok: true } } });
});
