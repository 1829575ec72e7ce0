import { sql, type RawBuilder } from 'kysely';
import { describe, expect, it } from 'vitest';
import { flattened, shapeOf, type Shape } from '../../runtime/store/statement-shapes.js';
import { advanceRunsStatement, advanceRunStatement } from '../../runtime/worker/step-commits.js';
import type { AdvanceParams } from '../../runtime/worker/result-commit.js';
import { insertRunStatement } from '../../runtime/client/insert-run.js';
import {
  claimOptions,
  compileOnly,
  debit,
  lease,
  notify,
  registry,
  result,
  STATEMENT_CASES,
} from './fixtures/sql-statements.js';

/*
 * Statements compiled once per shape (runtime/store/statement-shapes.ts) must compile to exactly
 * what their full builder gives — text and parameters, in order — whatever values fill them.
 * tests/runtime/sql-snapshots.test.ts pins every worker statement's text the same way.
 */
const db = compileOnly();
const compile = (statement: RawBuilder<unknown>) => statement.compile(db);

/** A statement with nested fragments, a raw name, an inlined literal, an array, a null and a '$' in a value. */
const nested = (id: string, names: readonly string[], limit: number) => {
  const inner = sql`SELECT r.id FROM ledgerflow.workflow_run r WHERE r.workflow_name = ANY(${names}::text[]) AND r.note <> ${'$1 costs $2'} LIMIT ${limit}`;
  return sql`WITH ${sql.raw('picked')} AS (${inner}) SELECT ${sql.lit('x')} AS kind, ${id}::uuid AS id, ${null}::text AS nothing FROM picked WHERE ${sql.ref('picked.id')} IS NOT NULL`;
};

describe('statement shapes', () => {
  it('a flattened statement compiles to the same text and parameters, alone and inside another', () => {
    const original = nested('00000000-0000-4000-8000-000000000001', ['a', 'b'], 3);
    expect(compile(flattened(original))).toMatchObject({
      sql: compile(original).sql,
      parameters: compile(original).parameters,
    });
    const around = (part: RawBuilder<unknown>) => sql`SELECT ${7} AS before, (${part}) AS x, ${'after'} AS after`;
    const a = compile(around(original));
    const b = compile(around(flattened(original)));
    expect(b.sql).toBe(a.sql);
    expect(b.parameters).toEqual(a.parameters);
  });

  it('a shape is built once; later values fill its slots and give what a fresh build gives', () => {
    const cache: { shape?: Shape } = {};
    let builds = 0;
    const statement = (id: string, limit: number) =>
      shapeOf(cache, [id, limit] as const, (idSlot, limitSlot) => {
        builds += 1;
        return nested(idSlot, ['a', 'b'], limitSlot);
      });
    for (const [id, limit] of [
      ['00000000-0000-4000-8000-000000000001', 3],
      ['00000000-0000-4000-8000-000000000002', 9],
    ] as const) {
      const shaped = compile(statement(id, limit));
      const fresh = compile(nested(id, ['a', 'b'], limit));
      expect(shaped.sql).toBe(fresh.sql);
      expect(shaped.parameters).toEqual(fresh.parameters);
    }
    expect(builds).toBe(1);
  });

  it('executes its kept text on a Kysely without plugins, and its tree through one with plugins', () => {
    const cache: { shape?: Shape } = {};
    const statement = (id: string) => shapeOf(cache, [id] as const, (idSlot) => nested(idSlot, ['a'], 1));
    const seen: string[] = [];
    const watching = db.withPlugin({
      transformQuery: ({ node }) => {
        seen.push(node.kind);
        return node;
      },
      transformResult: async ({ result }) => result,
    });
    const id = '00000000-0000-4000-8000-000000000003';
    const plain = statement(id).compile(db);
    const through = statement(id).compile(watching);
    expect(seen).toEqual(['RawNode']);
    expect(through.sql).toBe(plain.sql);
    expect(through.parameters).toEqual(plain.parameters);
    // Embedded, it is its tree: the text around it numbers its parameters in their place.
    const around = compile(sql`SELECT ${5} AS n, (${statement(id)}) AS x`);
    expect(around.sql).toBe(compile(sql`SELECT ${5} AS n, (${nested(id, ['a'], 1)}) AS x`).sql);
    expect(around.parameters).toEqual([5, ...plain.parameters]);
  });

  it("the group commit's shape, reused for another group, carries that group's rows and fused row", () => {
    const group = STATEMENT_CASES.find((c) => c.file === 'advance-group.sql')!;
    const first = compile(group.build(db) as RawBuilder<unknown>);
    // The same shape (a fused claim of the same registry and options), other runs, the fused one first.
    const params = groupParams();
    const other = compile(advanceRunsStatement(params));
    expect(other.sql).toBe(first.sql);
    const rows = JSON.parse(other.parameters[0] as string) as Array<{ run_id: string; ord: number }>;
    expect(rows.map((r) => r.run_id)).toEqual(params.map((p) => p.lease.runId));
    // The fused claim's guard and the claimed column name the fused row: ord 0 here, 2 in the first.
    const ords = (c: typeof first) => c.parameters.filter((p) => typeof p === 'number' && (p === 0 || p === 2));
    expect(ords(first)).toEqual([2, 2]);
    expect(ords(other)).toEqual([0, 0]);
  });
});

describe("the single-run commit's shapes", () => {
  /**
   * Two commits of one shape with every value different: wherever the first's parameters hold
   * one of its values, the second's (a reused shape) hold the same value of the second.
   */
  const expectFilledLike = (
    a: AdvanceParams,
    b: AdvanceParams,
    valuesOf: (p: AdvanceParams) => Record<string, unknown>,
  ) => {
    const first = compile(advanceRunStatement(a));
    const second = compile(advanceRunStatement(b));
    expect(second.sql).toBe(first.sql);
    const va = valuesOf(a);
    const vb = valuesOf(b);
    let filled = 0;
    first.parameters.forEach((value, i) => {
      const field = Object.keys(va).find((k) => va[k] === value);
      if (field === undefined) return; // a constant of the shape (the fused claim's workflows, say)
      expect(second.parameters[i], `parameter ${i + 1} (${field})`).toEqual(vb[field]);
      filled += 1;
    });
    expect(filled).toBeGreaterThanOrEqual(Object.keys(va).length - 1);
  };
  const values = (p: AdvanceParams): Record<string, unknown> => {
    const c = p.continuation;
    const e = p.effect as { key: string; attempt: number; requestHash?: string } | undefined;
    return {
      runId: p.lease.runId,
      token: p.lease.fencingToken,
      worker: p.lease.workerId,
      leaseMs: p.lease.leaseMs,
      workflow: p.workflowName,
      version: p.workflowVersion,
      position: p.step.position,
      output: JSON.stringify(p.output),
      resultAttempt: p.resultAttempt,
      attempt: p.attempt,
      ...(c.kind === 'hold' ? { next: c.nextStep } : {}),
      ...(c.kind === 'complete' ? { runOutput: JSON.stringify(c.runOutput) } : {}),
      ...(e !== undefined
        ? { key: e.key, effectAttempt: e.attempt, ...(e.requestHash !== undefined ? { hash: e.requestHash } : {}) }
        : {}),
    };
  };

  it('a held transactional step whose ledger row is inserted: every value in its place', () => {
    const commit = (n: number): AdvanceParams => ({
      ...result,
      lease: {
        runId: `00000000-0000-4000-8000-00000000010${n}`,
        fencingToken: 40 + n,
        workerId: `worker-${n}`,
        leaseMs: 1_000 * n,
      },
      workflowName: `wf-${n}`,
      workflowVersion: 10 + n,
      step: { ...debit, name: `debit-${n}`, position: 20 + n },
      attempt: 30 + n,
      resultAttempt: 50 + n,
      output: { n },
      effect: { key: `key-${n}`, mode: 'insert-recorded', attempt: 60 + n, requestHash: `sha256:${n}` },
      continuation: { kind: 'hold', nextStep: `next-${n}` },
    });
    expectFilledLike(commit(1), commit(2), (p) => ({ ...values(p), step: p.step.name, kind: p.step.kind }));
  });

  it('a completion with a fused claim: its values, and the claim the same', () => {
    const commit = (n: number): AdvanceParams => ({
      ...result,
      lease: {
        runId: `00000000-0000-4000-8000-00000000020${n}`,
        fencingToken: 70 + n,
        workerId: 'worker-a',
        leaseMs: 30_000,
      },
      step: { ...notify, name: `notify-${n}` },
      attempt: 80 + n,
      resultAttempt: 90 + n,
      output: { m: n },
      continuation: {
        kind: 'complete',
        runOutput: { all: n },
        claimNext: { registry, options: { ...claimOptions, limit: 2 } },
      },
    });
    expectFilledLike(commit(1), commit(2), (p) => ({ ...values(p), step: p.step.name }));
  });

  it("a start's insert, plain and claimed for its own worker, reused for another start, carries that start's values", () => {
    const insert = (n: number) =>
      compile(
        insertRunStatement(
          {
            id: `00000000-0000-4000-8000-00000000030${n}`,
            workflow_name: `wf-${n}`,
            workflow_version: n,
            input: `{"n":${n}}`,
            dedupe_key: `key-${n}`,
            priority: 5 + n,
          },
          { guarded: true, notify: false },
        ),
      );
    const [first, second] = [insert(1), insert(2)];
    expect(second.sql).toBe(first.sql);
    // Every column's value in its place, and the guard's id, workflow and dedupe key.
    expect(second.parameters).toEqual([
      '00000000-0000-4000-8000-000000000302',
      'wf-2',
      2,
      '{"n":2}',
      'key-2',
      7,
      '00000000-0000-4000-8000-000000000302',
      'wf-2',
      'key-2',
    ]);
    const claimed = (n: number) =>
      compile(
        insertRunStatement(
          {
            id: `00000000-0000-4000-8000-00000000040${n}`,
            workflow_name: `wf-${n}`,
            workflow_version: n,
            input: `{"n":${n}}`,
            dedupe_key: null,
          },
          {
            guarded: false,
            notify: false,
            claimedBy: { workerId: `worker-${n}`, leaseMs: 1_000 * n, step: `first-${n}` },
          },
        ),
      );
    const [a, b] = [claimed(1), claimed(2)];
    expect(b.sql).toBe(a.sql);
    expect(b.parameters).toEqual([
      '00000000-0000-4000-8000-000000000402',
      'wf-2',
      2,
      '{"n":2}',
      null,
      'worker-2',
      2_000,
      'first-2',
      'worker-2',
    ]);
  });
});

/** Two commits of the advance-group case's shape (its fused claim's registry and options): the completion with the fused claim first. */
function groupParams(): AdvanceParams[] {
  return [
    {
      ...result,
      lease: { ...lease, runId: '00000000-0000-4000-8000-000000000009', fencingToken: 4 },
      step: notify,
      continuation: {
        kind: 'complete',
        runOutput: { notify: { ok: false } },
        claimNext: { registry, options: { ...claimOptions, limit: 3 } },
      },
    },
    {
      ...result,
      lease: { ...lease, runId: '00000000-0000-4000-8000-000000000008', fencingToken: 5 },
      step: debit,
      effect: { key: 'order-44-debit', mode: 'insert-recorded', attempt: 1, requestHash: 'sha256:99bb' },
      continuation: { kind: 'hold', nextStep: 'charge' },
    },
  ];
}
