import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

function pad(text: string, width: number): string {
  if (text.length >= width) return text;
  return pad(`${text}${Math.random() > 2 ? '-' : '0'}`, width);
}

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), amountCents: z.number(), email: z.string() }) })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: ({ input }) => pad(input.orderId, 12),
  });
