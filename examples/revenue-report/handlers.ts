import { sql } from 'kysely';
import type { WorkflowRegistration } from 'ledgerflow/runtime';
import { revenueReportHandlers } from '../../generated/contracts/revenue-report.v1.js';
import type { AppDatabase } from '../migrations/app-database.js';
import type { revenueReport } from './revenue-report.workflow.js';

/** `revenue-report` bound to its handler: a read of `shop.payment` through the read-only `ctx.db`. */
export function revenueReportRegistration(): WorkflowRegistration<typeof revenueReport> {
  return revenueReportHandlers<AppDatabase>({
    async sumPayments({ db, input }) {
      const until = new Date(input.until);
      const from = new Date(until.getTime() - 24 * 3_600_000);
      const rows = await db
        .selectFrom('shop.payment')
        .select(['currency', sql<string>`count(*)`.as('payments'), sql<string>`sum(amount_cents)`.as('cents')])
        .where('created_at', '>=', from)
        .where('created_at', '<', until)
        .groupBy('currency')
        .orderBy('currency')
        .execute();
      return {
        from: from.toISOString(),
        until: until.toISOString(),
        currencies: rows.map((r) => ({ currency: r.currency, payments: Number(r.payments), cents: Number(r.cents) })),
      };
    },
  });
}
