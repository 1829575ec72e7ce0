import { workflow, event } from 'ledgerflow/dsl';
import { paymentSettled } from '@acme/events';
import { z } from 'zod';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string() }) })
  .waitFor('settled', { event: paymentSettled, match: ({ input }) => input.orderId });

export const refunds = workflow('refunds', { version: 1, input: z.object({ orderId: z.string() }) })
  .waitFor('requested', { event: event('refund.requested', z.object({ orderId: z.string() })), match: ({ input }) => input.orderId });
