import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileRegion } from '../readme/readme-blocks.js';
import { outcomeOf, runUntil, type CliOutcome } from '../support/run-cli.js';
import { appEnv } from './app-process.js';

/**
 * Installing ledgerflow the way docs/install.md says, into a package as `npm init -y` makes it,
 * and then exactly the commands `ledgerflow init` prints, through to a completed run on the
 * embedded PGlite. The commands before init are the regions of tests/package/new-project.sh,
 * which the docs include: `pack` runs in the repository (a checkout with its dependencies
 * installed), `new-project` in `work/my-app`, beside `work/ledgerflow/` where the tarball is moved.
 * Run with `npm run test:package`.
 */
const REPO = fileURLToPath(new URL('../..', import.meta.url));
const SCRIPT = join(REPO, 'tests/package/new-project.sh');
const { version } = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string };
const TARBALL = `ledgerflow-${version}.tgz`;

let work: string;
let app: string;
let initOutput: string;

/** A command line as the user types it, in `cwd`; `set -e`: the first failing command ends it. */
function sh(script: string, cwd: string): Promise<CliOutcome> {
  return outcomeOf(spawn('sh', ['-e', '-c', script], { cwd, env: appEnv(), stdio: ['ignore', 'pipe', 'pipe'] }));
}

function region(name: string): string {
  return fileRegion(readFileSync(SCRIPT, 'utf8'), name, SCRIPT);
}

/** The commands under "Next steps" in init's output, in order. */
function nextSteps(output: string): string[] {
  const lines = output.split('\n');
  const from = lines.findIndex((line) => line.startsWith('Next steps'));
  expect(from, output).toBeGreaterThan(-1);
  const steps: string[] = [];
  for (const line of lines.slice(from + 1)) {
    if (!line.startsWith('  ')) break;
    steps.push(line.trim());
  }
  return steps;
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'ledgerflow-new-project-'));
  mkdirSync(join(work, 'ledgerflow'));
  app = join(work, 'my-app');
  mkdirSync(app);

  // `npm pack` writes the tarball into the checkout; it moves at once to where the docs put it.
  const pack = await sh(region('pack'), REPO);
  expect(pack.code, pack.stderr).toBe(0);
  expect(pack.stdout.trim().split('\n').at(-1)).toBe(TARBALL);
  renameSync(join(REPO, TARBALL), join(work, 'ledgerflow', TARBALL));

  const created = await sh(region('new-project'), app);
  expect(created.code, `${created.stdout}\n${created.stderr}`).toBe(0);
  initOutput = created.stdout;
}, 300_000);

afterAll(() => {
  rmSync(join(REPO, TARBALL), { force: true });
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

describe('a new project, installed and started as docs/install.md says', () => {
  it('init in the package `npm init -y` made sets "type": "module"', () => {
    const manifest = JSON.parse(readFileSync(join(app, 'package.json'), 'utf8')) as {
      type: string;
      dependencies: Record<string, string>;
    };
    expect(manifest.type).toBe('module');
    expect(manifest.dependencies['ledgerflow']).toBe(`file:../ledgerflow/${TARBALL}`);
    expect(initOutput).toContain(
      'edited   package.json: "type": "module" (was "commonjs"; nothing else here relied on CommonJS)',
    );
  });

  it('the next steps init prints, run as printed, complete a run', async () => {
    const steps = nextSteps(initOutput);
    expect(steps.at(-1), 'the last step runs the worker').toMatch(/^npx ledgerflow worker /);
    let runId: string | undefined;
    for (const step of steps.slice(0, -1)) {
      const result = await sh(step, app);
      expect(result.code, `${step}\n${result.stdout}\n${result.stderr}`).toBe(0);
      runId ??= /Started run ([0-9a-f-]{36})/.exec(result.stdout)?.[1];
    }
    expect(runId, 'a step started a run').toBeDefined();

    const worker = await runUntil(steps.at(-1)!, {
      cwd: app,
      env: appEnv(),
      until: new RegExp(`run-completed runId=${runId}`),
      timeoutMs: 120_000,
    });
    // Stopped with SIGTERM, as Ctrl-C would; npx itself ends by the signal.
    expect(worker.stdout, worker.stderr).toMatch(new RegExp(`run-completed runId=${runId}`));

    // What init says to look at next.
    const runs = await sh('npx ledgerflow runs --json', app);
    expect(runs.code, runs.stderr).toBe(0);
    expect(JSON.parse(runs.stdout)).toEqual([
      expect.objectContaining({ id: runId, workflow_name: 'hello', status: 'completed' }),
    ]);
  }, 300_000);
});
