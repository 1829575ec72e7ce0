import type { Kysely } from 'kysely';
import { ordersHandlers } from './generated/contracts/orders.v1.js';

interface Shop {
  'shop.payment': { id: string; order_id: string };
}

export interface Payments {
  charge(orderId: string, options: { idempotencyKey: string }): Promise<{ id: string }>;
  refund(chargeId: string): Promise<{ id: string }>;
}

export function ordersRegistration(db: Kysely<Shop>, payments: Payments) {
  return ordersHandlers<Shop>({
    record: async (ctx) => {
      await ctx.tx.insertInto('shop.payment').values({ id: `pay_${ctx.input.orderId}`, order_id: ctx.input.orderId }).execute();
      return ctx.record({ paymentId: `pay_${ctx.input.orderId}` });
    },
    unrecord: async (ctx) => {
      await db.deleteFrom('shop.payment').where('order_id', '=', ctx.input.orderId).execute();
      return ctx.record({ deleted: true });
    },
    charge: {
      perform: async ({ key, input }) => ({ chargeId: (await payments.charge(input.orderId, { idempotencyKey: key })).id }),
    },
    refund: {
      perform: async ({ steps }) => ({ refundId: (await payments.refund(steps.charge.chargeId)).id }),
    },
  });
}
