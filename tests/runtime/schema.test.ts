import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { describeStores } from '../support/describe-stores.js';
import { declaredTables, schemaDrift } from '../support/schema-drift.js';

describe('runtime/store/tables.ts as read for the schema check', () => {
  it('maps every LedgerflowDatabase key to its interface and sees `| null` as nullable', () => {
    const tables = declaredTables();
    expect([...tables.keys()]).toContain('ledgerflow.workflow_run');
    const run = tables.get('ledgerflow.workflow_run')!;
    expect(run.interfaceName).toBe('WorkflowRunTable');
    expect(run.columns.get('dedupe_key')).toBe(true);
    expect(run.columns.get('status')).toBe(false);
    expect(tables.get('ledgerflow.step_attempt')!.columns.get('finished_at')).toBe(true);
  });
});

describeStores('core schema vs runtime/store/tables.ts', (getStore) => {
  it('has the same tables, columns and nullability in the migrated database as in the Kysely types', async () => {
    expect(await schemaDrift(getStore()), 'change runtime/store/tables.ts to match the core migrations').toEqual([]);
  });

  it('names the column a core migration added without tables.ts, and a changed nullability', async () => {
    const store = getStore();
    // As a new core migration would; rolled back, so the database stays as migrated.
    const problems = await store.db
      .transaction()
      .execute(async (trx) => {
        await sql`ALTER TABLE ledgerflow.workflow_run ADD COLUMN sort_weight integer NOT NULL DEFAULT 0`.execute(trx);
        await sql`ALTER TABLE ledgerflow.step_effect ALTER COLUMN request_hash DROP NOT NULL`.execute(trx);
        const seen = await schemaDrift({ ...store, db: trx });
        throw Object.assign(new Error('rollback'), { seen });
      })
      .catch((error: { seen?: string[] }) => {
        if (error.seen === undefined) throw error;
        return error.seen;
      });
    expect(problems).toEqual([
      'ledgerflow.step_effect.request_hash: nullable in the database, but its type in StepEffectTable has no `| null`',
      'ledgerflow.workflow_run.sort_weight: column in the database but not in WorkflowRunTable in runtime/store/tables.ts',
    ]);
    expect(await schemaDrift(store)).toEqual([]);
  });
});
