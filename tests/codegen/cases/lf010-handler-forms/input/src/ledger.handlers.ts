import { ledgerHandlers as bind } from '../generated/index.js';
import { db } from './db.js';
import { mirrorEntry } from './mirror.js';

async function post(ctx: any) {
  await db.insertInto('ledger.entry').values({ id: ctx.input.entryId }).execute();
  return ctx.record({});
}

const close = async ({ input, record }: any) => {
  await db.updateTable('ledger.entry').set({ closed: true }).where('id', '=', input.entryId).execute();
  return record({});
};

const handlers = { post, mirror: mirrorEntry, close };

export const registration = bind(handlers);
