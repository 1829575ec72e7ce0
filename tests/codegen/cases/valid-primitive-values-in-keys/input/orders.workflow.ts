import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

const Currency = z.enum(['eur', 'usd']);

export const shipment = workflow('shipment', { version: 1, input: z.object({ sku: z.string() }) }).step('pack', {
  output: z.object({ parcelId: z.string() }),
});

export const orders = workflow('orders', {
  version: 1,
  input: z.object({
    orderId: z.string(),
    amountCents: z.number().int(),
    big: z.bigint(),
    express: z.boolean(),
    currency: Currency,
    kind: z.literal('retail').or(z.literal('wholesale')),
    placedAt: z.coerce.date(),
    tags: z.array(z.string()),
    skus: z.array(z.string()).min(1),
    lines: z.array(z.object({ sku: z.string(), qty: z.number() })),
    note: z.string().optional(),
  }),
})
  .step('price', { output: z.object({ totalCents: z.number(), currency: Currency, quote: z.object({ id: z.uuid() }) }) })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: ({ input, steps }) => `charge:${input.orderId}:${input.amountCents}:${steps.price.totalCents}:${steps.price.currency}`,
    idempotentByKey: true,
  })
  .external('capture', {
    output: z.object({ captureId: z.string() }),
    key: ({ input, steps }) => 'capture:' + input.orderId + ':' + steps.charge.chargeId + ':' + input.big + ':' + input.express,
    idempotentByKey: true,
  })
  .external('invoice', {
    output: z.object({ invoiceId: z.string() }),
    key: ({ input, steps }) => [input.kind, input.orderId, steps.price.quote.id, input.placedAt.toISOString().slice(0, 4)].join(':'),
    idempotentByKey: true,
  })
  .external('ledger', {
    output: z.object({ entryId: z.string() }),
    key: ({ input }) => `ledger:${input.placedAt.toISOString()}:${input.tags.join(',')}:${input.tags}:${input.lines.length}:${input.note}`,
    idempotentByKey: true,
  })
  .external('audit', {
    output: z.object({ auditId: z.string() }),
    key: ({ input }) => `audit:${JSON.stringify({ id: input.orderId })}:${String(input.amountCents)}:${input.amountCents.toString()}`,
    idempotentByKey: true,
  })
  .forEach('ship', {
    items: ({ input }) => input.skus,
    key: ({ input, item }) => `${input.orderId}:${item}`,
    workflow: shipment,
    input: ({ item }) => ({ sku: item }),
  })
  .forEach('shipLines', {
    items: ({ input }) => input.lines,
    key: ({ input, item, index }) => `${input.orderId}:${item.sku}:${index}`,
    workflow: shipment,
    input: ({ item }) => ({ sku: item.sku }),
  });
