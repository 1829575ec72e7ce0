import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

const refund = { name: 'refund', output: z.object({ refundId: z.string() }), key: ({ input }: { input: { orderId: string } }) => `refund:${input.orderId}` };
const names = { void: 'voidPayment' } as const;

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string() }) })
  .step('price', {
    output: z.object({ amountCents: z.number() }),
    // @ts-expect-error -- a step has no effect to undo
    compensate: { name: 'unprice', output: z.object({}), key: ({ input }) => `unprice:${input.orderId}` },
  })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: ({ input }) => `charge:${input.orderId}`,
    idempotentByKey: true,
    compensate: refund,
  })
  .transactional('record', {
    output: z.object({ paymentId: z.string() }),
    key: ({ input }) => `record:${input.orderId}`,
    compensate: { name: names.void, output: z.object({ voided: z.boolean() }), key: ({ input }) => `void:${input.orderId}` },
  });

const cancels = true;

export const refunds = workflow('refunds', { version: 1, input: z.object({ orderId: z.string() }), compensateOnCancel: cancels }).transactional(
  'record',
  { output: z.object({ refundId: z.string() }), key: ({ input }) => `refund:${input.orderId}` },
);
