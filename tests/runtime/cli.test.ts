import { spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, type Client } from '../../runtime/client/client.js';
import type { WorkflowRunRow } from '../../runtime/store/tables.js';
import { createWorker, type Worker } from '../../runtime/worker/worker.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { createPGliteTestStore, createPgTestStore, type TestStore } from '../support/test-stores.js';
import {
  approvals,
  awaitPayment,
  CLI_WAIT_WORKFLOWS,
  workflows as waitRegistrations,
} from './cli-fixtures/wait-workflows.js';
import { greet } from './cli-fixtures/workflows.js';
import { outcomeOf, runCli as run } from '../support/run-cli.js';

const FIXTURES = 'tests/runtime/cli-fixtures';
const ORDER_INPUT = {
  orderId: 'o-1',
  customerId: 'c-1',
  email: 'a@example.com',
  currency: 'eur',
  lines: [{ sku: 'A', quantity: 2, unitPriceCents: 500 }],
};

interface Outcome {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** The real thing: `node bin/ledgerflow.js …` as a user runs it. */
function cli(args: readonly string[], env: Record<string, string> = {}): Promise<Outcome> {
  return outcomeOf(
    spawn(process.execPath, ['bin/ledgerflow.js', ...args], {
      env: { ...process.env, DATABASE_URL: '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
}

const STACK_LINE = /^\s+at /m;
/** A time as the CLI prints it, for regular expressions. */
const TIME = '\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\dZ';
const UUID = '[0-9a-f-]{36}';

describe('ledgerflow CLI against PostgreSQL', () => {
  let store: TestStore;
  let db: string[];
  let client: Client;

  beforeAll(async () => {
    store = await createPgTestStore();
    // The CLI's own migrate builds the schema from generated/migrations below.
    await sql`DROP SCHEMA ledgerflow CASCADE`.execute(store.db);
    db = ['--database-url', store.url!];
    client = createClient({ store, workflows: [greet] });
  });
  afterAll(async () => {
    await store?.close();
  });

  it('migrates generated/migrations, and a second run applies nothing', async () => {
    const first = await cli(['migrate', ...db]);
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    // ledgerflow's own core migrations first, from the package, then generated/migrations.
    expect(first.stdout).toMatch(/^applied {2}core\/0001_core\.sql\n/);
    expect(first.stdout).toMatch(/: \d+ migration\(s\) applied, 0 already applied\.\n$/);

    const second = await cli(['migrate', '--json', ...db]);
    expect(second.code).toBe(0);
    const result = JSON.parse(second.stdout) as { applied: string[]; skipped: string[]; database: string };
    expect(result.applied).toEqual([]);
    expect(result.skipped).toContain('core/0001_core.sql');
    expect(result.database).toMatch(/^PostgreSQL at 127\.0\.0\.1:\d+\/lf_test_/);

    // The CLI test workflows, as codegen would have emitted them.
    await migrateForTest(store, [greet]);
  });

  it("says so when a directory still has the core schema an earlier ledgerflow's codegen wrote, and does not run it", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lf-cli-legacy-'));
    try {
      copyFileSync('tests/runtime/fixtures/legacy-0001_core.sql', join(dir, '0001_core.sql'));
      const outcome = await run(['migrate', '--dir', dir, ...db]);
      expect(outcome.code).toBe(0);
      expect(outcome.stdout).toMatch(
        /^superseded {2}0001_core\.sql \(an earlier ledgerflow's core schema, replaced by the core migrations; not run\)\n/,
      );
      expect(outcome.stdout).toMatch(/: 0 migration\(s\) applied, \d+ already applied\.\n$/);
      // generated/migrations is not among the sources this time: its files are reported, the core and 0001_core.sql are not.
      expect(outcome.stderr).toContain('warning: 0002_');
      expect(outcome.stderr).not.toMatch(/core\/|0001_core/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('rejects invalid input with the schema error, exit 1, no stack trace and nothing written', async () => {
    const outcome = await cli([
      'start',
      'order-payment',
      '--input',
      JSON.stringify({ ...ORDER_INPUT, email: 'nope', lines: [] }),
      ...db,
    ]);
    expect(outcome.code).toBe(1);
    expect(outcome.stdout).toBe('');
    expect(outcome.stderr).toMatch(/^ledgerflow start: Invalid input for workflow "order-payment" v3:\n {2}- email: /);
    expect(outcome.stderr).toContain('  - lines: ');
    expect(outcome.stderr).toContain('Nothing was written.');
    expect(outcome.stderr).not.toMatch(STACK_LINE);
    expect(await client.listRuns({ workflow: 'order-payment' })).toEqual([]);
  });

  it('rejects malformed JSON as a usage error (exit 2) pointing at --help', async () => {
    const outcome = await cli(['start', 'order-payment', '--input', '{"orderId": ', ...db]);
    expect(outcome.code).toBe(2);
    expect(outcome.stderr).toMatch(
      /^ledgerflow start: --input is not valid JSON: .+\nRun `ledgerflow start --help` for usage\.\n$/,
    );
  });

  it('starts a run (default module generated/index.ts), idempotently with --dedupe-key', async () => {
    const input = JSON.stringify(ORDER_INPUT);
    const first = await run(['start', 'order-payment', '--input', input, '--dedupe-key', 'o-1', ...db]);
    expect(first.code).toBe(0);
    const runId = /^Started run ([0-9a-f-]{36}) \(order-payment v3\)\.\n$/.exec(first.stdout)?.[1];
    expect(runId).toBeDefined();

    const again = await run(['start', 'order-payment', '--input', input, '--dedupe-key', 'o-1', '--json', ...db]);
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toEqual({
      runId,
      created: false,
      workflow: 'order-payment',
      version: 3,
      status: 'pending',
      deadlineAt: null,
    });

    const conflict = await run([
      'start',
      'order-payment',
      '--input',
      JSON.stringify({ ...ORDER_INPUT, currency: 'usd' }),
      '--dedupe-key',
      'o-1',
      ...db,
    ]);
    expect(conflict.code).toBe(1);
    expect(conflict.stderr).toContain('was started with a different input');
    expect(conflict.stderr).not.toMatch(STACK_LINE);
  });

  it('lists runs as an aligned table and as JSON, filtered by status', async () => {
    const table = await run(['runs', ...db]);
    expect(table.code).toBe(0);
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(
      /^RUN {35}WORKFLOW {10}STATUS {3}STEP {16}WAITING FOR {2}CREATED {15}FINISHED {2}PARENT {2}ERROR$/,
    );
    expect(lines[1]).toMatch(
      /^[0-9a-f-]{36} {2}order-payment v3 {2}pending {2}1 of 4: priceOrder {2}- {12}\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ {2}- {9}- {7}-$/,
    );

    const json = await run(['runs', '--json', '--status', 'pending', ...db]);
    const runs = JSON.parse(json.stdout) as WorkflowRunRow[];
    expect(runs.map((r) => [r.workflow_name, r.status])).toEqual([['order-payment', 'pending']]);
    expect(await run(['runs', '--status', 'completed', ...db])).toMatchObject({ code: 0, stdout: 'No runs.\n' });

    const bad = await run(['runs', '--status', 'done', ...db]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain(
      'Unknown --status done. Use one of: pending, running, waiting, completed, failed, cancelled, needs_reconciliation, compensated, compensation_failed.',
    );
  });

  it('shows one run with its records, and reports unknown ids without a stack', async () => {
    const [listed] = await client.listRuns({ workflow: 'order-payment' });
    const shown = await run(['run', listed!.id, ...db]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain(
      `run            ${listed!.id}\nworkflow       order-payment v3\nstatus         pending\n`,
    );
    expect(shown.stdout).toContain('\nSteps: none completed\n');
    const json = JSON.parse((await run(['run', listed!.id, '--json', ...db])).stdout) as {
      id: string;
      steps: unknown[];
      effects: unknown[];
    };
    expect(json).toMatchObject({ id: listed!.id, steps: [], attempts: [], effects: [] });

    const missing = await run(['run', '00000000-0000-4000-8000-000000000000', ...db]);
    expect(missing).toEqual({
      code: 1,
      stdout: '',
      stderr: 'ledgerflow run: No run with id 00000000-0000-4000-8000-000000000000 in this database.\n',
    });
    expect((await run(['run', ...db])).code).toBe(2);
  });

  it('lists effects and open intents, as a table and as JSON', async () => {
    const { runId } = await client.start(greet, { name: 'intent' });
    await store.db
      .insertInto('ledgerflow.step_effect')
      .values({
        workflow_id: runId,
        step_name: 'deliver',
        idempotency_key: 'deliver:intent',
        effect: {},
        status: 'intent',
        kind: 'external',
        request_hash: 'h',
        attempt: 1,
        fencing_token: 1,
        reconcile_after: sql<Date>`now() + interval '1 minute'`,
      })
      .execute();
    const pending = await run(['effects', '--pending', ...db]);
    expect(pending.code).toBe(1);
    const lines = pending.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(
      /^RUN {35}STEP {5}KEY {13}KIND {6}STATUS {2}ATTEMPT {2}INTENT {16}RECORDED {2}RESOLUTION$/,
    );
    expect(lines[1]).toContain(`${runId}  deliver  deliver:intent  external  intent        1  `);
    const json = JSON.parse((await run(['effects', '--json', '--run', runId, ...db])).stdout) as Array<{
      idempotency_key: string;
    }>;
    expect(json.map((e) => e.idempotency_key)).toEqual(['deliver:intent']);
    // The exit code is the rule's, not the format's: a listing is 0, open intents are a finding.
    expect((await run(['effects', '--json', '--run', runId, ...db])).code).toBe(0);
    expect((await run(['effects', '--pending', '--json', '--run', runId, ...db])).code).toBe(1);
    expect(await run(['effects', '--pending', '--run', '00000000-0000-4000-8000-000000000000', ...db])).toEqual({
      code: 0,
      stdout: 'No open intents.\n',
      stderr: '',
    });
  });

  it('reconciles: an intent nobody can resolve parks its run and exits 1', async () => {
    const { runId } = await client.start(greet, { name: 'parked' });
    await store.db.transaction().execute(async (trx) => {
      await trx.updateTable('ledgerflow.workflow_run').set({ current_step: 1 }).where('id', '=', runId).execute();
      await trx
        .insertInto('ledgerflow.step_result')
        .values({
          run_id: runId,
          workflow_name: 'cli-greet',
          workflow_version: 1,
          step_name: 'greet',
          kind: 'step',
          output: { text: 'hello parked' },
          attempt: 1,
        })
        .execute();
      await trx
        .insertInto('ledgerflow.step_effect')
        .values({
          workflow_id: runId,
          step_name: 'deliver',
          idempotency_key: 'deliver:parked',
          effect: {},
          status: 'intent',
          kind: 'external',
          request_hash: 'h',
          attempt: 1,
          fencing_token: 0,
          intent_at: sql<Date>`now() - interval '1 hour'`,
          reconcile_after: sql<Date>`now() - interval '59 minutes'`,
        })
        .execute();
    });
    const outcome = await run(['reconcile', '--workflows', `${FIXTURES}/workflows.ts`, ...db]);
    expect(outcome.stderr).toBe('');
    expect(outcome.code).toBe(1);
    expect(outcome.stdout).toMatch(/^RUN {35}WORKFLOW {5}STEP {5}KEY {13}OUTCOME {2}DETAIL\n/);
    expect(outcome.stdout).toContain(
      `${runId}  cli-greet@1  deliver  deliver:parked  parked   reconcile could not tell: the CLI test provider keeps no records\n`,
    );
    expect(outcome.stdout).toMatch(
      /^1 due intent\(s\) examined: 0 recorded, 0 released, 1 parked, 0 deferred, 0 skipped, 0 errors\.$/m,
    );
    expect((await client.getRun(runId)).status).toBe('needs_reconciliation');
  });

  it('runs a worker that completes runs and exits 0 on SIGTERM after finishing its in-flight step', async () => {
    const child = spawn(
      process.execPath,
      [
        'bin/ledgerflow.js',
        'worker',
        '--workflows',
        `${FIXTURES}/workflows.ts`,
        '--poll-ms',
        '50',
        '--reconcile-ms',
        '0',
        '--quiet',
        ...db,
      ],
      { env: { ...process.env, DATABASE_URL: '' }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      await until(
        () => stderr.includes('Stop with Ctrl-C or SIGTERM.'),
        () => `worker did not start:\n${stderr}`,
      );
      expect(stderr).toMatch(/^Worker \S+ running cli-greet v1 on PostgreSQL at /);

      // `start --wait` returns once the worker completed the run (its external step included).
      const quick = await run([
        'start',
        'cli-greet',
        '--input',
        '{"name":"quick"}',
        '--workflows',
        `${FIXTURES}/workflows.ts`,
        '--wait',
        '--json',
        ...db,
      ]);
      expect(quick.code).toBe(0);
      const { run: finished } = JSON.parse(quick.stdout) as {
        run: { status: string; steps: Array<{ step_name: string }> };
      };
      expect(finished.status).toBe('completed');
      expect(finished.steps.map((s) => s.step_name).sort()).toEqual(['deliver', 'greet']);

      const slow = await client.start(greet, { name: 'slow', slowMs: 1_500 });
      await until(
        async () => (await client.getRun(slow.runId)).attempts.length > 0,
        () => 'the slow run was not claimed',
      );
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(stderr).toContain('SIGTERM: no new claims; finishing in-flight steps…');
      const after = await client.getRun(slow.runId);
      expect(after.steps.map((s) => s.step_name)).toContain('greet');
      expect(after.lease_owner).toBeNull();
      expect(stderr).not.toMatch(STACK_LINE);
    } finally {
      killIfRunning(child);
    }
  });

  it('refuses a worker without handlers, without --workflows, or with a module lacking the export (exit 2)', async () => {
    const bare = await run(['worker', '--workflows', `${FIXTURES}/definitions-only.ts`, ...db]);
    expect(bare.code).toBe(2);
    expect(bare.stderr).toContain('exports workflow definitions without handlers (cli-greet v1)');
    const none = await run(['worker', ...db]);
    expect(none).toMatchObject({ code: 2 });
    expect(none.stderr).toContain('--workflows <module> is required');
    const noExport = await run([
      'start',
      'cli-greet',
      '--input',
      '{}',
      '--workflows',
      `${FIXTURES}/no-export.ts`,
      ...db,
    ]);
    expect(noExport.code).toBe(2);
    expect(noExport.stderr).toContain('has no export named "workflows"');
    const missing = await run(['reconcile', '--workflows', `${FIXTURES}/nope.ts`, ...db]);
    expect(missing.stderr).toContain('--workflows tests/runtime/cli-fixtures/nope.ts: no such file.');
  });

  it('start --wait gives up after --timeout with exit 1, leaving the run pending', async () => {
    const outcome = await run([
      'start',
      'cli-greet',
      '--input',
      '{"name":"nobody-works"}',
      '--workflows',
      `${FIXTURES}/workflows.ts`,
      '--wait',
      '--timeout',
      '100',
      ...db,
    ]);
    expect(outcome.code).toBe(1);
    expect(outcome.stderr).toMatch(
      /^Started run \S+; waiting up to 100 ms…\nledgerflow start: Run \S+ is still pending after 100 ms; it goes on, wait again or inspect it\.\n$/,
    );
  });

  it('cancels a run once, exit 1 the second time', async () => {
    const { runId } = await client.start(greet, { name: 'cancel-me' });
    expect(await run(['cancel', runId, ...db])).toEqual({ code: 0, stdout: `Cancelled run ${runId}.\n`, stderr: '' });
    expect(await run(['cancel', runId, ...db])).toMatchObject({
      code: 1,
      stdout: `Run ${runId} was not cancelled: it is already cancelled.\n`,
    });
  });
});

describe('ledgerflow CLI: events, signals, waits and children (PostgreSQL)', () => {
  const WAITS = `${FIXTURES}/wait-workflows.ts`;
  let store: TestStore;
  let db: string[];
  let client: Client;
  let worker: Worker;

  beforeAll(async () => {
    store = await createPgTestStore();
    await migrateForTest(store, CLI_WAIT_WORKFLOWS);
    db = ['--database-url', store.url!];
    client = createClient({ store, workflows: CLI_WAIT_WORKFLOWS });
    worker = createWorker({
      store,
      workflows: waitRegistrations,
      pollIntervalMs: 25,
      reconcileIntervalMs: 0,
      concurrency: 8,
    });
    await worker.start();
  });
  afterAll(async () => {
    await worker?.stop();
    await store?.close();
  });

  const eventCount = async (): Promise<number> =>
    (await sql<{ n: number }>`SELECT count(*)::int AS n FROM ledgerflow.event`.execute(store.db)).rows[0]!.n;
  const statusOf = async (runId: string): Promise<string> => (await client.getRun(runId)).status;

  it('start --deadline sets a deadline; runs --status waiting and run show what a run waits for and until when', async () => {
    const started = await run([
      'start',
      'cli-await-payment',
      '--input',
      '{"orderId":"o-1","express":false}',
      '--deadline',
      '3600000',
      '--workflows',
      WAITS,
      '--json',
      ...db,
    ]);
    expect(started.stderr).toBe('');
    const { runId, deadlineAt } = JSON.parse(started.stdout) as { runId: string; deadlineAt: string };
    expect(Date.parse(deadlineAt)).toBeGreaterThan(Date.now() + 3_500_000);
    expect(
      (await run(['start', 'cli-await-payment', '--input', '{}', '--deadline', '0', '--workflows', WAITS, ...db]))
        .stderr,
    ).toContain('--deadline must be an integer >= 1 (got "0").');
    const prioritized = await run([
      'start',
      'cli-await-payment',
      '--input',
      '{"orderId":"o-prio","express":false}',
      '--priority=-3',
      '--workflows',
      WAITS,
      '--json',
      ...db,
    ]);
    expect(prioritized.stderr).toBe('');
    const prioritizedId = (JSON.parse(prioritized.stdout) as { runId: string }).runId;
    expect((await client.getRun(prioritizedId)).priority).toBe(-3);
    await client.cancel(prioritizedId);
    expect(
      (await run(['start', 'cli-await-payment', '--input', '{}', '--priority', 'high', '--workflows', WAITS, ...db]))
        .stderr,
    ).toContain('--priority must be an integer (got "high").');
    const napping = await run([
      'start',
      'cli-napper',
      '--input',
      '{"ms":3600000}',
      '--deadline',
      '7200000',
      '--workflows',
      WAITS,
      ...db,
    ]);
    const napId = new RegExp(
      `^Started run (${UUID}) \\(cli-napper v1\\); cancelled if still unfinished at ${TIME}\\.\\n$`,
    ).exec(napping.stdout)?.[1];
    expect(napId, napping.stdout + napping.stderr).toBeDefined();
    await until(
      async () => (await statusOf(runId)) === 'waiting' && (await statusOf(napId!)) === 'waiting',
      () => 'the runs did not wait',
    );

    const listed = await run(['runs', '--status', 'waiting', ...db]);
    expect(listed.code).toBe(0);
    const lines = listed.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^RUN +WORKFLOW +STATUS +STEP +WAITING FOR +CREATED +FINISHED +PARENT +ERROR$/);
    expect(lines).toHaveLength(3);
    expect(listed.stdout).toMatch(
      new RegExp(
        `^${runId} {2}cli-await-payment v1 {2}waiting {2}2 of 3: settled {2}event cli\\.payment\\.settled key o-1 until ${TIME} +${TIME} {2}- +- +-$`,
        'm',
      ),
    );
    expect(listed.stdout).toMatch(
      new RegExp(`^${napId} {2}cli-napper v1 +waiting {2}1 of 2: nap {6}sleep until ${TIME} +${TIME} {2}- +- +-$`, 'm'),
    );

    const shown = await run(['run', runId, ...db]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(
      new RegExp(
        `^status +waiting\\nwaiting for +event cli\\.payment\\.settled key o-1 until ${TIME} \\(step settled\\)$`,
        'm',
      ),
    );
    expect(shown.stdout).toMatch(/^parent +-$/m);
    expect(shown.stdout).toMatch(new RegExp(`^deadline +${TIME} \\(cancelled if unfinished then\\)$`, 'm'));
    // The step whose condition was false is recorded, and marked as skipped.
    expect(shown.stdout).toMatch(/^expedite +step +1 +- +\S+ \S+ {2}\(skipped: its condition was false\)$/m);
    expect(shown.stdout).toMatch(
      new RegExp(
        `^Waits:\\nSTEP +KIND +EVENT +KEY +UNTIL +SINCE +RESOLVED\\nsettled {2}event {2}cli\\.payment\\.settled {2}o-1 {2}${TIME} {2}${TIME} {2}-\\n`,
        'm',
      ),
    );
    expect(shown.stdout).toContain('\nChildren: none\n');
    const json = JSON.parse((await run(['run', runId, '--json', ...db])).stdout) as {
      waiting_for: unknown;
      waits: unknown[];
      children: unknown[];
    };
    expect(json).toMatchObject({
      waiting_for: { kind: 'event', step: 'settled', event: 'cli.payment.settled', key: 'o-1' },
      children: [],
    });
    expect(json.waits).toHaveLength(1);
  });

  it('send-event refuses an unknown event, malformed JSON and an invalid payload, writing nothing; a valid one wakes the run', async () => {
    const [waiting] = await client.listRuns({ workflow: awaitPayment.name, status: 'waiting' });
    const runId = waiting!.id;
    const before = await eventCount();

    const unknown = await run(['send-event', 'cli.nope', 'o-1', '--payload', '{}', '--workflows', WAITS, ...db]);
    expect(unknown).toEqual({
      code: 1,
      stdout: '',
      stderr:
        'ledgerflow send-event: Unknown event "cli.nope". Events the registered workflows wait for: cli.approval, cli.payment.settled.\n',
    });
    const invalid = await run([
      'send-event',
      'cli.payment.settled',
      'o-1',
      '--payload',
      '{"orderId":"o-1","paid":"yes"}',
      '--workflows',
      WAITS,
      ...db,
    ]);
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toMatch(
      /^ledgerflow send-event: Invalid payload for event "cli\.payment\.settled":\n {2}- paid: .+\nNothing was written\.\n$/,
    );
    const malformed = await run([
      'send-event',
      'cli.payment.settled',
      'o-1',
      '--payload',
      '{"paid":',
      '--workflows',
      WAITS,
      ...db,
    ]);
    expect(malformed.code).toBe(2);
    expect(malformed.stderr).toMatch(
      /^ledgerflow send-event: --payload is not valid JSON: .+ Nothing was written\.\nRun `ledgerflow send-event --help` for usage\.\n$/,
    );
    expect((await run(['send-event', 'cli.payment.settled', 'o-1', '--workflows', WAITS, ...db])).stderr).toContain(
      '--payload <json> is required',
    );
    expect(
      (await run(['send-event', 'cli.payment.settled', '--payload', '{}', '--workflows', WAITS, ...db])).stderr,
    ).toContain('expects an event name and a correlation key.');
    expect(await eventCount()).toBe(before);
    expect(await statusOf(runId)).toBe('waiting');

    const dir = mkdtempSync(join(tmpdir(), 'lf-cli-event-'));
    try {
      const file = join(dir, 'settled.json');
      writeFileSync(file, JSON.stringify({ orderId: 'o-1', paid: true }));
      const sent = await run([
        'send-event',
        'cli.payment.settled',
        'o-1',
        '--payload',
        `@${file}`,
        '--dedupe-key',
        'psp-1',
        '--workflows',
        WAITS,
        ...db,
      ]);
      expect(sent.stderr).toBe('');
      const eventId = new RegExp(
        `^Sent event cli\\.payment\\.settled with key o-1 \\((${UUID})\\); woke 1 waiting run\\(s\\)\\.\\n$`,
      ).exec(sent.stdout)?.[1];
      expect(eventId).toBeDefined();
      const again = await run([
        'send-event',
        'cli.payment.settled',
        'o-1',
        '--payload',
        `@${file}`,
        '--dedupe-key',
        'psp-1',
        '--workflows',
        WAITS,
        '--json',
        ...db,
      ]);
      expect(JSON.parse(again.stdout)).toEqual({
        eventId,
        created: false,
        woke: 0,
        event: 'cli.payment.settled',
        key: 'o-1',
      });
      const conflict = await run([
        'send-event',
        'cli.payment.settled',
        'o-9',
        '--payload',
        `@${file}`,
        '--dedupe-key',
        'psp-1',
        '--workflows',
        WAITS,
        ...db,
      ]);
      expect(conflict.code).toBe(1);
      expect(conflict.stderr).toContain('Dedupe key "psp-1" of event "cli.payment.settled" already names event');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const done = await client.waitForRun(runId, { timeoutMs: 20_000, pollMs: 20 });
    expect(done.output).toMatchObject({ outcome: { status: 'paid=true' } });
    const shown = await run(['run', runId, ...db]);
    expect(shown.stdout).toMatch(/^waiting for +-$/m);
    expect(shown.stdout).toMatch(
      new RegExp(`^settled {2}event {2}cli\\.payment\\.settled {2}o-1 {2}${TIME} {2}${TIME} {2}${TIME}\\n`, 'm'),
    );

    const early = await run([
      'send-event',
      'cli.payment.settled',
      'o-2',
      '--payload',
      '{"orderId":"o-2","paid":false}',
      '--workflows',
      WAITS,
      ...db,
    ]);
    expect(early.stdout).toMatch(
      /^Sent event cli\.payment\.settled with key o-2 \(\S+\)\. No run waits for it yet: it is kept until a step waiting for it takes it\.\n$/,
    );
  });

  it('signal refuses an unknown or finished run and writes nothing; it wakes a waiting child; run and runs show the children', async () => {
    const parent = await client.start(approvals, { id: 'p-1', approvers: ['ann', 'bob'] });
    await until(
      async () => {
        const details = await client.getRun(parent.runId);
        return (
          details.status === 'waiting' &&
          details.children.length === 2 &&
          details.children.every((c) => c.status === 'waiting')
        );
      },
      () => 'the parent and its two children did not wait',
    );
    const { children } = await client.getRun(parent.runId);
    const [ann, bob] = children;

    const listed = await run(['runs', '--status', 'waiting', '--workflow', approvals.name, ...db]);
    expect(listed.stdout).toMatch(
      new RegExp(
        `^${parent.runId} {2}cli-approvals v1 {2}waiting {2}1 of 2: approvals {2}2 of 2 children open +${TIME} {2}- +- +-$`,
        'm',
      ),
    );
    const kids = await run(['runs', '--workflow', 'cli-await-approval', ...db]);
    expect(kids.stdout).toMatch(
      new RegExp(
        `^${ann!.id} {2}cli-await-approval v1 {2}waiting {2}1 of 2: approved {2}signal cli\\.approval +${TIME} {2}- {9}${parent.runId} approvals\\[0\\] {2}-$`,
        'm',
      ),
    );
    expect(kids.stdout).toContain(`${parent.runId} approvals[1]`);

    const shownParent = await run(['run', parent.runId, ...db]);
    expect(shownParent.stderr).toBe('');
    expect(shownParent.stdout).toMatch(/^waiting for +2 of 2 children open \(step approvals\)$/m);
    // Waiting for children only (no timer, no deadline), the run is due when they wake it.
    expect(shownParent.stdout).toMatch(/^run after +when woken \(no timer\)$/m);
    expect(JSON.parse((await run(['run', parent.runId, '--json', ...db])).stdout)).toMatchObject({
      run_after: 'infinity',
      deadline_at: null,
    });
    expect(shownParent.stdout).toContain(
      'Children:\n' +
        `STEP       ITEM  WORKFLOW            STATUS   RUN\n` +
        `approvals     0  cli-await-approval  waiting  ${ann!.id}\n` +
        `approvals     1  cli-await-approval  waiting  ${bob!.id}\n`,
    );
    const shownChild = await run(['run', ann!.id, ...db]);
    expect(shownChild.stdout).toMatch(/^waiting for +signal cli\.approval \(step approved\)$/m);
    expect(shownChild.stdout).toContain(`\nparent         ${parent.runId}, step approvals, item 0\n`);
    expect(shownChild.stdout).toMatch(
      new RegExp(`^approved {2}signal {2}cli\\.approval {2}- {4}- {6}${TIME} {2}-$`, 'm'),
    );

    const before = await eventCount();
    const nobody = '00000000-0000-4000-8000-000000000000';
    expect(
      await run(['signal', nobody, 'cli.approval', '--payload', '{"by":"ops"}', '--workflows', WAITS, ...db]),
    ).toEqual({
      code: 1,
      stdout: '',
      stderr: `ledgerflow signal: No run with id ${nobody} in this database; nothing was sent.\n`,
    });
    const invalid = await run([
      'signal',
      ann!.id,
      'cli.approval',
      '--payload',
      '{"by":""}',
      '--workflows',
      WAITS,
      ...db,
    ]);
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toMatch(
      /^ledgerflow signal: Invalid payload for event "cli\.approval":\n {2}- by: .+\nNothing was written\.\n$/,
    );
    const unknown = await run([
      'signal',
      ann!.id,
      'cli.approved',
      '--payload',
      '{"by":"ops"}',
      '--workflows',
      WAITS,
      ...db,
    ]);
    expect(unknown.stderr).toBe(
      'ledgerflow signal: Unknown event "cli.approved". Events the registered workflows wait for: cli.approval, cli.payment.settled.\n',
    );
    expect(await eventCount()).toBe(before);

    const woke = await run([
      'signal',
      ann!.id,
      'cli.approval',
      '--payload',
      '{"by":"ops"}',
      '--workflows',
      WAITS,
      ...db,
    ]);
    expect(woke).toMatchObject({ code: 0, stderr: '' });
    expect(woke.stdout).toMatch(
      new RegExp(
        `^Signalled run ${ann!.id} with cli\\.approval \\(${UUID}\\); it was waiting for it and is woken\\.\\n$`,
      ),
    );
    const json = await run([
      'signal',
      bob!.id,
      'cli.approval',
      '--payload',
      '{"by":"risk"}',
      '--dedupe-key',
      'appr-2',
      '--workflows',
      WAITS,
      '--json',
      ...db,
    ]);
    expect(JSON.parse(json.stdout)).toMatchObject({ created: true, woke: 1, event: 'cli.approval', runId: bob!.id });

    const done = await client.waitForRun(parent.runId, { timeoutMs: 20_000, pollMs: 20 });
    expect(done.output).toMatchObject({ summary: { approvedBy: ['ops', 'risk'] } });
    expect((await run(['run', parent.runId, ...db])).stdout).toContain(
      `approvals     0  cli-await-approval  completed  ${ann!.id}\n`,
    );
    expect(
      await run(['signal', ann!.id, 'cli.approval', '--payload', '{"by":"late"}', '--workflows', WAITS, ...db]),
    ).toEqual({
      code: 1,
      stdout: '',
      stderr: `ledgerflow signal: Run ${ann!.id} is completed: no step of it will take a signal. Nothing was sent.\n`,
    });
    expect(await eventCount()).toBe(before + 2);
  });
});

describe('ledgerflow CLI: command line and environment errors', () => {
  it('prints help with exit 0, and usage errors with exit 2', async () => {
    const help = await run(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^Usage: ledgerflow <command> \[options\]\n/);
    expect((await run(['start', '--help'])).stdout).toMatch(/^Usage: ledgerflow start <workflow> --input <json>/);
    expect((await run([])).code).toBe(2);
    expect(await run(['frobnicate'])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('Unknown command "frobnicate". Commands: codegen, init, migrate, worker,'),
    });
    const unknownOption = await run(['runs', '--colour']);
    expect(unknownOption.code).toBe(2);
    expect(unknownOption.stderr).toMatch(/^ledgerflow runs: Unknown option '--colour'/);
    expect((await run(['runs', '--limit', 'many'])).stderr).toContain('--limit must be an integer >= 1 (got "many").');
    expect((await run(['runs', '--database-url', 'mysql://x/y'])).stderr).toContain('must start with postgres://');
  });

  it('reports an unreachable database without a stack trace', async () => {
    const outcome = await run(['runs', '--database-url', 'postgres://nobody@127.0.0.1:1/none']);
    expect(outcome.code).toBe(1);
    expect(outcome.stderr).toMatch(/^ledgerflow runs: cannot use the database: .*ECONNREFUSED.*Check --database-url/);
    expect(outcome.stderr).not.toMatch(STACK_LINE);
  });

  it('says where the data lives when it uses PGlite', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lf-cli-pglite-'));
    try {
      const prepared = await createPGliteTestStore({ dataDir: join(dir, 'db') });
      await prepared.close();
      const outcome = await run(['runs', '--data-dir', join(dir, 'db')]);
      expect(outcome).toEqual({
        code: 0,
        stdout: 'No runs.\n',
        stderr: `Using PGlite (embedded, fsync off) at ${join(dir, 'db')}. Set DATABASE_URL or pass --database-url to use PostgreSQL.\n`,
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

async function until(
  check: () => boolean | Promise<boolean>,
  describe: () => string,
  timeoutMs = 30_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(describe());
    await new Promise((r) => setTimeout(r, 25));
  }
}

function killIfRunning(child: ChildProcess): void {
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
}
