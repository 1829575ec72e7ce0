import { event, workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const paid = event('order.paid', z.object({ orderId: z.string() }));

export const shipment = workflow('shipment', { version: 1, input: z.object({ orderId: z.string() }) }).step('pack', {
  output: z.object({ parcelId: z.string() }),
});

export const orders = workflow('orders', { version: 1, input: z.object({ order: z.object({ id: z.string() }), gift: z.boolean() }) })
  .step('wrap', { output: z.object({ wrapId: z.string() }), when: ({ input }) => input.gift })
  .waitFor('settled', { event: paid, match: ({ input }) => `${input.order}` })
  .child('ship', shipment, {
    key: ({ input, steps }) => `ship:${input.order.id}:${steps.wrap.wrapId}`,
    input: ({ input }) => ({ orderId: input.order.id }),
  })
  .child('reship', shipment, {
    key: ({ input }) => 'reship:' + input.order,
    input: ({ input }) => ({ orderId: input.order.id }),
  });
