import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

function suffix(): string {
  return Math.random().toString(36).slice(2);
}

function outerKey(orderId: string): string {
  return `charge:${orderId}:${suffix()}`;
}

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), amountCents: z.number(), email: z.string() }) })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: ({ input }) => outerKey(input.orderId),
  });
