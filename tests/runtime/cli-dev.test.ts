import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT, TempProject } from '../codegen/support/temp-project.js';
import { outcomeOf, runCli, type CliOutcome } from '../support/run-cli.js';
import { waitUntil } from './fixtures/run-helpers.js';

/**
 * `ledgerflow dev` as a user runs it, in a project of its own; the other commands are second
 * processes that find it through .ledgerflow/dev.json, with no DATABASE_URL.
 */

const WORKFLOW = `import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const greet = workflow('greet', { version: 1, input: z.object({ name: z.string() }) })
  .step('compose', { output: z.object({ message: z.string() }) });
`;
/** The same version with an external step whose key reads the clock: codegen refuses it (LF002). */
const REJECTED = `${WORKFLOW.trimEnd().replace(/;$/, '')}
  .external('send', { output: z.object({ id: z.string() }), key: () => \`send:\${Date.now()}\`, idempotentByKey: true });
`;
const handlers = (greeting: string): string => `import { greetHandlers } from '../generated/contracts/greet.v1.js';

export const greetRegistration = () => greetHandlers({ compose: async ({ input }) => ({ message: \`${greeting}, \${input.name}!\` }) });
`;
const WORKFLOWS_MODULE = `import { greetRegistration } from './greet.handlers.js';

export const workflows = [greetRegistration()];
`;

const BIN = path.join(REPO_ROOT, 'bin', 'ledgerflow.js');
const ENV = { ...process.env, DATABASE_URL: '' };

let project: TempProject;
let dev: ChildProcess;
let devOutput = '';
let devExit: Promise<number | null>;

/** A second CLI process in the project, as a user types it in another terminal. */
function cli(...args: string[]): Promise<CliOutcome> {
  return outcomeOf(
    spawn(process.execPath, [BIN, ...args], { cwd: project.root, env: ENV, stdio: ['ignore', 'pipe', 'pipe'] }),
  );
}

/** Waits until the dev server has printed `pattern` `times` times. */
async function devPrinted(pattern: RegExp, times = 1, timeoutMs = 90_000): Promise<void> {
  const global = new RegExp(pattern.source, 'g');
  const deadline = Date.now() + timeoutMs;
  while ((devOutput.match(global)?.length ?? 0) < times) {
    if (Date.now() > deadline)
      throw new Error(`ledgerflow dev did not print ${pattern} ${times} time(s); it printed:\n${devOutput}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const WORKER_RUNNING = /\[worker\] Worker \S+ running greet v1/;

beforeAll(async () => {
  project = new TempProject('ledgerflow-dev');
  project.write('src/greet.workflow.ts', WORKFLOW);
  project.write('src/greet.handlers.ts', handlers('Hello'));
  project.write('src/workflows.ts', WORKFLOWS_MODULE);
  dev = spawn(process.execPath, [BIN, 'dev', '--workflows', 'src/workflows.ts', '--port', '0'], {
    cwd: project.root,
    env: ENV,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  dev.stdout!.on('data', (chunk: Buffer) => (devOutput += chunk.toString()));
  dev.stderr!.on('data', (chunk: Buffer) => (devOutput += chunk.toString()));
  devServers.push(dev);
  devExit = new Promise((resolve) => dev.on('exit', (code) => resolve(code)));
  await devPrinted(WORKER_RUNNING);
}, 120_000);

const devServers: ChildProcess[] = [];

afterAll(async () => {
  // SIGTERM: a dev server stops its worker and codegen too (a test filtered out may have left one).
  for (const server of devServers) if (server.exitCode === null && server.signalCode === null) server.kill('SIGTERM');
  await Promise.all(
    devServers.map((server) =>
      server.exitCode === null && server.signalCode === null ? new Promise((r) => server.on('exit', r)) : undefined,
    ),
  );
  project.remove();
});

describe('ledgerflow dev', () => {
  it('serves the embedded database to a second CLI process, which starts a run that completes, without DATABASE_URL', async () => {
    const record = JSON.parse(readFileSync(path.join(project.root, '.ledgerflow/dev.json'), 'utf8')) as {
      url: string;
      pid: number;
    };
    expect(record.pid).toBe(dev.pid);
    expect(record.url).toMatch(/^postgres:\/\/postgres@127\.0\.0\.1:\d+\/postgres$/);

    const started = await cli('start', 'greet', '--input', '{"name":"Ada"}');
    expect(started.code, started.stderr).toBe(0);
    expect(started.stderr).toContain(`Using the dev server at ${record.url}`);
    const runId = /Started run (\S+) /.exec(started.stdout)![1]!;
    await devPrinted(new RegExp(`run-completed runId=${runId}`));

    const runs = await cli('runs');
    expect(runs.code, runs.stderr).toBe(0);
    expect(runs.stdout).toMatch(new RegExp(`${runId}\\s+greet v1\\s+completed`));
    const run = await cli('run', runId);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/status\s+completed/);
    expect(run.stdout).toContain('"message":"Hello, Ada!"');
  }, 120_000);

  it('replaces the worker when a handler changes, and refuses a definition codegen rejects while staying up', async () => {
    project.write('src/greet.handlers.ts', handlers('Howdy'));
    await devPrinted(WORKER_RUNNING, 2);
    const after = await cli('start', 'greet', '--input', '{"name":"Bo"}', '--wait');
    expect(after.code, after.stderr).toBe(0);
    expect(after.stdout).toContain('"message":"Howdy, Bo!"');

    project.write('src/greet.workflow.ts', REJECTED);
    await devPrinted(/codegen rejects the workflows/);
    expect(devOutput).toMatch(/src\/greet\.workflow\.ts:\d+:\d+ - error LF002/);
    // Still up and serving, with the worker it had: no third worker started.
    const runs = await cli('runs');
    expect(runs.code, runs.stderr).toBe(0);
    expect(runs.stdout.match(/greet v1\s+completed/g)).toHaveLength(2);
    expect(devOutput.match(new RegExp(WORKER_RUNNING.source, 'g'))).toHaveLength(2);

    // Fixed: the next clean codegen run brings the next worker.
    project.write('src/greet.workflow.ts', WORKFLOW);
    await devPrinted(WORKER_RUNNING, 3);
    const fixed = await cli('start', 'greet', '--input', '{"name":"Cy"}', '--wait');
    expect(fixed.code, fixed.stderr).toBe(0);
    expect(fixed.stdout).toContain('"message":"Howdy, Cy!"');
  }, 180_000);

  it('stops on SIGTERM with exit code 0 and removes .ledgerflow/dev.json', async () => {
    dev.kill('SIGTERM');
    expect(await devExit).toBe(0);
    expect(existsSync(path.join(project.root, '.ledgerflow/dev.json'))).toBe(false);
  }, 60_000);
});

describe('a dev server killed with SIGKILL', () => {
  it('takes its worker and codegen with it; its dev.json is then ignored and removed', async () => {
    devOutput = '';
    dev = spawn(process.execPath, [BIN, 'dev', '--workflows', 'src/workflows.ts', '--port', '0'], {
      cwd: project.root,
      env: ENV,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    devServers.push(dev);
    dev.stdout!.on('data', (chunk: Buffer) => (devOutput += chunk.toString()));
    dev.stderr!.on('data', (chunk: Buffer) => (devOutput += chunk.toString()));
    await devPrinted(WORKER_RUNNING);
    const children = readFileSync(`/proc/${dev.pid}/task/${dev.pid}/children`, 'utf8').trim().split(/\s+/).map(Number);
    expect(children).toHaveLength(2);
    dev.kill('SIGKILL');
    await waitUntil(
      'the worker and codegen to stop',
      () => children.every((pid) => !existsSync(`/proc/${pid}`)),
      60_000,
    );

    const runs = await cli('runs');
    expect(runs.code, runs.stderr).toBe(0);
    expect(runs.stderr).toContain('Using PGlite (embedded, fsync off) at .ledgerflow/db');
    expect(existsSync(path.join(project.root, '.ledgerflow/dev.json'))).toBe(false);
  }, 180_000);
});

describe('.ledgerflow/dev.json', () => {
  it('is ignored and removed when its process is gone', async () => {
    const scratch = new TempProject('ledgerflow-dev-stale');
    try {
      const dataDir = path.join(scratch.root, '.ledgerflow/db');
      mkdirSync(dataDir, { recursive: true });
      const file = path.join(scratch.root, '.ledgerflow/dev.json');
      const gone = await outcomeOf(
        spawn(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], {
          stdio: ['ignore', 'pipe', 'pipe'],
        }),
      );
      writeFileSync(
        file,
        JSON.stringify({
          url: 'postgres://postgres@127.0.0.1:1/postgres',
          pid: Number(gone.stdout),
          dataDir,
          dashboardUrl: '',
        }),
      );
      const outcome = await runCli(['runs', '--data-dir', dataDir]);
      expect(outcome.stderr).toContain(`Using PGlite (embedded, fsync off) at ${dataDir}`);
      expect(existsSync(file)).toBe(false);
    } finally {
      scratch.remove();
    }
  }, 60_000);
});
