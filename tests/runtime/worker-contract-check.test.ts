import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { runCli, type CliOutcome } from '../support/run-cli.js';
import { PAYOUT_WORKFLOW, REPO_ROOT, TempProject } from '../codegen/support/temp-project.js';

/**
 * `ledgerflow worker` compares what it serves with the generated contract before it opens the
 * database: an output field added to an `external` step of a released version without a bump and
 * without re-running codegen is LF007, and the worker refuses to start, naming the part.
 */
const WORKERS = `import { payoutHandlers } from '../generated/contracts/payout.v1.js';

export const workflows = [
  payoutHandlers({ transfer: { perform: async ({ key }) => ({ transferId: key }) } }),
];
`;

async function workerProcess(root: string, ...args: string[]): Promise<CliOutcome> {
  const bin = path.join(REPO_ROOT, 'bin', 'ledgerflow.js');
  try {
    const { stdout, stderr } = await promisify(execFile)(
      process.execPath,
      [bin, 'worker', '--workflows', 'src/workers.ts', ...args],
      {
        cwd: root,
        // A database that cannot be reached: the refusal comes before the worker opens it.
        env: { ...process.env, DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' },
      },
    );
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

let project: TempProject;
beforeEach(async () => {
  project = new TempProject('ledgerflow-worker-contract');
  project.write('src/payout.workflow.ts', PAYOUT_WORKFLOW);
  project.write('src/workers.ts', WORKERS);
  expect((await runCli(['codegen', '--root', project.root])).code).toBe(0);
});
afterEach(() => project.remove());

it('refuses to start when a released version changed without a bump and without codegen, naming workflow, version, step and part', async () => {
  expect((await runCli(['codegen', '--root', project.root, '--release', 'payout@1'])).code).toBe(0);
  project.write(
    'src/payout.workflow.ts',
    PAYOUT_WORKFLOW.replace('transferId: z.string()', 'transferId: z.string(), fee: z.number()'),
  );
  const refused = await workerProcess(project.root);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain('Cannot start the worker: what it serves differs from the generated contract.');
  expect(refused.stderr).toMatch(
    /src\/payout\.workflow\.ts:\d+:\d+ - error LF007: workflow "payout" v1 changed since it was generated: the output schema of step "transfer" changed/,
  );
  expect(refused.stderr).toContain('set version: 2');
  // With the check skipped, the worker goes on to the database (unreachable here), so it got past the contract.
  const skipped = await workerProcess(project.root, '--skip-contract-check');
  expect(skipped.stderr).not.toContain('differs from the generated contract');
  expect(skipped.stderr).toContain('cannot use the database');
});

it('a draft version that changed without codegen: refused with "run ledgerflow codegen", accepted once codegen ran', async () => {
  project.write(
    'src/payout.workflow.ts',
    PAYOUT_WORKFLOW.replace('transferId: z.string()', 'transferId: z.string(), fee: z.number()'),
  );
  const refused = await workerProcess(project.root);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain(
    'workflow "payout" v1: its declaration changed since `ledgerflow codegen` generated its contract',
  );
  expect((await runCli(['codegen', '--root', project.root])).code).toBe(0);
  const accepted = await workerProcess(project.root);
  expect(accepted.stderr).not.toContain('differs from the generated contract');
  expect(accepted.stderr).toContain('cannot use the database');
});

it('when codegen has errors it cannot tell whether the contract is current: refused, saying how to go on', async () => {
  project.write(
    'src/broken.workflow.ts',
    PAYOUT_WORKFLOW.replace("'payout'", "'broken'")
      .replace('export const payout', 'export const broken')
      .replace(/ {4}key: .*\n/, ''),
  );
  const refused = await workerProcess(project.root);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain('codegen reports 1 error(s), so it cannot tell whether the contracts are current');
  expect(refused.stderr).toContain('--skip-contract-check');
});
