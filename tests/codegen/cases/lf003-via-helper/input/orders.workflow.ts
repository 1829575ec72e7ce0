import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

// Typed loosely on purpose: the type checker cannot see the problem, codegen can.
function reserveKey(ctx: { steps: Record<string, { chargeId?: string }> }): string {
  return `reserve:${ctx.steps.charge?.chargeId}`;
}

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), amountCents: z.number(), email: z.string() }) })
  .transactional('reserve', {
    output: z.object({ reservationId: z.string() }),
    key: (ctx) => reserveKey(ctx),
  })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: ({ input }) => `charge:${input.orderId}`,
  });
