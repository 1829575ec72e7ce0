import type { ColumnType, Generated } from 'kysely';

/**
 * Kysely types of the example application's own tables (`0001_shop.sql`, `0002_backfill.sql`,
 * `0003_order_cancellation.sql`).
 * Handlers receive `ctx.tx` as `Transaction<AppDatabase>`: the same transaction ledgerflow
 * commits its ledger row in, seen through the application's table types.
 */
// A type alias, not an interface: Kysely's `withTables<T>()` needs the implicit index signature.
export type AppDatabase = {
  'shop.payment': {
    id: string;
    order_id: string;
    charge_id: string;
    amount_cents: number;
    currency: string;
    created_at: Generated<Date>;
  };
  'shop.revenue': {
    currency: string;
    total_cents: number;
    payments: number;
  };
  'shop.order_cancellation': {
    order_id: string;
    reason: string;
    cancelled_at: Generated<Date>;
  };
  'shop.customer': {
    id: string;
    email: string;
    display_name: string;
    plan: 'free' | 'pro';
    created_at: Generated<Date>;
  };
  'legacy.account': {
    id: number;
    email: string;
    // numeric arrives as a string from both drivers; written as a number or string.
    balance_euros: ColumnType<string, string | number, string | number>;
  };
  'billing.account': {
    id: number;
    email: string;
    balance_cents: number;
  };
  'billing.backfill_progress': {
    job: string;
    rows_copied: number;
    batches: number;
  };
};
