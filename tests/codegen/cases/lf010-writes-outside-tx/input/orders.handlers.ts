import { sql, type Kysely } from 'kysely';
import type pg from 'pg';
import { ordersHandlers } from './generated/contracts/orders.v1.js';
import { enqueue } from './repository.js';

interface Shop {
  'shop.payment': { id: string; order_id: string };
  'shop.audit': { order_id: string };
}

async function archiveOrder(database: Kysely<Shop>, orderId: string): Promise<void> {
  await database.deleteFrom('shop.payment').where('order_id', '=', orderId).execute();
}

export function ordersRegistration(db: Kysely<Shop>, pool: pg.Pool) {
  return ordersHandlers<Shop>({
    record: async (ctx) => {
      await db.insertInto('shop.payment').values({ id: `pay_${ctx.input.orderId}`, order_id: ctx.input.orderId }).execute();
      return ctx.record({ paymentId: `pay_${ctx.input.orderId}` });
    },
    async audit(ctx) {
      await db.transaction().execute(async (trx) => {
        await trx.insertInto('shop.audit').values({ order_id: ctx.input.orderId }).execute();
      });
      return ctx.record({});
    },
    adjust: async ({ input, record }) => {
      await sql`UPDATE shop.payment SET amount_cents = ${input.amountCents} WHERE order_id = ${input.orderId}`.execute(db);
      return record({});
    },
    count: async (ctx) => {
      const client = await pool.connect();
      try {
        await client.query('INSERT INTO shop.counter (order_id) VALUES ($1)', [ctx.input.orderId]);
      } finally {
        client.release();
      }
      await pool.query(`UPDATE shop.counter SET n = n + 1`);
      return ctx.record({});
    },
    archive: async (ctx) => {
      await archiveOrder(db, ctx.input.orderId);
      return ctx.record({});
    },
    outbox: async (ctx) => {
      await enqueue(ctx.input.orderId);
      return ctx.record({});
    },
  });
}
