import type { Kysely } from 'kysely';
import { refundHandlers } from './generated/contracts/refund.v1.js';

interface Shop {
  'shop.payment': { order_id: string; charge_id: string };
}
export interface PaymentsApi {
  refunds: { create(chargeId: string, amountCents: number, options: { idempotencyKey: string }): Promise<{ id: string }> };
}
export interface Logger {
  info(message: string): void;
}

export function refundRegistration(db: Kysely<Shop>, services: { payments: PaymentsApi; log: Logger }) {
  const { payments } = services;
  return refundHandlers<Shop>({
    findCharge: async ({ input }) => {
      services.log.info(`looking up ${input.orderId}`);
      const payment = await db.selectFrom('shop.payment').select('charge_id').where('order_id', '=', input.orderId).executeTakeFirstOrThrow();
      return { chargeId: payment.charge_id };
    },
    // Runs at least once: a second run refunds again, with a key nobody dedupes on.
    preview: async ({ input, steps }) => {
      const refunded = await payments.refunds.create(steps.findCharge.chargeId, input.amountCents, { idempotencyKey: `preview:${input.orderId}` });
      return { refundId: refunded.id };
    },
    rates: async () => {
      const response = await fetch('https://rates.example.com/eur');
      return (await response.json()) as { rate: number };
    },
    refundCharge: {
      async perform({ key, input, steps }) {
        services.log.info(`refunding ${input.orderId}`);
        const refunded = await services.payments.refunds.create(steps.findCharge.chargeId, input.amountCents, { idempotencyKey: key });
        return { refundId: refunded.id };
      },
    },
  });
}
