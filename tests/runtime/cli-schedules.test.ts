import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateForTest } from '../support/migrate-for-test.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { waitUntil } from './fixtures/run-helpers.js';
import { SCHEDULE_WORKFLOWS } from './fixtures/schedule-workflows.js';
import { runCli as run } from '../support/run-cli.js';

const MODULE = 'tests/runtime/fixtures/schedule-module.ts';
const TIME = '\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\dZ';

/**
 * `ledgerflow worker` registers and ticks the `schedules` its module exports; `ledgerflow
 * schedules` lists them with their next ticks and last run, and pauses and resumes one.
 */
describe('ledgerflow worker and schedules (PostgreSQL)', () => {
  let store: TestStore;
  let db: string[];
  beforeAll(async () => {
    store = await createPgTestStore();
    await migrateForTest(store, SCHEDULE_WORKFLOWS);
    db = ['--database-url', store.url!];
  }, 60_000);
  afterAll(() => store.close());

  it('lists nothing before a worker registered a schedule', async () => {
    expect(await run(['schedules', ...db])).toEqual({
      code: 0,
      stdout:
        'No schedules are registered. Workers register the schedules they are given (a `schedules` export next to `workflows`).\n',
      stderr: '',
    });
  });

  it('a worker registers and ticks the exported schedules; schedules lists, pauses and resumes them', async () => {
    const worker = spawn(
      process.execPath,
      ['bin/ledgerflow.js', 'worker', '--workflows', MODULE, '--schedule-ms', '100', '--poll-ms', '50', ...db],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let output = '';
    worker.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    worker.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => worker.once('exit', (code) => resolve(code)));
    try {
      await waitUntil(
        'two ticks',
        () => (output.match(/schedule-ticked schedule=cli-every-second/g) ?? []).length >= 2,
        30_000,
      );
      expect(output).toMatch(/running wt-scheduled v1 and schedules cli-every-second, cli-nightly on /);

      const paused = await run(['schedules', 'pause', 'cli-every-second', ...db]);
      expect(paused).toEqual({
        code: 0,
        stdout:
          'Paused schedule cli-every-second: it starts no run until `ledgerflow schedules resume cli-every-second`.\n',
        stderr: '',
      });
      expect((await run(['schedules', 'pause', 'cli-every-second', ...db])).stdout).toBe(
        'Schedule cli-every-second was already paused.\n',
      );
      const count = (await run(['schedules', '--json', ...db])).stdout;
      const [every] = JSON.parse(count) as Array<{
        name: string;
        lastRunId: string;
        lastTickAt: string;
        nextTicks: string[];
        paused: boolean;
      }>;
      expect(every).toMatchObject({ name: 'cli-every-second', paused: true });
      expect(every!.nextTicks).toHaveLength(3);

      const table = await run(['schedules', '--ticks', '1', ...db]);
      expect(table.code).toBe(0);
      const lines = table.stdout.trimEnd().split('\n');
      expect(lines[0]).toMatch(
        /^SCHEDULE\s+CRON\s+TIMEZONE\s+WORKFLOW\s+CATCH-UP\s+PAUSED\s+NEXT TICKS\s+LAST TICK\s+LAST RUN$/,
      );
      expect(lines[1]).toMatch(
        new RegExp(
          `^cli-every-second\\s+\\* \\* \\* \\* \\* \\*\\s+UTC\\s+wt-scheduled v1\\s+skip\\s+yes\\s+${TIME}\\s+${TIME}\\s+${every!.lastRunId} (pending|running|completed)$`,
        ),
      );
      expect(lines[2]).toMatch(
        new RegExp(
          `^cli-nightly\\s+0 2 \\* \\* \\*\\s+Europe/Berlin\\s+wt-scheduled v1\\s+latest\\s+no\\s+${TIME}\\s+-\\s+-$`,
        ),
      );

      // Paused: no tick starts a run any more (the worker keeps running).
      const ticked = (output.match(/schedule-ticked schedule=cli-every-second/g) ?? []).length;
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect((output.match(/schedule-ticked schedule=cli-every-second/g) ?? []).length).toBe(ticked);

      const resumed = await run(['schedules', 'resume', 'cli-every-second', ...db]);
      expect(resumed.stdout).toMatch(new RegExp(`^Resumed schedule cli-every-second; its next tick is ${TIME}\\.\\n$`));
      await waitUntil(
        'a tick after the resume',
        () => (output.match(/schedule-ticked schedule=cli-every-second/g) ?? []).length > ticked,
        30_000,
      );
    } finally {
      worker.kill('SIGTERM');
    }
    expect(await exited, output).toBe(0);
  }, 60_000);

  it('refuses an unknown schedule (exit 1, no stack) and an unknown action or a missing name (exit 2)', async () => {
    expect(await run(['schedules', 'pause', 'nope', ...db])).toEqual({
      code: 1,
      stdout: '',
      stderr:
        'ledgerflow schedules: No schedule "nope" is registered in this database. Schedules are registered by the workers given them; `ledgerflow schedules` lists those that are.\n',
    });
    const action = await run(['schedules', 'delete', 'cli-nightly', ...db]);
    expect(action.code).toBe(2);
    expect(action.stderr).toContain(
      'Unknown action "delete". Use `ledgerflow schedules`, `schedules pause <name>` or `schedules resume <name>`.',
    );
    expect((await run(['schedules', 'resume', ...db])).stderr).toContain(
      "resume needs the schedule's name: ledgerflow schedules resume <name>.",
    );
    expect((await run(['schedules', 'pause', 'a', 'b', ...db])).stderr).toContain(
      'expects nothing, or pause <name> / resume <name> only (extra: b).',
    );
  });

  it('says to migrate when the database has no schedule table (exit 1, no stack)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lf-cli-schedules-'));
    try {
      const outcome = await run(['schedules', '--data-dir', join(dir, 'db')]);
      expect(outcome.code).toBe(1);
      expect(outcome.stderr).toContain(
        'ledgerflow schedules: This database has no ledgerflow.schedule table (core migration 0005) or no ledgerflow schema at all. Run `ledgerflow migrate` first.\n',
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
