import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDashboard } from '../../runtime/dashboard/dashboard.js';
import { missingLedgerflowObject } from '../../runtime/store/sqlstate.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { runCli as run } from '../support/run-cli.js';

const RUN_ID = '00000000-0000-4000-8000-000000000001';
const WORKFLOWS = ['--workflows', 'tests/runtime/cli-fixtures/workflows.ts'];
const WAIT_WORKFLOWS = ['--workflows', 'tests/runtime/cli-fixtures/wait-workflows.ts'];
const PAYMENT = ['--payload', '{"orderId":"o-1","paid":true}'];

/**
 * Every command that touches the database, with arguments it would accept on a migrated one.
 * The message it prints names the first ledgerflow table its first query needs (schedules has its
 * own, older wording: see withScheduleTable).
 */
const COMMANDS: ReadonlyArray<readonly [name: string, args: readonly string[]]> = [
  ['runs', ['runs']],
  ['run', ['run', RUN_ID]],
  ['effects', ['effects']],
  ['effects --pending', ['effects', '--pending']],
  ['cancel', ['cancel', RUN_ID]],
  ['reconcile', ['reconcile', ...WORKFLOWS]],
  ['retry', ['retry', RUN_ID, '--reason', 'test']],
  ['resolve', ['resolve', RUN_ID, 'deliver', '--not-found', '--reason', 'test', ...WORKFLOWS]],
  ['audit', ['audit']],
  ['queues', ['queues']],
  ['queues pause', ['queues', 'pause', 'q', '--reason', 'test']],
  ['schedules', ['schedules']],
  ['versions', ['versions', ...WORKFLOWS]],
  ['start', ['start', 'cli-greet', '--input', '{"name":"a"}', ...WORKFLOWS]],
  ['send-event', ['send-event', 'cli.payment.settled', 'o-1', ...PAYMENT, ...WAIT_WORKFLOWS]],
  ['signal', ['signal', RUN_ID, 'cli.payment.settled', ...PAYMENT, ...WAIT_WORKFLOWS]],
  ['prune', ['prune', '--completed-older-than', '1d']],
  ['worker', ['worker', ...WORKFLOWS]],
];

/** The migrate advice without the table name, which depends on the command's first query. */
const MIGRATE_FIRST =
  /^ledgerflow [a-z-]+: This database has no ledgerflow(\.schedule)? tables?\b.*[Rr]un `ledgerflow migrate` first\.\n$/;

function expectMigrateAdvice(outcome: { code: number; stdout: string; stderr: string }, command: string): void {
  // The PGlite store says where it is first; that line is not part of the error.
  const stderr = outcome.stderr.replace(/^Using .*\n/, '');
  expect(stderr).toMatch(MIGRATE_FIRST);
  expect(stderr.startsWith(`ledgerflow ${command.split(' ')[0]}: `)).toBe(true);
  expect(stderr).not.toMatch(/^\s+at /m);
  expect(stderr).not.toContain('internal error');
  expect(outcome).toMatchObject({ code: 1, stdout: '' });
}

describe('every command on a database that was never migrated says to run migrate', () => {
  describe('PostgreSQL: an empty database', () => {
    let store: TestStore;
    let db: string[];
    beforeAll(async () => {
      store = await createPgTestStore();
      await sql`DROP SCHEMA ledgerflow CASCADE`.execute(store.db);
      db = ['--database-url', store.url!];
    });
    afterAll(async () => {
      await store?.close();
    });

    it.each(COMMANDS)('%s', async (name, args) => {
      expectMigrateAdvice(await run([...args, ...db]), name);
    });

    it('maps only what is missing in the ledgerflow schema: a missing table of the application stays its own error', async () => {
      const errorOf = (query: string) =>
        sql
          .raw(query)
          .execute(store.db)
          .then(
            () => undefined,
            (error: unknown) => error,
          );
      expect(missingLedgerflowObject(await errorOf('SELECT 1 FROM ledgerflow.workflow_run'))).toBe(
        'ledgerflow.workflow_run',
      );
      expect(missingLedgerflowObject(await errorOf('SELECT ledgerflow.claim_runs(1)'))).toBe('ledgerflow');
      expect(missingLedgerflowObject(await errorOf('SELECT 1 FROM shop.refund'))).toBeUndefined();
      expect(missingLedgerflowObject(await errorOf('SELECT 1 FROM ledgerflow_app.refund'))).toBeUndefined();
      await sql`CREATE SCHEMA ledgerflow`.execute(store.db);
      try {
        expect(missingLedgerflowObject(await errorOf('SELECT ledgerflow.claim_runs(1)'))).toBe('ledgerflow.claim_runs');
      } finally {
        await sql`DROP SCHEMA ledgerflow CASCADE`.execute(store.db);
      }
    });

    it('the dashboard answers every page with the same advice, not the driver error', async () => {
      const dashboard = createDashboard({ store, workflows: [] });
      for (const path of ['/', '/?status=failed', `/runs/${RUN_ID}`, '/intents', '/queues', '/audit']) {
        const response = await dashboard.request(`http://127.0.0.1${path}`);
        const page = await response.text();
        expect(page, path).toContain('<h1>Database not migrated</h1>');
        expect(page, path).toContain('This database has no ledgerflow tables');
        expect(page, path).toContain('run `ledgerflow migrate` first.');
        expect(response.status, path).toBe(500);
      }
    });

    it('a database that misses a core migration gets the same advice, naming what is missing', async () => {
      await sql`CREATE SCHEMA ledgerflow`.execute(store.db);
      try {
        const outcome = await run(['runs', ...db]);
        expectMigrateAdvice(outcome, 'runs');
        expect(outcome.stderr).toContain('ledgerflow.workflow_run does not exist');
      } finally {
        await sql`DROP SCHEMA ledgerflow CASCADE`.execute(store.db);
      }
    });
  });

  describe('PGlite: an empty data directory', () => {
    let dir: string;
    let db: string[];
    beforeAll(() => {
      dir = mkdtempSync(join(tmpdir(), 'lf-unmigrated-'));
      db = ['--data-dir', join(dir, 'db')];
    });
    afterAll(() => {
      rmSync(dir, { recursive: true, force: true });
    });

    it.each(COMMANDS)('%s', async (name, args) => {
      expectMigrateAdvice(await run([...args, ...db]), name);
    });
  });
});
