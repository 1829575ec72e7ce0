import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

function scoped(kind: string, value: unknown): string {
  return `${kind}:${value}`;
}

const label = ({ id }: { id: unknown }) => 'label:' + id;

export const parcel = workflow('parcel', { version: 1, input: z.object({ sku: z.string() }) }).step('pack', {
  output: z.object({ parcelId: z.string() }),
});

export const shipping = workflow('shipping', {
  version: 1,
  input: z.object({ orderId: z.string(), address: z.object({ street: z.string(), zip: z.string() }), skus: z.array(z.string()) }),
})
  .external('book', {
    output: z.object({ bookingId: z.string() }),
    key: ({ input }) => scoped('book', input.address),
    idempotentByKey: true,
  })
  .external('quote', {
    output: z.object({ quoteId: z.string() }),
    key: ({ input }) => scoped('quote', input.orderId),
    idempotentByKey: true,
  })
  .external('print', {
    output: z.object({ printId: z.string() }),
    key: ({ input }) => label({ id: input.address }),
    idempotentByKey: true,
  })
  .forEach('ship', {
    items: ({ input }) => input.skus.map((sku) => ({ sku })),
    key: ({ input, item }) => `${input.orderId}:${item}`,
    workflow: parcel,
    input: ({ item }) => item,
  });
