import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
import { paymentSettled } from './events.js';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string() }) })
  .waitFor('settled', {
    event: paymentSettled,
    match: ({ input }) => `${input.orderId}:${Math.random()}`,
    timeoutMs: 60_000,
  });
