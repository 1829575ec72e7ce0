import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

const normalize = (value: string): string => value.trim().toLowerCase();

function joinKey(...parts: string[]): string {
  return parts.map((p) => p.replaceAll(':', '_')).join(':');
}

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), amountCents: z.number(), email: z.string() }) })
  .step('load', { output: z.object({ customerId: z.string() }) })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: ({ input, steps }) => {
      const part = (value: string) => normalize(value);
      return joinKey('charge', part(input.orderId), part(steps.load.customerId));
    },
  });
