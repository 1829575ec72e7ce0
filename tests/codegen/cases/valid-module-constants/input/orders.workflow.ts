import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

const PREFIX = 'order';
const SEPARATOR = `:` as const;
const KINDS = { charge: 'ch' } as const;
const LIMITS = Object.freeze({ max: 10 });

enum Region {
  Eu = 'eu',
}

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), amountCents: z.number(), email: z.string() }) })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: ({ input }) => `${PREFIX}${SEPARATOR}${KINDS.charge}${SEPARATOR}${LIMITS.max}:${Region.Eu}:${input.orderId}`,
  });
