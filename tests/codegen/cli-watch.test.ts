import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PAYOUT_WORKFLOW as WORKFLOW, REPO_ROOT, TempProject } from './support/temp-project.js';

const UNSTABLE = WORKFLOW.replace('`transfer:${input.payoutId}`', '`transfer:${input.payoutId}:${Date.now()}`');
const SECOND = WORKFLOW.replaceAll('payout', 'refund').replace("'transfer'", "'send'").replace('transfer:', 'send:');

/** `ledgerflow codegen --watch` in a child process, with what it printed so far. */
class WatchProcess {
  readonly child: ChildProcess;
  stdout = '';
  stderr = '';
  readonly exited: Promise<number | null>;

  constructor(root: string) {
    this.child = spawn(
      process.execPath,
      [path.join(REPO_ROOT, 'bin', 'ledgerflow.js'), 'codegen', '--watch', '--root', root],
      {
        cwd: root,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    this.child.stdout!.on('data', (chunk: Buffer) => (this.stdout += chunk.toString()));
    this.child.stderr!.on('data', (chunk: Buffer) => (this.stderr += chunk.toString()));
    this.exited = new Promise((resolve) => this.child.on('exit', (code) => resolve(code)));
  }

  /** The reports of the runs so far: each ends with its summary line `ledgerflow codegen: …`. */
  reports(): string[] {
    return [...this.stdout.matchAll(/(?:(?!ledgerflow codegen: )[^\n]*\n)*ledgerflow codegen: [^\n]*\n/g)].map(
      (m) => m[0],
    );
  }

  /**
   * The first report after the `after` reports seen so far that satisfies `expected`. An editor's
   * save may take two runs (truncate, then write): a report in between is skipped.
   */
  async report(
    after: number,
    expected: (report: string) => boolean,
    timeoutMs = 15_000,
  ): Promise<{ report: string; index: number }> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const reports = this.reports();
      const index = reports.findIndex((r, i) => i >= after && expected(r));
      if (index !== -1) return { report: reports[index]!, index: index + 1 };
      if (Date.now() > deadline)
        throw new Error(
          `no matching codegen run within ${timeoutMs} ms; stdout:\n${this.stdout}\nstderr:\n${this.stderr}`,
        );
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

let project: TempProject;
let watcher: WatchProcess | undefined;

beforeEach(() => {
  project = new TempProject('ledgerflow-watch');
  project.write('src/payout.workflow.ts', WORKFLOW);
});

afterEach(() => {
  if (watcher?.child.exitCode === null) watcher.child.kill('SIGKILL');
  watcher = undefined;
  project.remove();
});

describe('ledgerflow codegen --watch', () => {
  it('regenerates on every change, reports diagnostics each time, picks up new and removed files, and exits 0 on SIGTERM', async () => {
    watcher = new WatchProcess(project.root);
    let seen = 0;
    const next = async (expected: (report: string) => boolean): Promise<string> => {
      const { report, index } = await watcher!.report(seen, expected);
      seen = index;
      return report;
    };
    const first = await next(() => true);
    expect(first).toMatch(
      /^ledgerflow codegen: 1 workflow version\(s\) in 1 file\(s\), 0 error\(s\), 0 warning\(s\) \(\d+ ms\); wrote \d+ file\(s\) in generated\/\.\n$/,
    );
    const contract = path.join(project.root, 'generated/contracts/payout.v1.ts');
    expect(existsSync(contract)).toBe(true);
    await waitForWatching(watcher);

    // An unstable key: the diagnostic appears and nothing is written.
    rmSync(contract);
    project.write('src/payout.workflow.ts', UNSTABLE);
    const broken = await next((r) => r.includes('error'));
    expect(broken).toMatch(/^src\/payout\.workflow\.ts:\d+:\d+ - error LF002: /m);
    expect(broken).toContain('nothing written: fix the errors above.');
    expect(existsSync(contract)).toBe(false);

    // Fixed: the diagnostic is gone and the files are generated again.
    project.write('src/payout.workflow.ts', WORKFLOW);
    const fixed = await next((r) => r.includes('1 file(s)'));
    expect(fixed).not.toContain('LF002');
    expect(fixed).toMatch(/0 error\(s\), 0 warning\(s\) \(\d+ ms\); wrote \d+ file\(s\) in generated\/\.\n$/);
    expect(existsSync(contract)).toBe(true);

    // A new workflow file in a new directory, then its removal.
    project.write('src/refunds/refund.workflow.ts', SECOND);
    const added = await next((r) => r.includes('2 file(s)'));
    expect(added).toMatch(/2 workflow version\(s\) in 2 file\(s\), 0 error\(s\)/);
    expect(readFileSync(path.join(project.root, 'generated/contracts/refund.v1.ts'), 'utf8')).toContain('refund');
    rmSync(path.join(project.root, 'src/refunds/refund.workflow.ts'));
    const removed = await next((r) => r.includes('in 1 file(s)'));
    // refund v1 is still in the manifest: removing its declaration without --retire is LF009.
    expect(removed).toMatch(/error LF009: /);

    watcher.child.kill('SIGTERM');
    expect(await watcher.exited).toBe(0);
    expect(watcher.stderr).not.toMatch(/run failed|^\s+at /m);
  }, 60_000);

  it('refuses --watch with --check (exit 2)', () => {
    const result = spawnSync(
      process.execPath,
      [path.join(REPO_ROOT, 'bin', 'ledgerflow.js'), 'codegen', '--watch', '--check'],
      {
        cwd: project.root,
        encoding: 'utf8',
      },
    );
    expect(result.status).toBe(2);
    expect(result.stderr).toContain('--watch writes as files change; --check compares once. Use one of them.');
  });
});

async function waitForWatching(process: WatchProcess): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!process.stderr.includes('watching ')) {
    if (Date.now() > deadline) throw new Error(`the watch did not start; stderr:\n${process.stderr}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
