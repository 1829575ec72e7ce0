import { db } from './db.js';

export async function mirrorEntry(ctx: { input: { entryId: string }; record(o: {}): unknown }) {
  await db.insertInto('ledger.mirror').values({ entry_id: ctx.input.entryId }).execute();
  return ctx.record({});
}
