import { found, notFound } from 'ledgerflow/runtime';
import { sql, type Kysely } from 'kysely';
import * as generated from '../generated/index.js';
import { auditHandler, insertPayment } from './payments.js';
import type { Shop } from './shop.js';

export interface Payments {
  charge(orderId: string, amountCents: number, options: { idempotencyKey: string }): Promise<{ id: string }>;
}
export interface Mailer {
  send(message: { to: string; reference: string }): Promise<{ id: string }>;
  findByReference(reference: string): Promise<{ id: string } | undefined>;
}
export interface Logger {
  info(message: string): void;
}

function price({ input }: { input: { amountCents: number } }) {
  return { amountCents: input.amountCents };
}

async function sendReceipt(mailer: Mailer, ctx: { key: string; input: { email: string } }) {
  const sent = await mailer.send({ to: ctx.input.email, reference: ctx.key });
  return { messageId: sent.id };
}

export function ordersRegistration(db: Kysely<Shop>, payments: Payments, mailer: Mailer, log: Logger, notifier: { ping(key: string): Promise<void> }) {
  const receipt = {
    perform: (ctx: { key: string; input: { email: string } }) => sendReceipt(mailer, ctx),
    async reconcile({ key }: { key: string }) {
      const first = await mailer.findByReference(key);
      return first === undefined ? notFound() : found({ messageId: first.id });
    },
  };
  const handlers = {
    price,
    // Steps read: the application's db, and ctx.db.
    async loadCustomer(ctx: any) {
      log.info('loading');
      const own = await db.selectFrom('shop.customer').select('name').where('id', '=', ctx.input.orderId).executeTakeFirst();
      const viaContext = await ctx.db.selectFrom('shop.customer').select('name').executeTakeFirst();
      return { name: own?.name ?? viaContext?.name ?? '' };
    },
    charge: {
      async perform({ key: idempotencyKey, input }: any) {
        log.info('charging');
        const charge = await payments.charge(input.orderId, input.amountCents, { idempotencyKey });
        return { chargeId: charge.id };
      },
    },
    record: async (ctx: any) => ctx.record({ paymentId: await insertPayment(ctx.tx, ctx.input.orderId) }),
    async count(ctx: any) {
      const t = ctx.tx;
      await sql`INSERT INTO shop.counter (order_id, n) VALUES (${ctx.input.orderId}, 1)`.execute(t);
      await t.updateTable('shop.counter').set({ n: sql`n + 1` }).where('order_id', '=', ctx.input.orderId).execute();
      return ctx.record({});
    },
    adjust: async ({ tx, input, record }: any) => {
      await tx.deleteFrom('shop.counter').where('order_id', '=', input.orderId).execute();
      return record({});
    },
    audit: auditHandler,
    receipt,
    notify: {
      perform: async (ctx: any) => {
        await notifier.ping(ctx.key);
        return { ok: true };
      },
    },
  };
  return generated.ordersHandlers<Shop>(handlers as any);
}
