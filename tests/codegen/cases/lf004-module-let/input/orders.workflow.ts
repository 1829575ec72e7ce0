import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

let attempt = 0;
export function nextAttempt(): number {
  attempt += 1;
  return attempt;
}

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), amountCents: z.number(), email: z.string() }) })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: ({ input }) => `charge:${input.orderId}:${attempt}`,
  });
