import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { event, workflow } from 'ledgerflow/dsl';
import { changedParts, describeFingerprintPart, fingerprintOf } from '../../runtime/contracts/workflow-fingerprint.js';

/** The fingerprint a worker registers: per part, so that a difference names the step and the part. */
const settled = (payload: z.ZodType) => event('payment.settled', payload);
const declare = (
  options: {
    input?: z.ZodType;
    output?: z.ZodType;
    payload?: z.ZodType;
    extraStep?: boolean;
    idempotent?: boolean;
  } = {},
) => {
  const base = workflow('fp', { version: 1, input: options.input ?? z.object({ orderId: z.string() }) })
    .external('charge', {
      output: options.output ?? z.object({ chargeId: z.string() }),
      key: ({ input }) => `charge:${String((input as { orderId: string }).orderId)}`,
      idempotentByKey: options.idempotent ?? true,
      compensate: {
        name: 'refund',
        output: z.object({ refundId: z.string() }),
        key: ({ input }) => `refund:${String((input as { orderId: string }).orderId)}`,
        idempotentByKey: true,
      },
    })
    .waitFor('settled', {
      event: settled(options.payload ?? z.object({ paid: z.boolean() })),
      match: ({ input }) => String((input as { orderId: string }).orderId),
    });
  return options.extraStep === true ? base.step('audit', { output: z.object({ ok: z.boolean() }) }) : base;
};
const diff = (a: ReturnType<typeof declare>, b: ReturnType<typeof declare>) => {
  const before = fingerprintOf(a).parts;
  const after = fingerprintOf(b).parts;
  return changedParts(before, after).map((id) => describeFingerprintPart(id, before, after));
};

describe('fingerprintOf', () => {
  it('is the same for two loads of the same declaration, whatever the order of object properties', () => {
    expect(fingerprintOf(declare()).hash).toBe(fingerprintOf(declare()).hash);
    const reordered = declare({ output: z.object({ chargeId: z.string(), fee: z.number() }) });
    const again = declare({ output: z.object({ fee: z.number(), chargeId: z.string() }) });
    expect(fingerprintOf(reordered).hash).toBe(fingerprintOf(again).hash);
  });

  it('names each changed part: input, an output, an event payload, a shape, an added step', () => {
    expect(diff(declare(), declare({ input: z.object({ orderId: z.string(), currency: z.string() }) }))).toEqual([
      'the input schema',
    ]);
    expect(diff(declare(), declare({ output: z.object({ chargeId: z.string(), receiptUrl: z.string() }) }))).toEqual([
      'the output schema of step "charge"',
    ]);
    // A waitFor step's output carries the payload too.
    expect(diff(declare(), declare({ payload: z.object({ paid: z.boolean(), at: z.string() }) }))).toEqual([
      'the payload schema of the event of step "settled"',
      'the output schema of step "settled"',
    ]);
    expect(diff(declare(), declare({ idempotent: false }))).toEqual([
      'the kind, idempotentByKey, condition, event, child, queue or compensation of step "charge"',
    ]);
    expect(diff(declare(), declare({ extraStep: true }))).toEqual([
      'step "audit" (new: not in the registered definition)',
      'step "audit" (new: not in the registered definition)',
      'the step list (names, order), queue or compensateOnCancel',
    ]);
  });
});
