import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CodegenOptionsError, describeOptionsError, runCodegen } from '../../codegen/run-codegen.js';
import { OPTION_FLAGS } from '../../codegen/cli/parse-args.js';
import { REPO_ROOT, TempProject } from './support/temp-project.js';

/** runCodegen is a library call: its errors name its options, not the CLI's flags. */
describe('runCodegen options', () => {
  it('rejects a root that is not a directory, naming the option `root`', async () => {
    const missing = path.join(REPO_ROOT, 'no-such-directory');
    const error = await runCodegen({ root: missing }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CodegenOptionsError);
    expect(error).toBeInstanceOf(RangeError);
    expect(error).toMatchObject({ option: 'root', root: missing, value: missing });
    expect((error as Error).message).toBe(`root must be an existing directory; "${missing}" is not one.`);
    expect(describeOptionsError(error as CodegenOptionsError, OPTION_FLAGS)).toBe(
      `--root must be an existing directory; "${missing}" is not one.`,
    );
  });

  it('rejects an outDir outside the root, naming the options `outDir` and `root`', async () => {
    const error = await runCodegen({ root: REPO_ROOT, outDir: '..' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CodegenOptionsError);
    expect(error).toMatchObject({ option: 'outDir', root: REPO_ROOT, value: '..' });
    expect((error as Error).message).toBe(`outDir must be a directory inside root (${REPO_ROOT}); got "..".`);
    expect(describeOptionsError(error as CodegenOptionsError, OPTION_FLAGS)).toBe(
      `--out must be a directory inside --root (${REPO_ROOT}); got "..".`,
    );
  });

  it('rejects a version to retire that is malformed, naming the option `retire`', async () => {
    const error = await runCodegen({ root: REPO_ROOT, retire: ['Orders@1'] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CodegenOptionsError);
    expect(error).toMatchObject({ option: 'retire', value: 'Orders@1', reason: null });
    expect((error as Error).message).toBe(
      'retire takes a workflow version as <name>@<version> (e.g. orders@1); got "Orders@1".',
    );
    expect(describeOptionsError(error as CodegenOptionsError, OPTION_FLAGS)).toBe(
      '--retire takes a workflow version as <name>@<version> (e.g. orders@1); got "Orders@1".',
    );
  });

  it('rejects retiring a version that is still declared, saying where', async () => {
    const project = new TempProject('ledgerflow-retire');
    try {
      project.write(
        'src/payout.workflow.ts',
        "import { workflow } from 'ledgerflow/dsl';\nimport { z } from 'zod';\n\n" +
          "export const payout = workflow('payout', { version: 1, input: z.object({ id: z.string() }) })\n" +
          "  .step('load', { output: z.object({ ok: z.boolean() }) });\n",
      );
      const error = await runCodegen({ root: project.root, retire: ['payout@1'] }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(CodegenOptionsError);
      expect((error as Error).message).toBe(
        'retire payout@1: workflow "payout" v1 is still declared (src/payout.workflow.ts:4:23); only a version that is no longer declared can be retired.',
      );
    } finally {
      project.remove();
    }
  });
});
