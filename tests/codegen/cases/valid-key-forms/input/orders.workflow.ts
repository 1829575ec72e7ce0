import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
import { notifyKey } from './keys.js';

function chargeKey({ input }: { input: { orderId: string } }): string {
  return `charge:${input.orderId}`;
}

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), amountCents: z.number(), email: z.string() }) })
  .transactional('reserve', {
    output: z.object({ reservationId: z.string() }),
    key({ input }) {
      return `reserve:${input.orderId}`;
    },
  })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: chargeKey,
  })
  .external('notify', {
    output: z.object({ messageId: z.string() }),
    key: notifyKey,
  });
