import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

const chargeConfig = { key: ({ input }: { input: { orderId: string } }) => `charge:${input.orderId}` };

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), amountCents: z.number(), email: z.string() }) })
  .external('charge', {
    ...chargeConfig,
    output: z.object({ chargeId: z.string() }),
  });
