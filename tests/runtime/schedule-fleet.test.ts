import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorker, type WorkerEvent } from 'ledgerflow/runtime';
import { migrateForTest } from '../support/migrate-for-test.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { waitUntil } from './fixtures/run-helpers.js';
import { SCHEDULE_WORKFLOWS, scheduledHandlers } from './fixtures/schedule-workflows.js';

const WORKER_ENTRY = fileURLToPath(new URL('./fixtures/schedule-worker.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** A worker process with its parsed event lines (a SIGKILLed one's last line may be cut: dropped). */
interface WorkerProcess {
  readonly name: string;
  readonly child: ChildProcess;
  readonly events: WorkerEvent[];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>;
}

function spawnWorker(name: string, url: string): WorkerProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', WORKER_ENTRY], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: url },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const events: WorkerEvent[] = [];
  let partial = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    const lines = (partial + chunk.toString()).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) if (line.trim() !== '') events.push(JSON.parse(line) as WorkerEvent);
  });
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal, stderr })),
  );
  return { name, child, events, exited };
}

/**
 * Each tick of an every-second schedule yields exactly one run across three worker processes on
 * PostgreSQL: while all three race for every tick, when one is SIGKILLed and replaced, and when
 * the whole fleet is killed and restarted seconds later. No tick is missing (the seconds nobody
 * ran are on time when the fleet is back), no tick is started twice: every `schedule-ticked`
 * event names ticks no other worker's event names — the row lock and the moved tick did that,
 * before the dedupe key's unique index would have had to.
 */
describe('schedule ticks across three worker processes and restarts [pg]', () => {
  let store: TestStore;
  beforeAll(async () => {
    store = await createPgTestStore();
    await migrateForTest(store, SCHEDULE_WORKFLOWS);
  }, 60_000);
  afterAll(() => store.close());

  const ticks = async (): Promise<string[]> =>
    (
      await store.db
        .selectFrom('ledgerflow.workflow_run')
        .select('dedupe_key')
        .where('dedupe_key', 'like', 'schedule:fleet:%')
        .orderBy('dedupe_key')
        .execute()
    ).map((r) => r.dedupe_key!.slice('schedule:fleet:'.length));
  const moreTicks = async (n: number, what: string) => {
    const before = (await ticks()).length;
    await waitUntil(what, async () => (await ticks()).length >= before + n, 30_000);
  };

  it('starts one run per second, none missing and none twice', async () => {
    const url = store.url!;
    const all: WorkerProcess[] = [];
    const spawnOne = (name: string) => {
      const worker = spawnWorker(name, url);
      all.push(worker);
      return worker;
    };
    let fleet = [spawnOne('a'), spawnOne('b'), spawnOne('c')];
    try {
      await moreTicks(4, 'four ticks with three workers');

      // One worker dies and is replaced.
      fleet[0]!.child.kill('SIGKILL');
      await fleet[0]!.exited;
      fleet = [spawnOne('a2'), fleet[1]!, fleet[2]!];
      await moreTicks(3, 'three ticks after a worker was replaced');

      // The whole fleet dies; nothing runs for a few seconds; it comes back.
      for (const w of fleet) w.child.kill('SIGKILL');
      await Promise.all(fleet.map((w) => w.exited));
      const down = (await ticks()).length;
      await new Promise((resolve) => setTimeout(resolve, 2_500));
      expect((await ticks()).length).toBe(down);
      fleet = [spawnOne('a3'), spawnOne('b3'), spawnOne('c3')];
      await moreTicks(6, 'six ticks after the fleet restarted');

      // A graceful stop of workers that have started (one slow to start is not yet listening for SIGTERM).
      await waitUntil(
        'every worker of the fleet started',
        async () => fleet.every((w) => w.events.some((e) => e.type === 'worker-started')),
        30_000,
      );
      for (const w of fleet) w.child.kill('SIGTERM');
      const exits = await Promise.all(fleet.map((w) => w.exited));
      for (const exit of exits) expect(exit.code, exit.stderr).toBe(0);
    } finally {
      for (const w of all) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
    }

    const started = await ticks();
    expect(started.length).toBeGreaterThanOrEqual(13);
    const first = Date.parse(started[0]!);
    expect(started).toEqual(started.map((_, i) => new Date(first + i * 1_000).toISOString()));

    // Every tick was reported by one worker at most (a SIGKILLed one may have died between its
    // commit and its event), and every reported tick has its run.
    const reported = all.flatMap((w) =>
      w.events.flatMap((e) => (e.type === 'schedule-ticked' ? e.ticks.map((tick) => `${tick} ${w.name}`) : [])),
    );
    const reportedTicks = reported.map((r) => r.split(' ')[0]!);
    expect(new Set(reportedTicks).size, reported.sort().join('\n')).toBe(reportedTicks.length);
    expect(started).toEqual(expect.arrayContaining(reportedTicks));
    expect(reportedTicks.length).toBeGreaterThanOrEqual(started.length - 4);
    expect(all.flatMap((w) => w.events.filter((e) => e.type === 'error' || e.type === 'schedule-failed'))).toEqual([]);

    // The runs themselves are ordinary: a worker without schedules finishes what is left.
    const finisher = createWorker({
      store,
      workflows: [scheduledHandlers()],
      pollIntervalMs: 20,
      reconcileIntervalMs: 0,
    });
    await finisher.drain({ timeoutMs: 60_000 });
    await finisher.stop();
    const statuses = await store.db
      .selectFrom('ledgerflow.workflow_run')
      .select(({ fn }) => ['status', fn.countAll<number>().as('n')])
      .where('dedupe_key', 'like', 'schedule:fleet:%')
      .groupBy('status')
      .execute();
    expect(statuses.map((s) => [s.status, Number(s.n)])).toEqual([['completed', started.length]]);
  }, 120_000);
});
