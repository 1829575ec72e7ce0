import { readFileSync } from 'node:fs';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { migrate, MigrationError } from 'ledgerflow/runtime';
import { describeStores } from '../support/describe-stores.js';
import { runCli } from '../support/run-cli.js';
import { PAYOUT_WORKFLOW, TempProject } from '../codegen/support/temp-project.js';

/**
 * Draft and released versions, from codegen to the database: a new version is a draft that may
 * change without a bump (no LF007; its migration is rewritten, and `migrate` replaces what it
 * registered while it has no runs); a draft that ran cannot change; `codegen --release` makes it
 * final, after which a change is LF007 as for every released version.
 */
// A changed key and a changed shape (the provider no longer dedupes): the migration changes too.
const changedKey = PAYOUT_WORKFLOW.replace('`transfer:${input.payoutId}`', '`payout:${input.payoutId}`').replace(
  'idempotentByKey: true',
  'idempotentByKey: false',
);
// One more step.
const changedAgain = changedKey.replace(/\);\n$/, ")\n  .step('audit', { output: z.object({ ok: z.boolean() }) });\n");
const changedOnceReleased = changedKey.replace('`payout:${input.payoutId}`', '`payout-2:${input.payoutId}`');

describeStores('draft workflow versions: free to change until they run or are released', (getStore) => {
  let project: TempProject;
  beforeAll(() => {
    project = new TempProject('ledgerflow-drafts');
    project.write('src/payout.workflow.ts', PAYOUT_WORKFLOW);
  });
  afterAll(() => project.remove());
  const read = (file: string) => readFileSync(path.join(project.root, 'generated', file), 'utf8');
  const codegen = (...args: string[]) => runCli(['codegen', '--root', project.root, ...args]);
  const migrateProject = () => migrate(getStore(), { sources: [path.join(project.root, 'generated', 'migrations')] });

  it('a new version is a draft: marked in the manifest, its migration and REVIEW.md', async () => {
    expect((await codegen()).code).toBe(0);
    const manifest = JSON.parse(read('ledgerflow.manifest.json')) as {
      workflows: { draft?: boolean; migration: string }[];
    };
    expect(manifest.workflows[0]).toMatchObject({ draft: true, migration: '0002_payout_v1.sql' });
    expect(read('migrations/0002_payout_v1.sql')).toContain("VALUES ('payout', 1, ");
    expect(read('migrations/0002_payout_v1.sql')).toContain("'0002_payout_v1.sql');");
    expect(read('REVIEW.md')).toContain('Status: **draft**');
    expect((await migrateProject()).applied).toContain('0002_payout_v1.sql');
  });

  it('a draft changes without a bump: no LF007, its migration is rewritten, migrate replaces it in a database without runs', async () => {
    project.write('src/payout.workflow.ts', changedKey);
    const run = await codegen();
    expect(run.stdout).not.toContain('LF007');
    expect(run.code).toBe(0);
    expect(JSON.parse(read('ledgerflow.manifest.json')).workflows[0].steps[0].key).toContain('payout:');
    expect((await codegen('--check')).code).toBe(0);
    const result = await migrateProject();
    expect(result.replaced).toEqual(['0002_payout_v1.sql']);
    expect((await migrateProject()).replaced).toEqual([]);
  });

  it('a draft that has runs in a database: migrate refuses its changed migration and says to bump', async () => {
    const store = getStore();
    await sql`INSERT INTO ledgerflow.workflow_run (id, workflow_name, workflow_version, input)
              VALUES ('00000000-0000-4000-8000-000000000026', 'payout', 1, '{"payoutId":"p-1"}')`.execute(store.db);
    project.write('src/payout.workflow.ts', changedAgain);
    expect((await codegen()).code).toBe(0);
    const refusal = await migrateProject().then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refusal).toBeInstanceOf(MigrationError);
    expect((refusal as Error).message).toContain(
      'draft workflow "payout" v1 changed, but it has runs in this database',
    );
    expect((refusal as Error).message).toContain('declare the change as a new version');
    project.write('src/payout.workflow.ts', changedKey);
    expect((await codegen()).code).toBe(0);
  });

  it('--release makes it final: the manifest and migration lose the draft form, and from then on a change is LF007', async () => {
    const released = await codegen('--release', 'payout@1');
    expect(released.code).toBe(0);
    expect(released.stderr).toContain(
      'released workflow "payout" v1: from now on a change to it needs a new version (LF007)',
    );
    expect(read('ledgerflow.manifest.json')).not.toContain('"draft"');
    expect(read('migrations/0002_payout_v1.sql')).not.toContain('draft_migration');
    expect(read('REVIEW.md')).toContain('Status: released');
    // This database ran the draft: its released text, the same shape, is recorded in place and the version is final here too.
    expect((await migrateProject()).replaced).toEqual(['0002_payout_v1.sql']);
    const { rows } = await sql<{ draft_migration: string | null }>`
      SELECT draft_migration FROM ledgerflow.workflow_version WHERE workflow_name = 'payout'`.execute(getStore().db);
    expect(rows).toEqual([{ draft_migration: null }]);

    project.write('src/payout.workflow.ts', changedOnceReleased);
    const refused = await codegen('--check');
    expect(refused.code).toBe(1);
    expect(refused.stdout).toContain(
      'error LF007: workflow "payout" v1 changed since it was generated: the key of step "transfer" changed',
    );
    expect((await codegen('--release', 'nope@1')).stderr).toContain(
      '--release nope@1: workflow "nope" v1 is not declared',
    );
  });
});
