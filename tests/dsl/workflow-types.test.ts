import { describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import {
  shapeHash,
  workflow,
  type KeyContext,
  type StepSpec,
  type WorkflowInput,
  type WorkflowOutput,
  type WorkflowStartInput,
  type WorkflowStepName,
  type WorkflowStepSpec,
} from 'ledgerflow/dsl';

/**
 * Type-level tests of the DSL: checked by `npm run typecheck` (tsconfig includes tests/), with
 * `@ts-expect-error` marking what must not compile, and run by vitest for the run-time half.
 */
const input = z.object({ orderId: z.string(), amountCents: z.number().int(), note: z.string().default('') });

const payment = workflow('payment', { version: 1, input })
  .step('load', { output: z.object({ customerId: z.string() }) })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: ({ input, steps }) => {
      expectTypeOf(input).toEqualTypeOf<{ orderId: string; amountCents: number; note: string }>();
      // Only the steps declared before this one are visible.
      expectTypeOf(steps).toEqualTypeOf<{ readonly load: { customerId: string } }>();
      return `charge:${input.orderId}:${steps.load.customerId}`;
    },
    idempotentByKey: true,
  })
  .transactional('record', {
    output: z.object({ paymentId: z.string() }),
    key: ({ steps }) => `record:${steps.charge.chargeId}`,
    request: ({ input, steps }) => ({ amountCents: input.amountCents, chargeId: steps.charge.chargeId }),
  });

describe('workflow types', () => {
  it('infers input, start input, outputs and step specs end to end', () => {
    expectTypeOf<WorkflowInput<typeof payment>>().toEqualTypeOf<{
      orderId: string;
      amountCents: number;
      note: string;
    }>();
    expectTypeOf<WorkflowStartInput<typeof payment>>().toEqualTypeOf<{
      orderId: string;
      amountCents: number;
      note?: string | undefined;
    }>();
    expectTypeOf<WorkflowOutput<typeof payment>>().toEqualTypeOf<{
      readonly load: { customerId: string };
      readonly charge: { chargeId: string };
      readonly record: { paymentId: string };
    }>();
    expectTypeOf<WorkflowStepName<typeof payment>>().toEqualTypeOf<'load' | 'charge' | 'record'>();
    expectTypeOf<WorkflowStepSpec<typeof payment, 'charge'>>().toEqualTypeOf<
      StepSpec<'external', { chargeId: string }, { readonly load: { customerId: string } }, true>
    >();
    expectTypeOf<WorkflowStepSpec<typeof payment, 'record'>['prior']>().toEqualTypeOf<{
      readonly load: { customerId: string };
      readonly charge: { chargeId: string };
    }>();
    expectTypeOf<WorkflowStepSpec<typeof payment, 'record'>['idempotentByKey']>().toEqualTypeOf<false>();
  });

  it('exposes only earlier steps to a key', () => {
    const base = workflow('order', { version: 1, input }).step('load', { output: z.object({ id: z.string() }) });
    const build = () =>
      base.external('charge', {
        output: z.object({ chargeId: z.string() }),
        // @ts-expect-error -- a key cannot read its own step's output
        key: ({ steps }) => `charge:${steps.charge.chargeId}`,
      });
    const later = () =>
      base
        .transactional('reserve', {
          output: z.object({ reservationId: z.string() }),
          // @ts-expect-error -- nor a step declared after it
          key: ({ steps }) => `reserve:${steps.ship.trackingId}`,
        })
        .external('ship', {
          output: z.object({ trackingId: z.string() }),
          key: ({ input }) => `ship:${input.orderId}`,
        });
    expectTypeOf<Parameters<typeof base.external<'charge', z.ZodString>>[1]['key']>().toEqualTypeOf<
      (ctx: KeyContext<z.output<typeof input>, { readonly load: { id: string } }>) => string
    >();
    // At run time the DSL does not stop these (codegen's LF003 does); they still build.
    expect(build().steps.map((s) => s.name)).toEqual(['load', 'charge']);
    expect(later().steps.map((s) => s.name)).toEqual(['load', 'reserve', 'ship']);
  });

  it('rejects a duplicate step name, at compile time and at run time', () => {
    const base = workflow('dup', { version: 1, input }).step('load', { output: z.object({ id: z.string() }) });
    // @ts-expect-error -- step "load" is already declared in this workflow
    expect(() => base.step('load', { output: z.object({ id: z.string() }) })).toThrow(/Duplicate step name.*"load"/);
  });

  it('rejects an effect step without a key, at compile time and at run time', () => {
    const base = workflow('nokey', { version: 1, input });
    // @ts-expect-error -- transactional steps need a key
    expect(() => base.transactional('reserve', { output: z.object({ id: z.string() }) })).toThrow(/Missing key.*LF001/);
    // @ts-expect-error -- external steps need a key
    expect(() => base.external('charge', { output: z.object({ id: z.string() }) })).toThrow(/Missing key.*LF001/);
    // @ts-expect-error -- a plain step has no key
    base.step('load', { output: z.object({ id: z.string() }), key: () => 'x' });
  });

  it('rejects keys that do not return a string and idempotentByKey on transactional steps', () => {
    const base = workflow('bad', { version: 1, input });
    // @ts-expect-error -- a key returns a string
    base.external('charge', { output: z.object({ id: z.string() }), key: ({ input }) => input.amountCents });
    // @ts-expect-error -- only an external provider can dedupe by key
    base.transactional('reserve', { output: z.object({ id: z.string() }), key: () => 'k', idempotentByKey: true });
  });
});

describe('workflow run-time data', () => {
  it('records each step with position, kind, retry policy and a working key function', () => {
    expect(payment.steps.map((s) => [s.name, s.kind, s.position, s.idempotentByKey])).toEqual([
      ['load', 'step', 0, false],
      ['charge', 'external', 1, true],
      ['record', 'transactional', 2, false],
    ]);
    const charge = payment.steps[1]!;
    expect(charge.key?.({ input: { orderId: 'o1' }, steps: { load: { customerId: 'c9' } } })).toBe('charge:o1:c9');
    expect(charge.retry.maxAttempts).toBe(3);
    expect(payment.steps[2]!.request?.({ input: { amountCents: 5 }, steps: { charge: { chargeId: 'ch' } } })).toEqual({
      amountCents: 5,
      chargeId: 'ch',
    });
    expect(Object.isFrozen(payment)).toBe(true);
  });

  it('hashes the shape: stable for the same steps, different when a step changes', () => {
    const again = workflow('payment', { version: 1, input })
      .step('load', { output: z.object({ other: z.number() }) })
      .external('charge', { output: z.object({}), key: () => 'k', idempotentByKey: true })
      .transactional('record', { output: z.object({}), key: () => 'k' });
    expect(shapeHash(again)).toBe(shapeHash(payment));
    const changed = workflow('payment', { version: 1, input })
      .step('load', { output: z.object({}) })
      .external('charge', { output: z.object({}), key: () => 'k' })
      .transactional('record', { output: z.object({}), key: () => 'k' });
    expect(shapeHash(changed)).not.toBe(shapeHash(payment));
  });

  it('rejects invalid names and versions with a message that says what to use', () => {
    expect(() => workflow('Payment', { version: 1, input })).toThrow(/lower-case letters/);
    expect(() => workflow('payment', { version: 0, input })).toThrow(/integer >= 1/);
  });
});
