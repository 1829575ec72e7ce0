import type { WorkflowStartInput } from 'ledgerflow/dsl';
import type { orderPayment } from '../order-payment/order-payment.workflow.js';

export type DemoOrder = WorkflowStartInput<typeof orderPayment>;

const CATALOGUE = [
  { sku: 'mug', unitPriceCents: 1_200 },
  { sku: 'tee', unitPriceCents: 2_500 },
  { sku: 'cap', unitPriceCents: 1_800 },
  { sku: 'sticker', unitPriceCents: 300 },
] as const;

/** `count` orders whose ids start with `batch`, so several demo runs can share one database. */
export function demoOrders(batch: string, count: number): DemoOrder[] {
  return Array.from({ length: count }, (_, i) => {
    const n = i + 1;
    const first = CATALOGUE[i % CATALOGUE.length]!;
    const second = CATALOGUE[(i + 1) % CATALOGUE.length]!;
    return {
      orderId: `${batch}-${String(n).padStart(2, '0')}`,
      customerId: `cus_${(n % 7) + 1}`,
      email: `customer${n}@example.com`,
      currency: 'eur',
      lines: [
        { sku: first.sku, quantity: 1 + (n % 3), unitPriceCents: first.unitPriceCents },
        { sku: second.sku, quantity: 1, unitPriceCents: second.unitPriceCents },
      ],
    };
  });
}
