import { event, workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
import { events } from './events.js';

const returnReceived = event('return.received', z.object({ orderId: z.string() }));

export const returns = workflow('returns', { version: 1, input: z.object({ orderId: z.string() }) })
  .waitFor('refunded', { event: events.refundIssued, match: ({ input }) => input.orderId });

export const restock = workflow('restock', { version: 1, input: z.object({ orderId: z.string() }) })
  .waitFor('received', { event: returnReceived, match: ({ input }) => input.orderId });
