import { describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import {
  event,
  shapeHash,
  workflow,
  type WaitForOutput,
  type WorkflowOutput,
  type WorkflowResult,
} from 'ledgerflow/dsl';

/** Type-level and declaration-time tests of conditions, sleep, waitFor, child and forEach. */
const paymentSettled = event('payment.settled', z.object({ orderId: z.string(), paid: z.boolean() }));

const copyBatch = workflow('copy-batch', { version: 1, input: z.object({ from: z.number(), to: z.number() }) }).step(
  'copy',
  { output: z.object({ copied: z.number() }) },
);

const parent = workflow('parent', {
  version: 1,
  input: z.object({ orderId: z.string(), express: z.boolean() }),
  timeoutMs: 60_000,
})
  .step('plan', { output: z.object({ batches: z.array(z.object({ from: z.number(), to: z.number() })) }) })
  .step('expressOnly', {
    output: z.object({ fee: z.number() }),
    when: ({ input, steps }) => {
      expectTypeOf(steps.plan.batches).toEqualTypeOf<Array<{ from: number; to: number }>>();
      return input.express;
    },
  })
  .sleep('pause', { for: ({ steps }) => (steps.expressOnly === undefined ? 1_000 : 0) })
  .waitFor('settled', { event: paymentSettled, match: ({ input }) => input.orderId, timeoutMs: 5_000 })
  .forEach('copy', {
    items: ({ steps }) => steps.plan.batches,
    key: ({ input, item }) => `${input.orderId}:${item.from}`,
    workflow: copyBatch,
    input: ({ item }) => ({ from: item.from, to: item.to }),
    concurrency: 4,
  })
  .child('one', copyBatch, { key: ({ input }) => `one:${input.orderId}`, input: () => ({ from: 0, to: 1 }) });

describe('wait, branch and compose types', () => {
  it('types skipped steps as possibly undefined and built-in outputs precisely', () => {
    type Out = WorkflowOutput<typeof parent>;
    expectTypeOf<Out['expressOnly']>().toEqualTypeOf<{ fee: number } | undefined>();
    expectTypeOf<Out['plan']>().toEqualTypeOf<{ batches: Array<{ from: number; to: number }> }>();
    expectTypeOf<Out['pause']>().toEqualTypeOf<{ readonly until: string }>();
    expectTypeOf<Out['settled']>().toEqualTypeOf<WaitForOutput<{ orderId: string; paid: boolean }>>();
    expectTypeOf<Out['copy']>().toEqualTypeOf<Array<{ copied: number }>>();
    expectTypeOf<Out['one']>().toEqualTypeOf<{ copied: number }>();
    expectTypeOf<WorkflowResult<typeof copyBatch>>().toEqualTypeOf<{ copied: number }>();
  });

  it('rejects child inputs that do not fit the child schema at compile time', () => {
    workflow('bad-child', { version: 1, input: z.object({ id: z.string() }) }).child('c', copyBatch, {
      key: ({ input }) => input.id,
      // @ts-expect-error from must be a number
      input: () => ({ from: 'a', to: 1 }),
    });
  });

  it('records the new parts in the definition and rejects bad declarations early', () => {
    const steps = parent.steps;
    expect(steps.map((s) => s.kind)).toEqual(['step', 'step', 'sleep', 'waitFor', 'forEach', 'child']);
    expect(typeof steps[1]!.when).toBe('function');
    expect(steps[3]!.wait?.event.name).toBe('payment.settled');
    expect(steps[4]!.fanOut?.concurrency).toBe(4);
    expect(steps[5]!.fanOut?.workflow).toBe(copyBatch);
    expect(parent.timeoutMs).toBe(60_000);
    expect(() => event('Bad Name', z.object({}))).toThrow(/Invalid event name/);
    const base = workflow('w', { version: 1, input: z.object({}) });
    // @ts-expect-error sleep needs for or until
    expect(() => base.sleep('s', {})).toThrow(/exactly one of for/);
    expect(() =>
      base.forEach('f', {
        items: () => [1],
        key: ({ item }) => String(item),
        workflow: copyBatch,
        input: () => ({ from: 1, to: 2 }),
        concurrency: 0,
      }),
    ).toThrow(/concurrency/);
    expect(() => workflow('w', { version: 1, input: z.object({}), timeoutMs: -1 })).toThrow(/timeoutMs/);
  });

  it('keeps the definition hash of plain workflows and changes it for each new part', () => {
    const plain = workflow('h', { version: 1, input: z.object({}) }).step('a', { output: z.object({}) });
    const conditional = workflow('h', { version: 1, input: z.object({}) }).step('a', {
      output: z.object({}),
      when: () => true,
    });
    expect(shapeHash(plain)).not.toBe(shapeHash(conditional));
  });
});
