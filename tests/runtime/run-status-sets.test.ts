import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import {
  CANCELLABLE_RUN_STATUSES,
  DUE_RUN_STATUSES,
  ENDED_UNCOMPLETED_RUN_STATUSES,
  RECONCILER_CLAIMABLE_RUN_STATUSES,
  RETRYABLE_RUN_STATUSES,
  RUN_TRANSITIONS,
  runStatusIn,
  SETTLED_RUN_STATUSES,
  sqlStatusList,
} from '../../runtime/store/state-machines.js';
import { FINAL_RUN_STATUSES, RUN_STATUSES, type RunStatus } from '../../runtime/store/tables.js';
import { describeStores } from '../support/describe-stores.js';
import { compileOnly } from './fixtures/sql-statements.js';

// The run-status sets of runtime/store/state-machines.ts (and FINAL_RUN_STATUSES of tables.ts)
// against the run machine they sit beside, and against what the migrated database enforces with
// the same lists: a set edited without the other side fails here.

const sorted = (statuses: readonly string[]): string[] => [...statuses].sort();
const from = (status: RunStatus): readonly RunStatus[] => RUN_TRANSITIONS[status];

describe('the run-status sets agree with the run machine', () => {
  it('lists every status of the machine once in RUN_STATUSES, and each set only those', () => {
    expect(sorted(RUN_STATUSES)).toEqual(sorted(Object.keys(RUN_TRANSITIONS).filter((s) => s !== 'none')));
    expect(new Set(RUN_STATUSES).size).toBe(RUN_STATUSES.length);
    const sets = {
      FINAL_RUN_STATUSES,
      CANCELLABLE_RUN_STATUSES,
      RETRYABLE_RUN_STATUSES,
      ENDED_UNCOMPLETED_RUN_STATUSES,
      SETTLED_RUN_STATUSES,
      DUE_RUN_STATUSES,
      RECONCILER_CLAIMABLE_RUN_STATUSES,
    };
    for (const [name, set] of Object.entries(sets)) {
      expect(set.length, name).toBeGreaterThan(0);
      expect(new Set(set).size, `${name} lists a status twice`).toBe(set.length);
      for (const status of set) expect(RUN_STATUSES, name).toContain(status);
    }
  });

  it('splits the statuses into final and cancellable: a run is one or the other', () => {
    expect(sorted([...FINAL_RUN_STATUSES, ...CANCELLABLE_RUN_STATUSES])).toEqual(sorted(RUN_STATUSES));
    for (const status of CANCELLABLE_RUN_STATUSES) expect(FINAL_RUN_STATUSES).not.toContain(status);
  });

  it('has the runtime leave no final status: only an operator retry takes the retryable ones to pending', () => {
    for (const status of FINAL_RUN_STATUSES) {
      expect(from(status), status).toEqual(runStatusIn(RETRYABLE_RUN_STATUSES, status) ? ['pending'] : []);
    }
    expect(sorted(RETRYABLE_RUN_STATUSES)).toEqual(sorted(FINAL_RUN_STATUSES.filter((s) => from(s).length > 0)));
  });

  it('cancels from exactly the statuses with a transition into cancelled, and compensates from them (into pending)', () => {
    expect(sorted(CANCELLABLE_RUN_STATUSES)).toEqual(sorted(RUN_STATUSES.filter((s) => from(s).includes('cancelled'))));
    for (const status of CANCELLABLE_RUN_STATUSES) expect(from(status), status).toContain('pending');
  });

  it('reaches a final status from every other one', () => {
    for (const start of CANCELLABLE_RUN_STATUSES) {
      const seen = new Set<RunStatus>([start]);
      const queue: RunStatus[] = [start];
      for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
        for (const to of from(next)) if (!seen.has(to)) queue.push(seen.add(to) && to);
      }
      expect(
        [...seen].some((s) => runStatusIn(FINAL_RUN_STATUSES, s)),
        start,
      ).toBe(true);
    }
  });

  it('derives the other sets from the final ones', () => {
    expect(sorted(ENDED_UNCOMPLETED_RUN_STATUSES)).toEqual(sorted(FINAL_RUN_STATUSES.filter((s) => s !== 'completed')));
    expect(sorted(SETTLED_RUN_STATUSES)).toEqual(sorted([...FINAL_RUN_STATUSES, 'needs_reconciliation']));
  });

  it('claims (worker and reconciler) only from statuses with a transition into running, and not from a final one', () => {
    for (const status of [...DUE_RUN_STATUSES, ...RECONCILER_CLAIMABLE_RUN_STATUSES]) {
      expect(from(status), status).toContain('running');
      expect(FINAL_RUN_STATUSES).not.toContain(status);
    }
    // `running` is taken over only under an expired lease, by its own clause, never as due.
    expect(DUE_RUN_STATUSES).not.toContain('running');
    expect(RECONCILER_CLAIMABLE_RUN_STATUSES).not.toContain('running');
  });
});

describe('sqlStatusList and runStatusIn', () => {
  const dummyDb = compileOnly();
  it('renders a set as the literal SQL list of the statements (and their snapshots)', () => {
    expect(sql`status IN (${sqlStatusList(DUE_RUN_STATUSES)})`.compile(dummyDb).sql).toBe(
      "status IN ('pending', 'waiting')",
    );
    expect(sql`${sqlStatusList(ENDED_UNCOMPLETED_RUN_STATUSES)}`.compile(dummyDb).sql).toBe(
      "'cancelled', 'failed', 'compensated', 'compensation_failed'",
    );
    expect(sql`${sqlStatusList(FINAL_RUN_STATUSES)}`.compile(dummyDb).parameters).toEqual([]);
  });

  it('refuses an empty list and anything that is not a status name', () => {
    expect(() => sqlStatusList([])).toThrow('sqlStatusList: an empty status list');
    expect(() => sqlStatusList(["pending') OR ('1' = '1"])).toThrow(/is not a status/);
  });

  it('tells membership', () => {
    expect(runStatusIn(SETTLED_RUN_STATUSES, 'needs_reconciliation')).toBe(true);
    expect(runStatusIn(SETTLED_RUN_STATUSES, 'waiting')).toBe(false);
  });
});

describeStores('the run-status sets agree with the migrated database', (getStore) => {
  /** The quoted statuses of a catalog text, in order (`'pending'::text` and the like). */
  const statusesIn = (text: string): string[] => [...text.matchAll(/'([a-z_]+)'/g)].map((m) => m[1]!);

  async function one(query: ReturnType<typeof sql<{ def: string }>>): Promise<string> {
    const { rows } = await query.execute(getStore().db);
    expect(rows).toHaveLength(1);
    return rows[0]!.def;
  }
  async function checksOf(table: string): Promise<string[]> {
    const { rows } = await sql<{ def: string }>`SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint
                                                 WHERE conrelid = ${table}::regclass AND contype = 'c'`.execute(
      getStore().db,
    );
    return rows.map((r) => r.def);
  }
  const constraint = (table: string, name: string) =>
    one(
      sql<{
        def: string;
      }>`SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conrelid = ${table}::regclass AND conname = ${name}`,
    );
  const index = (name: string) =>
    one(sql<{ def: string }>`SELECT pg_get_indexdef(${`ledgerflow.${name}`}::regclass) AS def`);
  const trigger = (name: string) =>
    one(
      sql<{
        def: string;
      }>`SELECT pg_get_triggerdef(oid) AS def FROM pg_trigger WHERE tgrelid = 'ledgerflow.workflow_run'::regclass AND tgname = ${name}`,
    );

  it('RUN_STATUSES is the status check; FINAL_RUN_STATUSES the finished_at check, the finished index and the tombstone check', async () => {
    expect(statusesIn(await constraint('ledgerflow.workflow_run', 'workflow_run_status_check'))).toEqual([
      ...RUN_STATUSES,
    ]);
    expect(statusesIn(await constraint('ledgerflow.workflow_run', 'workflow_run_finished_check'))).toEqual([
      ...FINAL_RUN_STATUSES,
    ]);
    expect(statusesIn(await index('workflow_run_finished_idx'))).toEqual([...FINAL_RUN_STATUSES]);
    const archive = (await checksOf('ledgerflow.run_archive')).filter((d) => d.includes('status'));
    expect(archive.map((d) => sorted(statusesIn(d)))).toEqual([sorted(FINAL_RUN_STATUSES)]);
  });

  it('DUE_RUN_STATUSES is the due index; SETTLED_RUN_STATUSES what wakes a waitForRun; ENDED_UNCOMPLETED what a parent counts as a failed child', async () => {
    expect(statusesIn(await index('workflow_run_due_idx'))).toEqual([...DUE_RUN_STATUSES]);
    expect(sorted(statusesIn(await trigger('workflow_run_settled_notify')))).toEqual(sorted(SETTLED_RUN_STATUSES));
    expect(sorted(statusesIn(await trigger('workflow_run_settled')))).toEqual(sorted(FINAL_RUN_STATUSES));
    const source = await one(
      sql<{ def: string }>`SELECT prosrc AS def FROM pg_proc WHERE oid = 'ledgerflow.run_settled'::regproc`,
    );
    const failedChild = /IF NEW\.status IN \(([^)]*)\) THEN/.exec(source);
    expect(failedChild, 'run_settled counts failed children with IF NEW.status IN (…)').not.toBeNull();
    expect(sorted(statusesIn(failedChild![1]!))).toEqual(sorted(ENDED_UNCOMPLETED_RUN_STATUSES));
  });
});
