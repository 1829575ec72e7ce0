import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

enum Plan {
  Free = 'free',
  Pro = 'pro',
}

export const invoice = workflow('invoice', { version: 1, input: z.object({ accountId: z.string() }) }).step('issue', {
  output: z.object({ invoiceId: z.string() }),
});

export const billing = workflow('billing', {
  version: 1,
  input: z.object({
    accountId: z.string(),
    plan: z.nativeEnum(Plan),
    tier: z.enum(['a', 'b']),
    period: z.union([z.literal('month'), z.literal('year')]),
    seats: z.number().int(),
    trial: z.boolean(),
    billing: z.object({ country: z.string().optional(), vatId: z.string().nullable() }),
  }),
})
  .step('price', { output: z.object({ cents: z.number(), discount: z.object({ code: z.string() }).optional() }), when: ({ input }) => !input.trial })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    when: ({ input }) => !input.trial,
    key: ({ input, steps }) => `charge:${input.accountId}:${input.plan}:${input.tier}:${input.period}:${input.seats * 100 + 1}:${steps.price!.cents}`,
    idempotentByKey: true,
  })
  .external('receipt', {
    output: z.object({ receiptId: z.string() }),
    key: ({ input, steps }) =>
      `receipt:${input.accountId}:${steps.price?.discount?.code ?? 'none'}:${input.billing.country ?? 'xx'}:${input.billing.vatId}:${input.trial ? 'trial' : 'paid'}`,
    idempotentByKey: true,
  })
  .child('issue', invoice, {
    key: ({ input }) => `issue:${input.accountId}:${input.seats > 10 ? 'large' : 'small'}`,
    input: ({ input }) => ({ accountId: input.accountId }),
  });
