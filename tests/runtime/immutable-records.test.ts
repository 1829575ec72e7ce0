import { randomBytes, randomUUID } from 'node:crypto';
import { sql, type Kysely, type Transaction } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { shapeHash } from '../../dsl/workflow-shape.js';
import { workflow } from '../../dsl/workflow.js';
import { bindHandlers } from '../../runtime/contracts/registration.js';
import { FakeEmailProvider } from '../../examples/fakes/email-provider.js';
import { FakePaymentProvider } from '../../examples/fakes/payment-provider.js';
import { createClient } from '../../runtime/client/client.js';
import { RecordImmutableError, recordImmutableError } from '../../runtime/errors.js';
import { pruneRuns } from '../../runtime/retention/prune.js';
import { SQLSTATE, sqlStateOf } from '../../runtime/store/sqlstate.js';
import type { LedgerflowDatabase } from '../../runtime/store/tables.js';
import { createWorker } from '../../runtime/worker/worker.js';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { mixedHandlers } from './fixtures/test-handlers.js';
import { APP_SCHEMA_SQL, mixed } from './fixtures/test-workflows.js';

const once = { maxAttempts: 3, initialDelayMs: 20, maxDelayMs: 20, backoffFactor: 1, jitter: 0 } as const;

/** A transactional handler that tries to rewrite the charge it recorded one step earlier, through ctx.tx. */
const tamper = workflow('imm-tamper', { version: 1, input: z.object({ id: z.string() }) })
  .transactional('charge', {
    output: z.object({ cents: z.number() }),
    key: ({ input }) => `charge:${input.id}`,
    retry: once,
  })
  .transactional('rewrite', {
    output: z.object({ ok: z.boolean() }),
    key: ({ input }) => `rewrite:${input.id}`,
    retry: once,
  });

/** A plain step whose result commit the test makes the database refuse (LF001), as it would a rewrite. */
const refusedCommit = workflow('imm-refused-commit', { version: 1, input: z.object({}) }).step('only', {
  output: z.object({ ok: z.boolean() }),
  retry: once,
});

/**
 * Core 0012 on both stores: the runtime's own transitions still go through (a run with a plain, a
 * transactional — writing through ctx.tx, so its ledger row is inserted and filled in one
 * transaction — and two external steps completes), while a plain UPDATE of recorded history is
 * refused for everyone and a DELETE for every role but a listed retention role. Roles apply on
 * PGlite too: a superuser session `SET ROLE`s to a role that is not listed.
 */
describeStores('recorded history is immutable (core 0012)', (getStore) => {
  /** Not listed in ledgerflow.retention_role, with every privilege on the ledgerflow tables. */
  const outsider = `lf_imm_${randomBytes(4).toString('hex')}`;
  let runId: string;
  let key: string;

  beforeAll(async () => {
    const store = getStore();
    await migrateForTest(store, [mixed]);
    await sql.raw(APP_SCHEMA_SQL).execute(store.db);
    await sql
      .raw(`CREATE ROLE ${outsider} NOLOGIN;
      GRANT USAGE ON SCHEMA ledgerflow TO ${outsider};
      GRANT ALL ON ALL TABLES IN SCHEMA ledgerflow TO ${outsider};`)
      .execute(store.db);
    ({ runId } = await createClient({ store }).start(mixed, { orderId: 'imm-1', quantity: 2, email: 'a@example.com' }));
    const worker = createWorker({
      store,
      workflows: [mixedHandlers(new FakePaymentProvider(), new FakeEmailProvider())],
      pollIntervalMs: 20,
      reconcileIntervalMs: 0,
    });
    try {
      await worker.drain({ timeoutMs: 20_000 });
    } finally {
      await worker.stop();
    }
    key = `charge:imm-1`;
  });

  afterAll(async () => {
    await sql.raw(`DROP OWNED BY ${outsider}; DROP ROLE ${outsider}`).execute(getStore().db);
  });

  /** `statement` in a transaction that is rolled back; its error, or undefined if it succeeded. */
  async function refusal(
    statement: (trx: Transaction<LedgerflowDatabase>) => Promise<unknown>,
    role?: string,
  ): Promise<Error | undefined> {
    const rolledBack = new Error('rollback');
    try {
      await getStore()
        .db.transaction()
        .execute(async (trx) => {
          if (role !== undefined) await sql`SET LOCAL ROLE ${sql.id(role)}`.execute(trx);
          await statement(trx);
          throw rolledBack;
        });
    } catch (error) {
      if (error === rolledBack) return undefined;
      return error as Error;
    }
    throw new Error('unreachable');
  }

  const run = (db: Kysely<LedgerflowDatabase>, text: string) => sql.raw(text).execute(db);

  it('leaves the runtime its own transitions: the run completed with each effect step recorded', async () => {
    const db = getStore().db;
    const run = await db
      .selectFrom('ledgerflow.workflow_run')
      .select('status')
      .where('id', '=', runId)
      .executeTakeFirstOrThrow();
    expect(run.status).toBe('completed');
    const effects = await db
      .selectFrom('ledgerflow.step_effect')
      .select(['step_name', 'status', 'effect'])
      .where('workflow_id', '=', runId)
      .orderBy('step_name')
      .execute();
    expect(effects.map((e) => [e.step_name, e.status])).toEqual([
      ['charge', 'recorded'],
      ['receipt', 'recorded'],
      ['reserve', 'recorded'],
    ]);
    // The transactional step's row was inserted `recorded` with a null effect and filled in by the same transaction.
    expect(effects.find((e) => e.step_name === 'reserve')!.effect).toEqual({ reservationId: expect.any(Number) });
  });

  it.each([
    ['idempotency_key', `idempotency_key = 'charge:other'`],
    ['effect', `effect = '{"chargeId": "forged"}'`],
    ['request_hash', `request_hash = 'forged'`],
    ['resolution', `resolution = 'forged'`],
    ['status', `status = 'released', recorded_at = NULL`],
    ['nothing (a no-op update)', `status = status`],
  ])(
    'refuses an UPDATE of a recorded ledger row changing %s, for every role, with SQLSTATE LF001 naming the row',
    async (_, set) => {
      const error = await refusal((trx) =>
        run(trx, `UPDATE ledgerflow.step_effect SET ${set} WHERE workflow_id = '${runId}' AND step_name = 'charge'`),
      );
      expect(sqlStateOf(error)).toBe(SQLSTATE.RECORD_IMMUTABLE);
      expect(error!.message).toBe(
        `ledgerflow: recorded ledger rows are immutable: step_effect (workflow_id ${runId}, step_name charge, idempotency_key ${key}) ` +
          'cannot be updated; only the retention role may delete it (ledgerflow prune, as a role listed in ledgerflow.retention_role)',
      );
      const asRole = await refusal(
        (trx) =>
          run(trx, `UPDATE ledgerflow.step_effect SET ${set} WHERE workflow_id = '${runId}' AND step_name = 'charge'`),
        outsider,
      );
      expect(sqlStateOf(asRole)).toBe(SQLSTATE.RECORD_IMMUTABLE);
    },
  );

  it('refuses a DELETE of a recorded ledger row by a role that is not listed, directly, through a cascade and by TRUNCATE', async () => {
    const direct = await refusal(
      (trx) => run(trx, `DELETE FROM ledgerflow.step_effect WHERE workflow_id = '${runId}' AND step_name = 'charge'`),
      outsider,
    );
    expect(sqlStateOf(direct)).toBe(SQLSTATE.RECORD_IMMUTABLE);
    expect(direct!.message).toContain(
      `step_effect (workflow_id ${runId}, step_name charge, idempotency_key ${key}) cannot be deleted`,
    );
    // A cascade from the run runs as the tables' owner: the run's own statement trigger judges the role.
    const cascade = await refusal(
      (trx) => run(trx, `DELETE FROM ledgerflow.workflow_run WHERE id = '${runId}'`),
      outsider,
    );
    expect(sqlStateOf(cascade)).toBe(SQLSTATE.RECORD_IMMUTABLE);
    expect(cascade!.message).toContain(
      'runs are deleted only by pruning, with their recorded history: workflow_run cannot be deleted',
    );
    const truncate = await refusal((trx) => run(trx, 'TRUNCATE ledgerflow.step_effect CASCADE'), outsider);
    expect(sqlStateOf(truncate)).toBe(SQLSTATE.RECORD_IMMUTABLE);
    expect(truncate!.message).toContain('step_effect cannot be truncated');
  });

  it('keeps step results insert-only and finished attempts as they ended', async () => {
    const result = await refusal((trx) =>
      run(
        trx,
        `UPDATE ledgerflow.step_result SET output = '{"chargeId": "forged"}' WHERE run_id = '${runId}' AND step_name = 'charge'`,
      ),
    );
    expect(sqlStateOf(result)).toBe(SQLSTATE.RECORD_IMMUTABLE);
    expect(result!.message).toContain(
      `step results are insert-only: step_result (run_id ${runId}, step_name charge) cannot be updated`,
    );
    const resultDelete = await refusal(
      (trx) => run(trx, `DELETE FROM ledgerflow.step_result WHERE run_id = '${runId}'`),
      outsider,
    );
    expect(sqlStateOf(resultDelete)).toBe(SQLSTATE.RECORD_IMMUTABLE);
    const attempt = await refusal((trx) =>
      run(
        trx,
        `UPDATE ledgerflow.step_attempt SET error = '{"forged": true}' WHERE run_id = '${runId}' AND step_name = 'charge'`,
      ),
    );
    expect(sqlStateOf(attempt)).toBe(SQLSTATE.RECORD_IMMUTABLE);
    expect(attempt!.message).toContain(
      `finished attempts are immutable: step_attempt (run_id ${runId}, step_name charge, attempt 1, status succeeded) cannot be updated`,
    );
  });

  it('lets intents, released rows and running attempts move, and be deleted, by a role with the privilege', async () => {
    const seeded = randomUUID();
    const error = await refusal(async (trx) => {
      await sql`INSERT INTO ledgerflow.workflow_run (id, workflow_name, workflow_version, status, input) VALUES (${seeded}, 'wt-mixed', 1, 'pending', '{}')`.execute(
        trx,
      );
      await sql`INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id) VALUES (${seeded}, 'charge', 1, 'running', 1, 'w')`.execute(
        trx,
      );
      await sql`INSERT INTO ledgerflow.step_effect (workflow_id, step_name, idempotency_key, effect, status, kind, request_hash, attempt, fencing_token, reconcile_after)
                VALUES (${seeded}, 'charge', 'k', 'null', 'intent', 'external', 'h', 1, 1, now())`.execute(trx);
      await sql`UPDATE ledgerflow.step_effect SET status = 'released', reconcile_after = NULL WHERE workflow_id = ${seeded}`.execute(
        trx,
      );
      await sql`UPDATE ledgerflow.step_effect SET status = 'intent', reconcile_after = now() WHERE workflow_id = ${seeded}`.execute(
        trx,
      );
      await sql`UPDATE ledgerflow.step_attempt SET fencing_token = 2 WHERE run_id = ${seeded}`.execute(trx);
      await sql`DELETE FROM ledgerflow.step_effect WHERE workflow_id = ${seeded}`.execute(trx);
      await sql`DELETE FROM ledgerflow.step_attempt WHERE run_id = ${seeded}`.execute(trx);
    }, outsider);
    expect(error).toBeUndefined();
  });

  it('surfaces the refusal as RecordImmutableError with the database message', async () => {
    const error = await refusal((trx) =>
      run(trx, `UPDATE ledgerflow.step_effect SET effect = 'null' WHERE workflow_id = '${runId}'`),
    );
    const surfaced = recordImmutableError(error);
    expect(surfaced).toBeInstanceOf(RecordImmutableError);
    expect(surfaced!.message).toMatch(/^ledgerflow: recorded ledger rows are immutable: step_effect \(workflow_id /);
    expect(recordImmutableError(new Error('something else'))).toBeUndefined();
  });

  it('lets the retention path (a listed role: here the migrating one) prune the run, and keeps the archive append-only', async () => {
    const db = getStore().db;
    await sql`UPDATE ledgerflow.workflow_run SET finished_at = finished_at - interval '2 days' WHERE id = ${runId}`.execute(
      db,
    );
    const report = await pruneRuns(db, { olderThanMs: 86_400_000 });
    expect(report).toMatchObject({ runsPruned: 1, effectsArchived: 3 });
    expect(
      await db.selectFrom('ledgerflow.step_effect').select('step_name').where('workflow_id', '=', runId).execute(),
    ).toEqual([]);

    const update = await refusal((trx) =>
      run(
        trx,
        `UPDATE ledgerflow.effect_archive SET effect = 'null' WHERE run_id = '${runId}' AND step_name = 'charge'`,
      ),
    );
    expect(sqlStateOf(update)).toBe(SQLSTATE.RECORD_IMMUTABLE);
    expect(update!.message).toContain(
      `the effect archive is append-only: effect_archive (run_id ${runId}, step_name charge, idempotency_key ${key}) cannot be updated`,
    );
    const tombstone = await refusal((trx) =>
      run(trx, `UPDATE ledgerflow.run_archive SET dedupe_key = 'other' WHERE id = '${runId}'`),
    );
    expect(sqlStateOf(tombstone)).toBe(SQLSTATE.RECORD_IMMUTABLE);
    const outsiderDelete = await refusal(
      (trx) => run(trx, `DELETE FROM ledgerflow.run_archive WHERE id = '${runId}'`),
      outsider,
    );
    expect(sqlStateOf(outsiderDelete)).toBe(SQLSTATE.RECORD_IMMUTABLE);
    expect(outsiderDelete!.message).toContain('the run archive is append-only: run_archive (id ');

    await sql`INSERT INTO ledgerflow.retention_role (role_name) VALUES (${outsider})`.execute(db);
    try {
      const listed = await refusal(
        (trx) => run(trx, `DELETE FROM ledgerflow.run_archive WHERE id = '${runId}'`),
        outsider,
      );
      expect(listed).toBeUndefined();
    } finally {
      await sql`DELETE FROM ledgerflow.retention_role WHERE role_name = ${outsider}`.execute(db);
    }
    const archive = await pruneRuns(db, { olderThanMs: 86_400_000, archiveOlderThanMs: 86_400_000 });
    expect(archive.archiveDeleted).toBe(1);
    expect(
      await db.selectFrom('ledgerflow.effect_archive').select('step_name').where('run_id', '=', runId).execute(),
    ).toEqual([]);
  });
});

describeStores('a refusal the worker meets (core 0012)', (getStore) => {
  beforeAll(async () => {
    await migrateForTest(getStore(), [tamper, refusedCommit]);
  });

  async function drain(registrations: Parameters<typeof createWorker>[0]['workflows']): Promise<void> {
    const worker = createWorker({
      store: getStore(),
      workflows: registrations,
      pollIntervalMs: 20,
      reconcileIntervalMs: 0,
    });
    try {
      await worker.drain({ timeoutMs: 20_000 });
    } finally {
      await worker.stop();
    }
  }

  const attemptsOf = (runId: string, step: string) =>
    getStore()
      .db.selectFrom('ledgerflow.step_attempt')
      .select(['status', 'error'])
      .where('run_id', '=', runId)
      .where('step_name', '=', step)
      .execute();

  it('fails the step at once (not retryable) when its handler tries to rewrite a recorded effect through ctx.tx', async () => {
    const store = getStore();
    const { runId } = await createClient({ store }).start(tamper, { id: 't-1' });
    await drain([
      bindHandlers(
        tamper,
        {
          charge: async ({ record }) => record({ cents: 100 }),
          rewrite: async ({ tx, runId: run, record }) => {
            await sql`UPDATE ledgerflow.step_effect SET effect = '{"cents": 1}' WHERE workflow_id = ${run} AND step_name = 'charge'`.execute(
              tx,
            );
            return record({ ok: true });
          },
        },
        shapeHash(tamper),
      ),
    ]);
    const run = await store.db
      .selectFrom('ledgerflow.workflow_run')
      .select(['status'])
      .where('id', '=', runId)
      .executeTakeFirstOrThrow();
    expect(run.status).toBe('failed');
    const attempts = await attemptsOf(runId, 'rewrite');
    expect(attempts).toHaveLength(1);
    expect(attempts[0]!.status).toBe('failed');
    expect((attempts[0]!.error as { message: string }).message).toContain(
      'recorded ledger rows are immutable: step_effect (workflow_id',
    );
    const charge = await store.db
      .selectFrom('ledgerflow.step_effect')
      .select('effect')
      .where('workflow_id', '=', runId)
      .where('step_name', '=', 'charge')
      .executeTakeFirstOrThrow();
    expect(charge.effect).toEqual({ cents: 100 });
  });

  it('surfaces a refused result commit as RecordImmutableError, and does not retry it', async () => {
    const store = getStore();
    await sql
      .raw(`CREATE FUNCTION imm_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'ledgerflow: a test refusal of this commit' USING ERRCODE = 'LF001'; END $$;
      CREATE TRIGGER imm_test_refuse BEFORE INSERT ON ledgerflow.step_result FOR EACH ROW
        WHEN (NEW.workflow_name = 'imm-refused-commit') EXECUTE FUNCTION imm_test_refuse();`)
      .execute(store.db);
    try {
      const { runId } = await createClient({ store }).start(refusedCommit, {});
      await drain([bindHandlers(refusedCommit, { only: () => ({ ok: true }) }, shapeHash(refusedCommit))]);
      const attempts = await attemptsOf(runId, 'only');
      expect(attempts).toHaveLength(1);
      expect(attempts[0]!.error).toMatchObject({
        name: 'RecordImmutableError',
        code: 'record_immutable',
        message: 'ledgerflow: a test refusal of this commit',
      });
    } finally {
      await sql
        .raw('DROP TRIGGER imm_test_refuse ON ledgerflow.step_result; DROP FUNCTION imm_test_refuse()')
        .execute(store.db);
    }
  });
});
