import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from 'ledgerflow/runtime';
import { TELEMETRY_ATTRIBUTES as ATTR } from 'ledgerflow/operator';
import { main } from '../../runtime/cli/main.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { greet } from './cli-fixtures/workflows.js';

/** `ledgerflow worker --log-format json` as a user runs it: every line of stdout is one JSON object. */
describe('ledgerflow worker --log-format json', () => {
  let store: TestStore;
  beforeAll(async () => {
    store = await createPgTestStore();
    await migrateForTest(store, [greet]);
  });
  afterAll(async () => {
    await store?.close();
  });

  it('writes each event as a JSON line with time, level, event, message and the span attribute names', async () => {
    const child = spawn(
      process.execPath,
      [
        'bin/ledgerflow.js',
        'worker',
        '--workflows',
        'tests/runtime/cli-fixtures/workflows.ts',
        '--log-format',
        'json',
        '--poll-ms',
        '50',
        '--reconcile-ms',
        '0',
        '--worker-id',
        'json-log-worker',
        '--database-url',
        store.url!,
      ],
      { env: { ...process.env, DATABASE_URL: '' }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    try {
      const client = createClient({ store });
      const { runId } = await client.start(greet, { name: 'json' });
      await client.waitForRun(runId, { timeoutMs: 20_000, pollMs: 50 });
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(stderr).toContain('Stop with Ctrl-C or SIGTERM.');

      const lines = stdout.trimEnd().split('\n');
      const records = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
      for (const record of records) {
        expect(Object.keys(record).slice(0, 4)).toEqual(['time', 'level', 'event', 'message']);
        expect(new Date(record['time'] as string).toISOString()).toBe(record['time']);
        expect(['info', 'warn', 'error']).toContain(record['level']);
        expect(record['message']).toEqual(expect.any(String));
      }
      const ofRun = records.filter((r) => r[ATTR.runId] === runId);
      expect(ofRun.map((r) => r['event'])).toEqual([
        'run-claimed',
        'step-succeeded',
        'step-succeeded',
        'run-completed',
      ]);
      expect(ofRun[0]).toMatchObject({
        level: 'info',
        [ATTR.workflow]: 'cli-greet',
        [ATTR.workflowVersion]: 1,
        [ATTR.fencingToken]: 1,
        [ATTR.step]: 'greet',
        [ATTR.attempt]: 1,
        [ATTR.tookOver]: false,
      });
      expect(ofRun[2]).toMatchObject({
        message: 'step deliver succeeded (attempt 1)',
        [ATTR.step]: 'deliver',
        [ATTR.stepKind]: 'external',
        [ATTR.attempt]: 1,
        reused: false,
      });
      expect(records[0]).toMatchObject({ event: 'worker-started', [ATTR.workerId]: 'json-log-worker' });
      expect(records.at(-1)).toMatchObject({
        event: 'worker-stopped',
        [ATTR.workerId]: 'json-log-worker',
        released: 0,
      });
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });

  it('refuses another format with a usage error (exit 2)', async () => {
    let stderr = '';
    const code = await main(['worker', '--workflows', 'x.ts', '--log-format', 'xml'], {
      out: () => {},
      err: (text) => void (stderr += text),
    });
    expect(code).toBe(2);
    expect(stderr).toContain('--log-format must be text or json (got "xml").');
  });
});
