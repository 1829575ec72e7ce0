import { userInfo } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, createWorker, type Client } from 'ledgerflow/runtime';
import { migrateForTest } from '../support/migrate-for-test.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { runState } from './fixtures/run-helpers.js';
import {
  OPERATOR_WORKFLOWS,
  operatorHandlers,
  operatorProvider,
  pay,
  payOnce,
  type OperatorProvider,
} from './fixtures/operator-workflows.js';
import { runCli as run } from '../support/run-cli.js';

const MODULE = 'tests/runtime/fixtures/operator-module.ts';

/** `ledgerflow retry`, `resolve`, `cancel --reason`, `queues pause|resume`, `runs --dedupe-key` and `audit`. */
describe('ledgerflow operator commands (PostgreSQL)', () => {
  let store: TestStore;
  let client: Client;
  let db: string[];
  beforeAll(async () => {
    store = await createPgTestStore();
    await migrateForTest(store, OPERATOR_WORKFLOWS);
    client = createClient({ store, workflows: OPERATOR_WORKFLOWS });
    db = ['--database-url', store.url!];
  }, 60_000);
  afterAll(() => store.close());

  const drain = async (provider: OperatorProvider): Promise<void> => {
    const worker = createWorker({
      store,
      workflows: operatorHandlers(provider),
      pollIntervalMs: 20,
      leaseMs: 5_000,
      reconcileIntervalMs: 0,
    });
    await worker.drain({ timeoutMs: 20_000 });
    await worker.stop();
  };

  it('retry: needs --reason, retries a failed run, refuses one that is not failed', async () => {
    const provider = operatorProvider();
    provider.shipFailures = 2;
    const { runId } = await client.start(pay, { id: 'cli-retry' });
    await drain(provider);

    const bare = await run(['retry', runId, ...db]);
    expect(bare.code).toBe(2);
    expect(bare.stderr).toContain(
      'ledgerflow retry: --reason <text> is required: a retry is written to the audit trail with who did it and why.',
    );

    const retried = await run(['retry', runId, '--reason', 'carrier is back', '--actor', 'ana', ...db]);
    expect(retried).toEqual({
      code: 0,
      stdout: `Retried run ${runId} (was failed) from step "ship": pending, due now.\n`,
      stderr: '',
    });
    const again = await run(['retry', runId, '--reason', 'twice', '--json', ...db]);
    expect(again.code).toBe(1);
    expect(again.stderr).toBe(
      `ledgerflow retry: Run ${runId} is pending: only a failed, cancelled or compensation_failed run can be retried. Nothing was done.\n`,
    );
    await drain(provider);
    expect((await runState(store, runId)).run.status).toBe('completed');
  });

  it('resolve: --found is checked against the step schema and recorded; the output names what was recorded', async () => {
    const provider = operatorProvider();
    provider.chargeMode = 'unknown';
    const { runId } = await client.start(payOnce, { id: 'cli-found' });
    await drain(provider);
    expect((await runState(store, runId)).run.status).toBe('needs_reconciliation');

    const neither = await run(['resolve', runId, 'charge', '--reason', 'x', '--workflows', MODULE, ...db]);
    expect(neither.code).toBe(2);
    expect(neither.stderr).toContain(
      'Say what you found: either --found <json> (the effect happened, with this output) or --not-found.',
    );
    const invalid = await run([
      'resolve',
      runId,
      'charge',
      '--found',
      '{"chargeId":7}',
      '--reason',
      'x',
      '--workflows',
      MODULE,
      ...db,
    ]);
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toContain(
      'Invalid output for step "charge" of op-pay-once v1:\n  - chargeId: Invalid input: expected string, received number',
    );
    const notJson = await run([
      'resolve',
      runId,
      'charge',
      '--found',
      '{chargeId',
      '--reason',
      'x',
      '--workflows',
      MODULE,
      ...db,
    ]);
    expect(notJson.code).toBe(2);
    expect(notJson.stderr).toContain('--found is not valid JSON');

    const found = await run([
      'resolve',
      runId,
      'charge',
      '--found',
      '{"chargeId":"ch_cli"}',
      '--reason',
      'seen in the PSP',
      '--workflows',
      MODULE,
      ...db,
    ]);
    expect(found).toEqual({
      code: 0,
      stdout: `Recorded the effect of step "charge" (key op-charge:cli-found) with output {"chargeId":"ch_cli"}; run ${runId} is pending.\n`,
      stderr: '',
    });
    const twice = await run(['resolve', runId, 'charge', '--not-found', '--reason', 'x', '--workflows', MODULE, ...db]);
    expect(twice.code).toBe(1);
    expect(twice.stderr).toContain('has no open intent to resolve (key "op-charge:cli-found" recorded)');
    await drain(provider);
    expect((await runState(store, runId)).run.output).toMatchObject({ charge: { chargeId: 'ch_cli' } });
    expect(provider.performed).toEqual(['op-charge:cli-found']);
  });

  it('resolve --not-found --json releases the key; cancel --reason is audited with the OS user as actor', async () => {
    const provider = operatorProvider();
    provider.chargeMode = 'unknown';
    const { runId } = await client.start(payOnce, { id: 'cli-not-found' });
    await drain(provider);
    const released = await run([
      'resolve',
      runId,
      'charge',
      '--not-found',
      '--reason',
      'not at the PSP',
      '--workflows',
      MODULE,
      '--json',
      ...db,
    ]);
    expect(released.code).toBe(0);
    expect(JSON.parse(released.stdout)).toEqual({
      runId,
      stepName: 'charge',
      idempotencyKey: 'op-charge:cli-not-found',
      status: 'released',
      runStatus: 'failed',
    });

    const { runId: other } = await client.start(pay, { id: 'cli-cancel' });
    const cancelled = await run(['cancel', other, '--reason', 'duplicate order', ...db]);
    expect(cancelled).toEqual({ code: 0, stdout: `Cancelled run ${other}.\n`, stderr: '' });
    expect(await client.listAudit({ runId: other })).toEqual([
      expect.objectContaining({ action: 'cancel', actor: userInfo().username, reason: 'duplicate order' }),
    ]);
    const actorOnly = await run(['cancel', other, '--actor', 'ana', ...db]);
    expect(actorOnly.code).toBe(2);
    expect(actorOnly.stderr).toContain('--actor goes with --reason <text>');
  });

  it('queues pause|resume need --reason and show PAUSED; runs --dedupe-key; audit lists the trail', async () => {
    const registering = createWorker({
      store,
      workflows: operatorHandlers(operatorProvider()),
      pollIntervalMs: 20,
      reconcileIntervalMs: 0,
    });
    await registering.start();
    await registering.stop();

    expect((await run(['queues', 'pause', 'op-q', ...db])).stderr).toContain(
      '--reason <text> is required: a queue pause is written to the audit trail',
    );
    expect((await run(['queues', 'stop', 'op-q', ...db])).stderr).toContain('Unknown action "stop"');
    expect(await run(['queues', 'pause', 'op-q', '--reason', 'carrier outage', ...db])).toEqual({
      code: 0,
      stdout: 'Paused queue op-q: it grants no slot until `ledgerflow queues resume op-q`.\n',
      stderr: '',
    });
    const table = await run(['queues', ...db]);
    expect(table.stdout).toMatch(/^QUEUE\s.*\sPAUSED\n/);
    expect(table.stdout).toMatch(/\nop-q\s+1 at once\s.*\syes\n/);
    expect((await run(['queues', 'resume', 'op-q', '--reason', 'carrier back', '--actor', 'bo', ...db])).stdout).toBe(
      'Resumed queue op-q: slots are granted again as its limits allow.\n',
    );
    expect((await run(['queues', 'resume', 'op-q', '--reason', 'again', ...db])).stdout).toBe(
      'Queue op-q was already running.\n',
    );

    const { runId } = await client.start(pay, { id: 'cli-dk' }, { dedupeKey: 'order-cli-dk' });
    const byKey = await run(['runs', '--dedupe-key', 'order-cli-dk', '--json', ...db]);
    expect((JSON.parse(byKey.stdout) as Array<{ id: string }>).map((r) => r.id)).toEqual([runId]);
    await client.cancel(runId);

    const audit = await run(['audit', '--limit', '2', ...db]);
    expect(audit.code).toBe(0);
    const lines = audit.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^AT\s+ACTOR\s+ACTION\s+RUN\s+TARGET\s+REASON\s+DETAIL$/);
    expect(lines[1]).toMatch(
      /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ\s+bo\s+resume-queue\s+-\s+op-q\s+carrier back\s+\{"granted":0\}$/,
    );
    expect(lines[2]).toMatch(/\s+pause-queue\s+-\s+op-q\s+carrier outage\s+\{\}$/);
    const json = JSON.parse((await run(['audit', '--json', ...db])).stdout) as Array<{ action: string }>;
    expect(json.map((a) => a.action)).toEqual([
      'resume-queue',
      'pause-queue',
      'cancel',
      'resolve-not-found',
      'resolve-found',
      'retry',
    ]);
    expect((await run(['audit', '--limit', '0', ...db])).stderr).toContain('--limit must be an integer >= 1 (got "0")');
    expect((await run(['audit', '--run', 'not-a-uuid', ...db])).code).toBe(1);
  });
});
