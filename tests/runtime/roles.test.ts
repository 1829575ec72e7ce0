import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { FakeEmailProvider } from '../../examples/fakes/email-provider.js';
import { FakePaymentProvider } from '../../examples/fakes/payment-provider.js';
import { createClient } from '../../runtime/client/client.js';
import { createDashboard } from '../../runtime/dashboard/dashboard.js';
import { grantStatements } from '../../runtime/roles/grants.js';
import { createPgStore } from '../../runtime/store/pg/pg-store.js';
import { createPGliteTestStore, type TestStore } from '../support/test-stores.js';
import { SQLSTATE, sqlStateOf } from '../../runtime/store/sqlstate.js';
import type { Store } from '../../runtime/store/store.js';
import { createWorker } from '../../runtime/worker/worker.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { runCli } from '../support/run-cli.js';
import { QUEUE_WORKFLOWS, limited, queueHandlers, queueProbe } from './fixtures/queue-workflows.js';
import { SCHEDULE_WORKFLOWS, scheduleOf, scheduledHandlers } from './fixtures/schedule-workflows.js';
import { mixedHandlers } from './fixtures/test-handlers.js';
import { APP_SCHEMA_SQL, mixed } from './fixtures/test-workflows.js';
import {
  WAIT_WORKFLOWS,
  awaitPayment,
  fanOut,
  napper,
  paymentSettled,
  waitHandlers,
  withChild,
} from './fixtures/wait-workflows.js';

const WORKFLOWS = [mixed, ...WAIT_WORKFLOWS, ...QUEUE_WORKFLOWS, ...SCHEDULE_WORKFLOWS];

/**
 * The least-privilege roles on a real PostgreSQL server (docs/operations/roles.md): a
 * database owned by `owner`, migrated by it, with `ledgerflow grants` applied by it; then the
 * worker runs every kind of step that touches the database with nothing but its grants (no
 * superuser at run time), the reader reads what the CLI and the dashboard show, and only the
 * retention role prunes. The PGlite suite below takes the roles with `SET ROLE` (its one session's
 * user is a superuser, and it has no logins).
 */
describe('least-privilege roles [pg]', () => {
  const suffix = randomBytes(4).toString('hex');
  const roles = {
    owner: `lf_owner_${suffix}`,
    worker: `lf_worker_${suffix}`,
    reader: `lf_reader_${suffix}`,
    retention: `lf_pruner_${suffix}`,
  };
  const database = `lf_roles_${suffix}`;
  const serverUrl = inject('postgresUrl');
  const urlOf = (role: string): string => {
    const url = new URL(serverUrl);
    url.username = role;
    url.password = '';
    url.pathname = `/${database}`;
    return url.toString();
  };
  const stores: Store[] = [];
  const storeAs = (role: string): Store => {
    const store = createPgStore({ connectionString: urlOf(role), maxConnections: 4 });
    stores.push(store);
    return store;
  };
  let owner: Store;
  let worker: Store;
  let reader: Store;
  let completedRun: string;

  async function admin(statements: string): Promise<void> {
    const client = new pg.Client({ connectionString: serverUrl });
    await client.connect();
    try {
      await client.query(statements);
    } finally {
      await client.end();
    }
  }

  /** The error `statement` raised (run as `store`'s role), or undefined. */
  async function refusal(store: Store, statement: string): Promise<unknown> {
    try {
      await sql.raw(statement).execute(store.db);
      return undefined;
    } catch (error) {
      return error;
    }
  }

  beforeAll(async () => {
    // Login roles without any attribute (no SUPERUSER, CREATEDB, CREATEROLE); the server trusts local logins.
    await admin(
      Object.values(roles)
        .map((role) => `CREATE ROLE ${role} LOGIN;`)
        .join('\n'),
    );
    await admin(`CREATE DATABASE ${database} OWNER ${roles.owner}`);
    owner = storeAs(roles.owner);
    await migrateForTest(owner, WORKFLOWS);
    // The application's own table and its grant: the project's business, not ledgerflow grants'.
    await sql
      .raw(`${APP_SCHEMA_SQL}
      GRANT USAGE ON SCHEMA wt_app TO ${roles.worker};
      GRANT SELECT, INSERT ON wt_app.reservation TO ${roles.worker};
      GRANT USAGE ON SEQUENCE wt_app.reservation_id_seq TO ${roles.worker};`)
      .execute(owner.db);
    await sql.raw(grantStatements(roles)).execute(owner.db);
    worker = storeAs(roles.worker);
    reader = storeAs(roles.reader);
  });

  afterAll(async () => {
    await Promise.all(stores.map((store) => store.close()));
    await admin(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await admin(
      Object.values(roles)
        .map((role) => `DROP ROLE IF EXISTS ${role};`)
        .join('\n'),
    );
  });

  it('lets only the owner create: the worker, reader and retention role cannot CREATE TABLE', async () => {
    for (const role of [roles.worker, roles.reader, roles.retention]) {
      const store = storeAs(role);
      expect(sqlStateOf(await refusal(store, 'CREATE TABLE ledgerflow.intruder (id int)'))).toBe(
        SQLSTATE.INSUFFICIENT_PRIVILEGE,
      );
      expect(sqlStateOf(await refusal(store, 'CREATE TABLE public.intruder (id int)'))).toBe(
        SQLSTATE.INSUFFICIENT_PRIVILEGE,
      );
      expect(sqlStateOf(await refusal(store, 'CREATE SCHEMA intruder'))).toBe(SQLSTATE.INSUFFICIENT_PRIVILEGE);
    }
  });

  it('runs every kind of step as the worker: transactional writes, external intents, sleep, events, children, queues, schedules', async () => {
    const client = createClient({ store: worker, workflows: WORKFLOWS });
    const runs = [
      (await client.start(mixed, { orderId: 'roles-1', quantity: 2, email: 'a@example.com' })).runId,
      (await client.start(napper, { ms: 50 })).runId,
      (await client.start(awaitPayment, { orderId: 'roles-pay', timeoutMs: 60_000 })).runId,
      (await client.start(withChild, { id: 'roles-child', n: 4, fail: false })).runId,
      (await client.start(fanOut, { id: 'roles-fan', count: 3, failAt: 0 })).runId,
      (await client.start(limited, { id: 'roles-queue' })).runId,
    ];
    completedRun = runs[0]!;
    const errors: string[] = [];
    const w = createWorker({
      store: worker,
      workflows: [
        mixedHandlers(new FakePaymentProvider(), new FakeEmailProvider()),
        ...waitHandlers(),
        ...queueHandlers(queueProbe()),
        scheduledHandlers(),
      ],
      schedules: [scheduleOf(`roles-${suffix}`, '* * * * * *')],
      pollIntervalMs: 20,
      reconcileIntervalMs: 50,
      onEvent: (event) => {
        if (event.type === 'error') errors.push(JSON.stringify(event));
      },
    });
    await w.start();
    try {
      await client.sendEvent(paymentSettled, 'roles-pay', { orderId: 'roles-pay', paid: true });
      const deadline = Date.now() + 30_000;
      for (;;) {
        const rows = await worker.db
          .selectFrom('ledgerflow.workflow_run')
          .select(['id', 'status', 'workflow_name'])
          .execute();
        const mine = rows.filter((r) => runs.includes(r.id));
        const scheduled = rows.filter((r) => r.workflow_name === 'wt-scheduled' && r.status === 'completed');
        if (mine.every((r) => r.status === 'completed') && scheduled.length > 0) break;
        if (Date.now() > deadline)
          throw new Error(`runs did not complete as the worker role: ${JSON.stringify(rows)}; ${errors.join('\n')}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    } finally {
      await w.stop();
    }
    expect(errors).toEqual([]);
    const effects = await worker.db
      .selectFrom('ledgerflow.step_effect')
      .select(['step_name', 'status'])
      .where('workflow_id', '=', completedRun)
      .orderBy('step_name')
      .execute();
    expect(effects).toEqual([
      { step_name: 'charge', status: 'recorded' },
      { step_name: 'receipt', status: 'recorded' },
      { step_name: 'reserve', status: 'recorded' },
    ]);
  });

  it('refuses the worker any rewrite of the ledger: UPDATE by the trigger, DELETE by its grants', async () => {
    const where = `WHERE workflow_id = '${completedRun}' AND step_name = 'charge'`;
    const update = await refusal(
      worker,
      `UPDATE ledgerflow.step_effect SET effect = '{"chargeId": "forged"}' ${where}`,
    );
    expect(sqlStateOf(update)).toBe(SQLSTATE.RECORD_IMMUTABLE);
    expect((update as Error).message).toContain(
      `recorded ledger rows are immutable: step_effect (workflow_id ${completedRun}, step_name charge`,
    );
    expect(sqlStateOf(await refusal(worker, `DELETE FROM ledgerflow.step_effect ${where}`))).toBe(
      SQLSTATE.INSUFFICIENT_PRIVILEGE,
    );
    expect(sqlStateOf(await refusal(worker, `DELETE FROM ledgerflow.workflow_run WHERE id = '${completedRun}'`))).toBe(
      SQLSTATE.INSUFFICIENT_PRIVILEGE,
    );
    expect(
      sqlStateOf(await refusal(worker, `INSERT INTO ledgerflow.retention_role (role_name) VALUES ('${roles.worker}')`)),
    ).toBe(SQLSTATE.INSUFFICIENT_PRIVILEGE);
    expect(
      sqlStateOf(
        await refusal(worker, `UPDATE ledgerflow.step_result SET output = 'null' WHERE run_id = '${completedRun}'`),
      ),
    ).toBe(SQLSTATE.INSUFFICIENT_PRIVILEGE);
    // Even granted every privilege prune needs, a role that is not listed cannot take recorded history with the runs.
    const pruneGrants = (verb: 'GRANT' | 'REVOKE', to: 'TO' | 'FROM') =>
      `${verb} DELETE ON ledgerflow.workflow_run ${to} ${roles.worker}; ` +
      `${verb} INSERT, DELETE ON ledgerflow.run_archive, ledgerflow.effect_archive ${to} ${roles.worker};`;
    await sql.raw(pruneGrants('GRANT', 'TO')).execute(owner.db);
    try {
      const cascade = await refusal(worker, `DELETE FROM ledgerflow.workflow_run WHERE id = '${completedRun}'`);
      expect(sqlStateOf(cascade)).toBe(SQLSTATE.RECORD_IMMUTABLE);
      const unlisted = await runCli(['prune', '--completed-older-than', '0s', '--database-url', urlOf(roles.worker)]);
      expect(unlisted).toMatchObject({ code: 1, stdout: '' });
      expect(unlisted.stderr).toMatch(
        /^ledgerflow prune: ledgerflow: runs are deleted only by pruning, with their recorded history: workflow_run cannot be deleted; only the retention role may delete it/,
      );
    } finally {
      await sql.raw(pruneGrants('REVOKE', 'FROM')).execute(owner.db);
    }
    const prune = await runCli(['prune', '--completed-older-than', '0s', '--database-url', urlOf(roles.worker)]);
    expect(prune.code).toBe(1);
    expect(prune.stderr).toContain('ledgerflow prune: the database refused: permission denied');
    expect(prune.stderr).toContain('see docs/operations/roles.md');
  });

  it('lets the worker role take operator actions: a cancel with a reason is done and audited', async () => {
    const { runId } = await createClient({ store: worker, workflows: WORKFLOWS }).start(awaitPayment, {
      orderId: 'roles-never',
      timeoutMs: 60_000,
    });
    const cancel = await runCli([
      'cancel',
      runId,
      '--reason',
      'customer asked',
      '--actor',
      'ops',
      '--database-url',
      urlOf(roles.worker),
    ]);
    expect(cancel).toMatchObject({ code: 0, stderr: '' });
    const audit = await runCli(['audit', '--run', runId, '--json', '--database-url', urlOf(roles.reader)]);
    expect(JSON.parse(audit.stdout)).toMatchObject([{ actor: 'ops', action: 'cancel', reason: 'customer asked' }]);
  });

  it('lets the reader list runs, show a run and its effects, and read the dashboard, and nothing else', async () => {
    const url = urlOf(roles.reader);
    const runs = await runCli(['runs', '--database-url', url]);
    expect(runs).toMatchObject({ code: 0, stderr: '' });
    expect(runs.stdout).toContain(completedRun);
    const run = await runCli(['run', completedRun, '--database-url', url]);
    expect(run).toMatchObject({ code: 0, stderr: '' });
    expect(run.stdout).toContain('charge:roles-1');
    const effects = await runCli(['effects', '--run', completedRun, '--database-url', url]);
    expect(effects).toMatchObject({ code: 0, stderr: '' });
    expect(effects.stdout).toContain('recorded');

    const dashboard = createDashboard({ store: reader, workflows: WORKFLOWS });
    for (const page of ['/', `/runs/${completedRun}`, '/intents', '/queues', '/audit']) {
      const response = await dashboard.request(new Request(`http://127.0.0.1:4780${page}`));
      expect(response.status, page).toBe(200);
    }

    const cancel = await runCli(['cancel', completedRun, '--reason', 'a reader tries', '--database-url', url]);
    expect(cancel.code).toBe(1);
    expect(cancel.stderr).toContain(
      'ledgerflow cancel: the database refused: permission denied for table workflow_run',
    );
    expect(
      sqlStateOf(
        await refusal(reader, `UPDATE ledgerflow.workflow_run SET run_after = now() WHERE id = '${completedRun}'`),
      ),
    ).toBe(SQLSTATE.INSUFFICIENT_PRIVILEGE);
  });

  it('lets the retention role prune finished runs, old events and expired tombstones', async () => {
    await sql`UPDATE ledgerflow.workflow_run SET finished_at = finished_at - interval '2 days' WHERE finished_at IS NOT NULL`.execute(
      owner.db,
    );
    const finished = await owner.db
      .selectFrom('ledgerflow.workflow_run')
      .select('id')
      .where('finished_at', 'is not', null)
      .execute();
    const prune = await runCli([
      'prune',
      '--completed-older-than',
      '1d',
      '--json',
      '--database-url',
      urlOf(roles.retention),
    ]);
    expect(prune).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(prune.stdout)).toMatchObject({ runsPruned: finished.length, effectsArchived: 3 });
    expect(
      await owner.db
        .selectFrom('ledgerflow.step_effect')
        .select('step_name')
        .where('workflow_id', '=', completedRun)
        .execute(),
    ).toEqual([]);
    const archived = await reader.db
      .selectFrom('ledgerflow.effect_archive')
      .select('step_name')
      .where('run_id', '=', completedRun)
      .execute();
    expect(archived).toHaveLength(3);

    // Events (core 0016): the worker sends one with a dedupe key that nobody takes; the retention
    // role prunes it, the worker's resend finds its tombstone, and the tombstone expires.
    const client = createClient({ store: worker, workflows: WORKFLOWS });
    const sent = await client.sendEvent(
      paymentSettled,
      'roles-unclaimed',
      { orderId: 'roles-unclaimed', paid: true },
      { dedupeKey: 'psp-roles' },
    );
    await sql`UPDATE ledgerflow.event SET created_at = created_at - interval '2 days' WHERE id = ${sent.eventId}`.execute(
      owner.db,
    );
    const events = await runCli([
      'prune',
      '--completed-older-than',
      '1d',
      '--unconsumed-events-older-than',
      '1d',
      '--json',
      '--database-url',
      urlOf(roles.retention),
    ]);
    expect(events).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(events.stdout)).toMatchObject({ eventsPruned: 1, eventsArchived: 1 });
    expect(
      await client.sendEvent(
        paymentSettled,
        'roles-unclaimed',
        { orderId: 'roles-unclaimed', paid: true },
        { dedupeKey: 'psp-roles' },
      ),
    ).toEqual({
      eventId: sent.eventId,
      created: false,
      woke: 0,
    });
    // The worker may not delete events or rewrite the event archive itself.
    expect(sqlStateOf(await refusal(worker, `DELETE FROM ledgerflow.event WHERE dedupe_key = 'psp-roles'`))).toBe(
      SQLSTATE.INSUFFICIENT_PRIVILEGE,
    );
    expect(sqlStateOf(await refusal(worker, `DELETE FROM ledgerflow.event_archive`))).toBe(
      SQLSTATE.INSUFFICIENT_PRIVILEGE,
    );

    const expire = await runCli([
      'prune',
      '--completed-older-than',
      '1d',
      '--archive-older-than',
      '1d',
      '--json',
      '--database-url',
      urlOf(roles.retention),
    ]);
    expect(expire).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(expire.stdout)).toMatchObject({ archiveDeleted: finished.length, eventArchiveDeleted: 1 });
  });

  it('lets a worker prune in its retention timer once its role is the retention role too (grants --retention <worker>)', async () => {
    await sql.raw(grantStatements({ ...roles, retention: roles.worker })).execute(owner.db);
    const { runId } = await createClient({ store: worker, workflows: WORKFLOWS }).start(napper, { ms: 1 });
    const events: string[] = [];
    const w = createWorker({
      store: worker,
      workflows: waitHandlers(),
      pollIntervalMs: 20,
      reconcileIntervalMs: 0,
      retention: { completedOlderThanMs: 0, intervalMs: 50 },
      onEvent: (event) => {
        if (event.type === 'prune-pass' || event.type === 'error') events.push(event.type);
      },
    });
    await w.start();
    try {
      const deadline = Date.now() + 20_000;
      while (
        (await worker.db.selectFrom('ledgerflow.run_archive').select('id').where('id', '=', runId).execute()).length ===
        0
      ) {
        if (Date.now() > deadline)
          throw new Error(`the worker's retention timer did not prune ${runId}: ${events.join(', ')}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    } finally {
      await w.stop();
    }
    expect(events).toContain('prune-pass');
    expect(events).not.toContain('error');
  });
});

/**
 * PGlite has one session, whose user is the superuser `postgres`, and no logins: the roles are
 * taken with `SET ROLE` on that session. The worker role runs workflows with nothing but its grants;
 * the reader reads and cannot write.
 */
describe('least-privilege roles [pglite]', () => {
  const roles = { owner: 'postgres', worker: 'lf_worker', reader: 'lf_reader', retention: 'lf_pruner' };
  let store: TestStore;

  beforeAll(async () => {
    store = await createPGliteTestStore();
    await migrateForTest(store, [mixed, ...WAIT_WORKFLOWS]);
    await sql
      .raw(`${Object.values(roles)
        .slice(1)
        .map((role) => `CREATE ROLE ${role} NOLOGIN;`)
        .join('\n')}
      ${APP_SCHEMA_SQL}
      GRANT USAGE ON SCHEMA wt_app TO ${roles.worker};
      GRANT SELECT, INSERT ON wt_app.reservation TO ${roles.worker};
      GRANT USAGE ON SEQUENCE wt_app.reservation_id_seq TO ${roles.worker};`)
      .execute(store.db);
    await sql.raw(grantStatements(roles)).execute(store.db);
  });

  afterAll(async () => {
    await store.close();
  });

  async function refusal(statement: string): Promise<unknown> {
    try {
      await sql.raw(statement).execute(store.db);
      return undefined;
    } catch (error) {
      return error;
    }
  }

  it('runs workflows as the worker role and refuses it DDL and any rewrite of the ledger', async () => {
    await sql.raw(`SET ROLE ${roles.worker}`).execute(store.db);
    try {
      const client = createClient({ store, workflows: [mixed, ...WAIT_WORKFLOWS] });
      const runs = [
        (await client.start(mixed, { orderId: 'pgl-1', quantity: 1, email: 'a@example.com' })).runId,
        (await client.start(withChild, { id: 'pgl-child', n: 2, fail: false })).runId,
        (await client.start(napper, { ms: 20 })).runId,
      ];
      const w = createWorker({
        store,
        workflows: [mixedHandlers(new FakePaymentProvider(), new FakeEmailProvider()), ...waitHandlers()],
        pollIntervalMs: 20,
        reconcileIntervalMs: 0,
      });
      try {
        await w.drain({ timeoutMs: 20_000 });
      } finally {
        await w.stop();
      }
      const statuses = await store.db
        .selectFrom('ledgerflow.workflow_run')
        .select('status')
        .where('id', 'in', runs)
        .execute();
      expect(statuses.map((r) => r.status)).toEqual(['completed', 'completed', 'completed']);
      expect((await sql<{ current_user: string }>`SELECT current_user`.execute(store.db)).rows[0]!.current_user).toBe(
        roles.worker,
      );

      expect(sqlStateOf(await refusal('CREATE TABLE ledgerflow.intruder (id int)'))).toBe(
        SQLSTATE.INSUFFICIENT_PRIVILEGE,
      );
      const where = `WHERE workflow_id = '${runs[0]}' AND step_name = 'charge'`;
      expect(sqlStateOf(await refusal(`UPDATE ledgerflow.step_effect SET effect = 'null' ${where}`))).toBe(
        SQLSTATE.RECORD_IMMUTABLE,
      );
      expect(sqlStateOf(await refusal(`DELETE FROM ledgerflow.step_effect ${where}`))).toBe(
        SQLSTATE.INSUFFICIENT_PRIVILEGE,
      );
    } finally {
      await sql`RESET ROLE`.execute(store.db);
    }
  });

  it('lets the reader read and nothing else', async () => {
    await sql.raw(`SET ROLE ${roles.reader}`).execute(store.db);
    try {
      const runs = await store.db.selectFrom('ledgerflow.workflow_run').select('id').execute();
      expect(runs.length).toBeGreaterThan(0);
      expect(sqlStateOf(await refusal(`UPDATE ledgerflow.workflow_run SET run_after = now()`))).toBe(
        SQLSTATE.INSUFFICIENT_PRIVILEGE,
      );
      expect(
        sqlStateOf(await refusal(`INSERT INTO ledgerflow.retention_role (role_name) VALUES ('${roles.reader}')`)),
      ).toBe(SQLSTATE.INSUFFICIENT_PRIVILEGE);
    } finally {
      await sql`RESET ROLE`.execute(store.db);
    }
  });
});
