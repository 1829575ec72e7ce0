import type { Transaction } from 'kysely';
import type { Shop } from './shop.js';

/** Handlers may live in their own modules and take the transaction as a parameter. */
export async function insertPayment(tx: Transaction<Shop>, orderId: string): Promise<string> {
  const id = `pay_${orderId}`;
  await tx.withSchema('shop').insertInto('payment').values({ id, order_id: orderId }).execute();
  return id;
}

export const auditHandler = async (ctx: { tx: Transaction<Shop>; input: { orderId: string }; record(o: {}): unknown }) => {
  const { tx } = ctx;
  await tx.insertInto('shop.audit').values({ order_id: ctx.input.orderId }).execute();
  return ctx.record({});
};
