import { event, workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
import { paymentSettled, refundIssued } from './events.js';

export const settled = event('payment.settled', z.object({ orderId: z.string(), paid: z.boolean() }));

export const refundIssuedToo = event('refund-issued', z.object({ orderId: z.string() }));

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string() }) })
  .waitFor('paid', { event: paymentSettled, match: ({ input }) => input.orderId })
  .waitFor('paidAgain', { event: settled, match: ({ input }) => input.orderId })
  .waitFor('refunded', { event: refundIssued, match: ({ input }) => input.orderId })
  .waitFor('refundedAgain', { event: refundIssuedToo, match: ({ input }) => input.orderId });
