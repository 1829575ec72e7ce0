import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const payments = workflow('payments', {
  version: 1,
  input: z.object({ paymentId: z.string(), payer: z.object({ iban: z.string() }).optional(), meta: z.record(z.string(), z.string()) }),
})
  .step('quote', { output: z.object({ quote: z.object({ id: z.string(), rate: z.number() }) }) })
  .external('reserve', {
    output: z.object({ reservationId: z.string() }),
    key: ({ steps }) => 'reserve:' + steps.quote,
    idempotentByKey: true,
  })
  .external('transfer', {
    output: z.object({ transferId: z.string() }),
    key: ({ input }) => 'transfer:' + input.paymentId + ':' + input.payer,
    idempotentByKey: true,
  })
  .external('confirm', {
    output: z.object({ confirmationId: z.string() }),
    key: ({ input, steps: { quote } }) => ['confirm', input.paymentId, quote.quote].join(':'),
    idempotentByKey: true,
  })
  .external('audit', {
    output: z.object({ auditId: z.string() }),
    key: ({ input }) => String(input.meta),
    idempotentByKey: true,
  })
  .external('receipt', {
    output: z.object({ receiptId: z.string() }),
    key: ({ steps }) => {
      const q = steps.quote.quote;
      return `receipt:${q.toString()}`;
    },
    idempotentByKey: true,
  });
