import { sql } from 'kysely';
import { beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { shapeHash, workflow } from 'ledgerflow/dsl';
import { bindHandlers, createWorker, MigrationError } from 'ledgerflow/runtime';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { runState, startTestRun } from './fixtures/run-helpers.js';

/**
 * A worker refuses to run a workflow version whose definition — schemas included — differs from
 * the one the database registered for it when it first served it: the scenario of an output field
 * added to an `external` step without a version bump and without re-running codegen. The shape
 * (and so `definitionHash`, which the contract and the migration carry) is unchanged, so nothing
 * but the fingerprint sees it.
 */
const input = z.object({ orderId: z.string() });
const declare = (name: string, output: z.ZodType) =>
  workflow(name, { version: 1, input }).external('charge', {
    output,
    key: ({ input }) => `charge:${input.orderId}`,
    idempotentByKey: true,
  });

const original = (name: string) => declare(name, z.object({ chargeId: z.string() }));
// The same version, an output field added, no bump.
const drifted = (name: string) => declare(name, z.object({ chargeId: z.string(), receiptUrl: z.string() }));

describeStores('a worker refuses a definition that drifted from the registered one', (getStore) => {
  const names = ['drift-released', 'drift-first', 'drift-draft'];
  beforeAll(() => migrateForTest(getStore(), names.map(original)).then(() => undefined));

  const charges: string[] = [];
  const register = (w: ReturnType<typeof original>) =>
    bindHandlers(
      w,
      {
        charge: {
          perform: async ({ key }: { key: string }) => {
            charges.push(key);
            return { chargeId: `ch_${key}` };
          },
        },
      },
      // As the stale generated contract does: its hash is of the shape, which did not change.
      shapeHash(original(w.name)),
    );
  const worker = (w: ReturnType<typeof original>) =>
    createWorker({ store: getStore(), workflows: [register(w)], pollIntervalMs: 20, reconcileIntervalMs: 0 });

  it('an output field added to an external step without a bump: refused before claiming, naming workflow, version, step and part', async () => {
    const store = getStore();
    const first = worker(original('drift-released'));
    const done = await startTestRun(store, original('drift-released'), { orderId: 'o-1' });
    await first.drain();
    await first.stop();
    expect((await runState(store, done)).run.status).toBe('completed');
    expect(charges).toEqual(['charge:o-1']);

    const pending = await startTestRun(store, original('drift-released'), { orderId: 'o-2' });
    const refusal = await worker(drifted('drift-released'))
      .start()
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    expect(refusal).toBeInstanceOf(MigrationError);
    const message = (refusal as Error).message;
    expect(message).toContain('workflow "drift-released" v1: changed since it was registered');
    expect(message).toContain('the output schema of step "charge"');
    expect(message).toContain('bump `version`');
    // Nothing was claimed, nothing charged.
    expect(charges).toEqual(['charge:o-1']);
    const state = await runState(store, pending);
    expect(state.run.status).toBe('pending');
    expect(state.attempts).toEqual([]);
    // A client holding the drifted definition cannot start a run of the version either.
    await expect(startTestRun(store, drifted('drift-released'), { orderId: 'o-3' })).rejects.toThrow(
      /Workflow "drift-released" v1 changed since a worker registered it: the output schema of step "charge"/,
    );
  });

  it('the first worker to serve a version registers it; a registration of a released version never changes', async () => {
    const store = getStore();
    const first = worker(drifted('drift-first'));
    await first.start();
    await first.stop();
    const refusal = await worker(original('drift-first'))
      .start()
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    expect((refusal as Error).message).toContain('workflow "drift-first" v1: changed since it was registered');
    // The database itself refuses to change it, whoever asks.
    await expect(
      sql`UPDATE ledgerflow.workflow_fingerprint SET fingerprint = 'x' WHERE workflow_name = 'drift-first'`.execute(
        store.db,
      ),
    ).rejects.toThrow(/cannot change: the version is released or has runs/);
  });

  it('a draft version re-registers a changed definition while it has no runs, and refuses once it has one', async () => {
    const store = getStore();
    await sql`UPDATE ledgerflow.workflow_version SET draft_migration = '1000_drift-draft_v1.sql' WHERE workflow_name = 'drift-draft'`.execute(
      store.db,
    );
    const first = worker(original('drift-draft'));
    await first.start();
    await first.stop();
    const changed = worker(drifted('drift-draft'));
    await changed.start();
    await changed.stop();

    await startTestRun(store, drifted('drift-draft'), { orderId: 'd-1' });
    const refusal = await worker(original('drift-draft'))
      .start()
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    expect((refusal as Error).message).toContain('workflow "drift-draft" v1: changed since it was registered');
    expect((refusal as Error).message).toContain('It is a draft, but it has runs in this database');
  });
});
