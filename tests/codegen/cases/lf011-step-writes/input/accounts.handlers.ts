import { sql, type Kysely } from 'kysely';
import type pg from 'pg';
import { accountsHandlers } from './generated/contracts/accounts.v2.js';

interface Bank {
  'bank.account': { id: string; balance_cents: number; seen_at: string };
}

function markSeen(db: Kysely<Bank>, id: string) {
  return db.updateTable('bank.account').set({ seen_at: 'now' }).where('id', '=', id).execute();
}

export const accountsRegistration = (db: Kysely<Bank>, pool: pg.Pool) =>
  accountsHandlers<Bank>({
    // Reads only: fine.
    load: async ({ input }) => {
      const row = await db.selectFrom('bank.account').select('balance_cents').where('id', '=', input.accountId).executeTakeFirstOrThrow();
      return { balanceCents: row.balance_cents };
    },
    touch: async ({ input }) => {
      await markSeen(db, input.accountId);
      await sql`update bank.account set seen_at = now() where id = ${input.accountId}`.execute(db);
      return {};
    },
    cleanup: async ({ input }) => {
      await pool.query('DELETE FROM bank.session WHERE account_id = $1', [input.accountId]);
      return {};
    },
    // A transaction opened to read a consistent snapshot writes nothing.
    snapshot: async ({ input }) =>
      db.transaction().execute(async (trx) => {
        const row = await trx.selectFrom('bank.account').select('balance_cents').where('id', '=', input.accountId).executeTakeFirstOrThrow();
        return { balanceCents: row.balance_cents };
      }),
  });
