import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

const byOrder = ({ input }: { input: { orderId: string } }) => input.orderId;

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), amountCents: z.number() }) })
  .transactional('record', { output: z.object({ paymentId: z.string() }), key: ({ input }) => `record:${input.orderId}` })
  .transactional('audit', { output: z.object({}), key: ({ input }) => `audit:${byOrder({ input })}` })
  .transactional('adjust', { output: z.object({}), key: ({ input }) => `adjust:${input.orderId}` })
  .transactional('count', { output: z.object({}), key: ({ input }) => `count:${input.orderId}` })
  .transactional('archive', { output: z.object({}), key: ({ input }) => `archive:${input.orderId}` })
  .transactional('outbox', { output: z.object({}), key: ({ input }) => `outbox:${input.orderId}` });
