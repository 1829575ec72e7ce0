import { randomUUID } from 'node:crypto';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import { shapeHash } from 'ledgerflow/dsl';
import { bindHandlers, createClient, createWorker, type WorkerOptions } from 'ledgerflow/runtime';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { coreMigrations, LEGACY_CORE_MIGRATION } from '../../runtime/migrate/core-migrations.js';
import { migrate } from '../../runtime/migrate/migrate.js';
import { loadMigrations, migrationChecksum, type Migration } from '../../runtime/migrate/migration-source.js';
import type { Store } from '../../runtime/store/store.js';
import { describeStores } from '../support/describe-stores.js';
import { workflowMigrations } from '../support/migrate-for-test.js';
import { schemaDrift } from '../support/schema-drift.js';
import { twoSteps } from './fixtures/test-workflows.js';

const LEGACY_FIXTURE = fileURLToPath(new URL('./fixtures/legacy-0001_core.sql', import.meta.url));
const FAST: Partial<WorkerOptions> = { pollIntervalMs: 20, leaseMs: 5_000, reconcileIntervalMs: 0 };

/**
 * What the previous release's `migrate` did with a project's generated/migrations (the core
 * schema among them as `0001_core.sql`, no core migrations of its own): per file, in one
 * transaction, run it and record its name and checksum.
 */
async function migrateAsPreviousRelease(store: Store, migrations: readonly Migration[]): Promise<void> {
  await sql`CREATE SCHEMA IF NOT EXISTS ledgerflow`.execute(store.db);
  await sql`CREATE TABLE IF NOT EXISTS ledgerflow.schema_migration (
    name text PRIMARY KEY, checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`.execute(store.db);
  for (const migration of migrations) {
    await store.db.transaction().execute(async (trx) => {
      await sql.raw(migration.sql).execute(trx);
      await trx
        .insertInto('ledgerflow.schema_migration')
        .values({ name: migration.name, checksum: migration.checksum })
        .execute();
    });
  }
}

async function recorded(store: Store): Promise<Array<{ name: string; checksum: string }>> {
  return store.db.selectFrom('ledgerflow.schema_migration').select(['name', 'checksum']).orderBy('name').execute();
}

describeStores('migrate: upgrading a database of the previous release', (getStore) => {
  // A project's generated/migrations as the previous release's codegen left it.
  let dir: string;
  const workflow = workflowMigrations([twoSteps])[0]!;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'lf-upgrade-'));
    copyFileSync(LEGACY_FIXTURE, join(dir, '0001_core.sql'));
    writeFileSync(join(dir, workflow.name), workflow.sql);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('records core/0001_core.sql without running it, skips the old file, and runs in flight finish', async () => {
    const store = getStore();
    await sql`DROP SCHEMA ledgerflow CASCADE`.execute(store.db);
    await migrateAsPreviousRelease(store, loadMigrations([dir]));
    const legacyChecksum = migrationChecksum(readFileSync(LEGACY_FIXTURE, 'utf8'));
    expect(LEGACY_CORE_MIGRATION.checksums.has(legacyChecksum)).toBe(true);
    expect(await recorded(store)).toEqual([
      { name: '0001_core.sql', checksum: legacyChecksum },
      { name: workflow.name, checksum: migrationChecksum(workflow.sql) },
    ]);

    // Three runs as the previous release's worker left them: one completed; two mid-way, their
    // first step committed and the second one's attempt running under a lease that has expired
    // (the old worker was stopped during the upgrade). Written as that release's code wrote them:
    // today's worker needs the newer core schema, so it cannot play the old one.
    // (Today's client reads tables the old schema lacks, e.g. the payload limits of core 0014, so
    // the runs are inserted as the old release's start did.)
    const runIds: string[] = [];
    for (const n of [1, 2, 3]) {
      const id = randomUUID();
      await sql`INSERT INTO ledgerflow.workflow_run (id, workflow_name, workflow_version, input)
                VALUES (${id}, ${twoSteps.name}, ${twoSteps.version}, ${JSON.stringify({ n })}::jsonb)`.execute(
        store.db,
      );
      runIds.push(id);
    }
    for (const [i, id] of runIds.entries()) {
      const n = i + 1;
      await sql`INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, finished_at)
                VALUES (${id}, 'double', 1, 'succeeded', 1, 'old-worker', now())`.execute(store.db);
      await sql`INSERT INTO ledgerflow.step_result (run_id, workflow_name, workflow_version, step_name, kind, output, attempt)
                VALUES (${id}, ${twoSteps.name}, ${twoSteps.version}, 'double', 'step', ${JSON.stringify({ value: n * 2 })}::jsonb, 1)`.execute(
        store.db,
      );
      if (n === 1) {
        await sql`INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, finished_at)
                  VALUES (${id}, 'describe', 1, 'succeeded', 1, 'old-worker', now())`.execute(store.db);
        await sql`INSERT INTO ledgerflow.step_result (run_id, workflow_name, workflow_version, step_name, kind, output, attempt)
                  VALUES (${id}, ${twoSteps.name}, ${twoSteps.version}, 'describe', 'step', '{"text":"value is 2"}'::jsonb, 1)`.execute(
          store.db,
        );
        await sql`UPDATE ledgerflow.workflow_run SET status = 'completed', current_step = 2, fencing_token = 1, finished_at = now(),
                         output = '{"double":{"value":2},"describe":{"text":"value is 2"}}'::jsonb
                   WHERE id = ${id}`.execute(store.db);
      } else {
        await sql`INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id)
                  VALUES (${id}, 'describe', 1, 'running', 1, 'old-worker')`.execute(store.db);
        await sql`UPDATE ledgerflow.workflow_run SET status = 'running', current_step = 1, fencing_token = 1,
                         lease_owner = 'old-worker', lease_expires_at = now() - interval '1 second'
                   WHERE id = ${id}`.execute(store.db);
      }
    }

    // The new release: core migrations first; the old 0001_core.sql is still in the directory.
    const coreNames = coreMigrations().map((m) => m.name);
    const result = await migrate(store, { sources: [dir] });
    expect(result).toEqual({
      applied: coreNames.filter((name) => name !== 'core/0001_core.sql'),
      skipped: [workflow.name],
      adopted: ['core/0001_core.sql'],
      superseded: ['0001_core.sql'],
      unknown: [],
      replaced: [],
    });
    expect(await recorded(store)).toEqual([
      { name: '0001_core.sql', checksum: legacyChecksum },
      { name: workflow.name, checksum: migrationChecksum(workflow.sql) },
      ...coreMigrations().map((m) => ({ name: m.name, checksum: m.checksum })),
    ]);
    expect(await schemaDrift(store)).toEqual([]);
    expect(await migrate(store, { sources: [dir] })).toEqual({
      applied: [],
      skipped: [...coreNames, workflow.name],
      adopted: [],
      superseded: ['0001_core.sql'],
      unknown: [],
      replaced: [],
    });

    // A worker of the new release finishes what the old one left.
    const newWorker = createWorker({
      store,
      workflows: [
        bindHandlers(
          twoSteps,
          {
            double: ({ input }) => ({ value: input.n * 2 }),
            describe: ({ steps }) => ({ text: `value is ${steps.double.value}` }),
          },
          shapeHash(twoSteps),
        ),
      ],
      ...FAST,
    });
    try {
      await newWorker.drain({ timeoutMs: 30_000 });
    } finally {
      await newWorker.stop();
    }
    const client = createClient({ store });
    const after = await Promise.all(runIds.map((id) => client.getRun(id)));
    expect(after.map((r) => r.status)).toEqual(['completed', 'completed', 'completed']);
    expect(after.map((r) => r.steps.find((s) => s.step_name === 'describe')?.output)).toEqual([
      { text: 'value is 2' },
      { text: 'value is 4' },
      { text: 'value is 6' },
    ]);
    // The two runs really were interrupted inside their second step.
    expect(
      after.filter((r) => r.attempts.some((a) => a.step_name === 'describe' && a.status === 'abandoned')),
    ).toHaveLength(2);
  });
});
