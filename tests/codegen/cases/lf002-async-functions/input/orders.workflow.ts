import { event, workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const paid = event('order.paid', z.object({ orderId: z.string() }));

async function shipKey({ input }: { input: { orderId: string } }): Promise<string> {
  return `ship:${input.orderId}`;
}

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), vip: z.boolean() }) })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: async ({ input }) => `charge:${input.orderId}`,
    idempotentByKey: true,
    compensate: {
      name: 'refund',
      output: z.object({ refundId: z.string() }),
      key: async function ({ steps }) {
        return `refund:${steps.charge.chargeId}`;
      },
      idempotentByKey: true,
    },
  })
  .waitFor('settled', { event: paid, match: async ({ input }) => input.orderId, when: async ({ input }) => input.vip })
  .external('ship', {
    output: z.object({ shipmentId: z.string() }),
    key: shipKey,
    idempotentByKey: true,
  });
